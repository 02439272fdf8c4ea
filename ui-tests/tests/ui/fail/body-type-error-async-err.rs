// With `err` on an async fn, a wrong return value points into the body.
use lens::trace_fn;

#[trace_fn(group = "checkpoint", err)]
async fn save_checkpoint(step: u64) -> Result<u64, String> {
    if step == 0 {
        return Err(0);
    }
    Ok(step)
}

fn main() {
    let _ = save_checkpoint(1);
}
