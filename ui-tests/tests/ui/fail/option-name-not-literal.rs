// `name` must be a string literal.
use lens::trace_fn;

const SPAN_NAME: &str = "train.step";

#[trace_fn(group = "step", name = SPAN_NAME)]
fn train_step() {}

fn main() {
    train_step();
}
