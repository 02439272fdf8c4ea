use lens::{span_cm, trace_fn};

struct Opaque;

#[trace_fn(group = "step", fields(%o))]
fn a(o: &Opaque) {}

#[trace_fn(group = "step", err(Debug))]
fn b() -> Result<(), Opaque> {
    Ok(())
}

fn main() {
    let o = Opaque;
    let _g = span_cm!("s", shown = ?o);
}
