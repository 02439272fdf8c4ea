use lens::{managed_span, span_cm, trace_fn};

struct Model {
    name: String,
}

#[trace_fn(group = "step", fields(%model.name))]
fn a(model: &Model) {
    let _ = model;
}

fn main() {
    let model = Model { name: "m".into() };
    let _a = managed_span!("step", "s", ?model.name);
    let _b = span_cm!("s", %"literal");
}
