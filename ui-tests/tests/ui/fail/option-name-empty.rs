// A span name cannot be empty.
use lens::trace_fn;

#[trace_fn(group = "step", name = "")]
fn train_step() {}

fn main() {
    train_step();
    let _g = lens::span_cm!("");
}
