// With `err` the body is wrapped; a type error still points into the body.
use lens::trace_fn;

#[trace_fn(group = "checkpoint", err)]
fn save_checkpoint(step: u64) -> Result<u64, String> {
    if step == 0 {
        return Err("step 0".to_owned());
    }
    Ok("saved")
}

fn main() {
    let _ = save_checkpoint(1);
}
