// `group` is required.
use lens::trace_fn;

#[trace_fn(name = "train.step")]
fn train_step() {}

fn main() {
    train_step();
}
