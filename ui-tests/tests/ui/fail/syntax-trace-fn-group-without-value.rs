// `group` needs a value.
use lens::trace_fn;

#[trace_fn(group)]
fn train_step() {}

fn main() {
    train_step();
}
