// `args` must name parameters of the function.
use lens::trace_fn;

#[trace_fn(group = "step", args(iteration, stpe))]
fn train_step(iteration: u64, lr: f64) {
    let _ = (iteration, lr);
}

fn main() {
    train_step(1, 0.1);
}
