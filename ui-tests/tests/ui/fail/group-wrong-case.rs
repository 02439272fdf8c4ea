// Group names are lowercase; the error suggests the right spelling.
use lens::trace_fn;

#[trace_fn(group = "Step")]
fn train_step() {}

fn main() {
    train_step();
}
