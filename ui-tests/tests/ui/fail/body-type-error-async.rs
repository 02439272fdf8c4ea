// A type error in an instrumented async body points into the body, also for
// the tail expression (the async return type is inferred through the span
// wrapper).
use lens::trace_fn;

#[trace_fn(group = "step", args(iteration))]
async fn train_step(iteration: u64) -> f64 {
    let scale: f64 = 0.5;
    let _ = scale;
    iteration
}

fn main() {
    let _ = train_step(1);
}
