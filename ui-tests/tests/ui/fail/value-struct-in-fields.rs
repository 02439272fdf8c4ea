// A struct is not a span attribute value.
use lens::trace_fn;

struct Batch {
    size: usize,
}

#[trace_fn(group = "step", fields(batch = batch))]
fn train_step(batch: &Batch) -> usize {
    batch.size
}

fn main() {
    let _ = train_step(&Batch { size: 4 });
}
