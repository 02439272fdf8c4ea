// `err` on a function returning a type the macro cannot know is not a
// `Result` (it could be an alias): rustc's error points at `err`.
use lens::trace_fn;

struct Checkpoint {
    step: u64,
}

#[trace_fn(group = "checkpoint", err)]
fn save_checkpoint(step: u64) -> Checkpoint {
    Checkpoint { step }
}

fn main() {
    let _ = save_checkpoint(1).step;
}
