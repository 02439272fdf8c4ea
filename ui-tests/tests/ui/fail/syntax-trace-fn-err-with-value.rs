// `err` is a flag; it takes no value.
use lens::trace_fn;

#[trace_fn(group = "checkpoint", err = true)]
fn save_checkpoint() -> Result<(), String> {
    Ok(())
}

fn main() {
    let _ = save_checkpoint();
}
