//! A training loop as a job launched by torchrun, `mpirun` or `srun` would
//! run it: configuration from `NEMO_LENS_*`, rank, world and run id from the
//! launcher, the three primitives, and a clean shutdown. Shipped with the
//! `nemo-lens` crate.
//!
//! ```text
//! NEMO_LENS_ENABLED=1 NEMO_LENS_EXPORTER=file NEMO_LENS_SPAN_GROUPS=per_step \
//!     cargo run -p nemo-lens --example train_loop
//! mpirun -np 2 -x NEMO_LENS_ENABLED=1 -x NEMO_LENS_EXPORTER=file \
//!     -x NEMO_LENS_EXPORT_STRATEGY=all_ranks target/debug/examples/train_loop
//! ```

use lens::{managed_span, span_cm, trace_fn};
use std::time::Duration;

#[trace_fn(group = "forward_backward", args(microbatches))]
fn forward_backward(weights: &[f64], microbatches: u32) -> f64 {
    (0..microbatches)
        .map(|mb| weights.iter().map(|w| w * w).sum::<f64>() / f64::from(mb + 1))
        .sum::<f64>()
        / 1e3
}

#[trace_fn(group = "optimizer", fields(lr = lr))]
fn optimizer_step(weights: &mut [f64], lr: f64) {
    for w in weights {
        *w -= lr * *w;
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let telemetry = lens::setup_telemetry_from_env()?;
    {
        // join a launcher's trace (TRACEPARENT, e.g. from `lens exec`), if any
        let _launcher = lens::propagation::context_from_env().attach();
        let _job = managed_span!("job", "train.job");
        let mut weights: Vec<f64> = (0..256).map(|i| f64::from(i).sin()).collect();
        for iteration in 0..5u64 {
            let step = managed_span!("step", "train.step", "dl.iteration" = iteration);
            let loss = forward_backward(&weights, 2);
            optimizer_step(&mut weights, 1e-3);
            step.set_attribute("loss", loss);
        }
        let _eval = span_cm!("eval.pass", samples = 64);
    }
    telemetry.shutdown(Duration::from_secs(10));
    println!("run {}: done", telemetry.run_id());
    Ok(())
}
