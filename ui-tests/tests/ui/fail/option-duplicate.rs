// Each option may appear once; the error sits on the second one.
use lens::trace_fn;

#[trace_fn(group = "step", name = "a", name = "b")]
fn train_step() {}

fn main() {
    train_step();
}
