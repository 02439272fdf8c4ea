// A typo in a base group name is a compile error that lists the valid groups.
use lens::trace_fn;

#[trace_fn(group = "stpe")]
fn train_step() {}

fn main() {
    train_step();
}
