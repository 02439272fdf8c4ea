// `args` records parameters as attribute values, so they must be scalars.
use lens::trace_fn;

struct Batch {
    size: usize,
}

#[trace_fn(group = "step", args(batch))]
fn train_step(batch: Batch) -> usize {
    batch.size
}

fn main() {
    let _ = train_step(Batch { size: 4 });
}
