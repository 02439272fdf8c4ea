// `err` on an async fn that returns an Option.
use lens::trace_fn;

#[trace_fn(group = "checkpoint", err)]
async fn latest_checkpoint(step: u64) -> Option<u64> {
    step.checked_sub(1)
}

fn main() {
    let _ = latest_checkpoint(1);
}
