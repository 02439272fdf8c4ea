// `err` needs a function that returns a Result.
use lens::trace_fn;

#[trace_fn(group = "checkpoint", err)]
fn save_checkpoint(step: u64) {
    let _ = step;
}

fn main() {
    save_checkpoint(1);
}
