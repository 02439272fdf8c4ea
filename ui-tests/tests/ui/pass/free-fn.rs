// A free function: default name, explicit name, fields and args.
use lens::trace_fn;

#[trace_fn(group = "job")]
fn run_job() -> u32 {
    7
}

#[trace_fn(
    group = "step",
    name = "train.step",
    args(iteration, lr),
    fields(phase = "train")
)]
fn train_step(iteration: u64, lr: f64, batch: &[f32]) -> f64 {
    lr * iteration as f64 + f64::from(batch.len() as u32)
}

#[trace_fn(group = "evaluate")]
fn nothing() {}

fn main() {
    for spec in ["all", ""] {
        lens::set_enabled_span_groups(&lens::SpanGroupSet::resolve(spec, &[]).unwrap());
        assert_eq!(run_job(), 7);
        assert_eq!(train_step(2, 0.5, &[1.0, 2.0]), 3.0);
        nothing();
    }
}
