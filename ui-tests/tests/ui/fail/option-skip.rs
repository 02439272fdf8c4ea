// Nothing is recorded implicitly, so there is nothing to `skip`.
use lens::trace_fn;

#[trace_fn(group = "step", skip(batch))]
fn train_step(batch: Vec<u8>) {
    let _ = batch;
}

fn main() {
    train_step(Vec::new());
}
