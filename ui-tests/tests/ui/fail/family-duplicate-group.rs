// A group may be declared once per family.
lens::define_span_group! {
    pub serving {
        groups: [request, batch, request],
    }
}

#[lens::trace_fn(group = serving::REQUEST)]
fn handle() {}

fn main() {
    handle();
    let _ = &serving::FAMILY;
}
