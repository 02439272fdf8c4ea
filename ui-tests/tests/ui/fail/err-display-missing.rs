// `err` records the error's Display, so the error type must implement it.
use lens::trace_fn;

#[derive(Debug)]
struct SaveError;

#[trace_fn(group = "checkpoint", err)]
fn save_checkpoint(step: u64) -> Result<u64, SaveError> {
    if step == 0 {
        return Err(SaveError);
    }
    Ok(step)
}

fn main() {
    let _ = save_checkpoint(1);
}
