// A type error in an instrumented async body points into the body.
use lens::trace_fn;

#[trace_fn(group = "step", args(iteration))]
async fn train_step(iteration: u64) -> f64 {
    let loss: f64 = 0.5;
    loss * iteration
}

fn main() {
    let _ = train_step(1);
}
