// A parameter recorded by `args` already has its key.
use lens::trace_fn;

#[trace_fn(group = "step", args(iteration), fields(iteration = iteration + 1))]
fn train_step(iteration: u64) {
    let _ = iteration;
}

fn main() {
    train_step(1);
}
