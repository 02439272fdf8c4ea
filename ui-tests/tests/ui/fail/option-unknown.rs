// Unknown options are errors (not warnings) that list the valid options.
use lens::trace_fn;

#[trace_fn(group = "step", level = "info")]
fn train_step() {}

fn main() {
    train_step();
}
