// `err` on a function that does not return a Result.
use lens::trace_fn;

#[trace_fn(group = "checkpoint", err)]
fn save_checkpoint(step: u64) -> u64 {
    step
}

fn main() {
    let _ = save_checkpoint(1);
}
