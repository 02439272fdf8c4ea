//! Quickstart: a small simulated training loop instrumented with all three
//! primitives (`#[trace_fn]`, `managed_span!`, `span_cm!`).
//!
//! ```text
//! cargo run --release -p examples --example quickstart
//! NEMO_LENS_SPAN_GROUPS=per_step cargo run --release -p examples --example quickstart
//! ```
//!
//! Groups come from `NEMO_LENS_SPAN_GROUPS` (default here: `per_step`).

use lens::{managed_span, span_cm, trace_fn};
use std::error::Error;
use std::time::Duration;

struct Model {
    weights: Vec<f64>,
}

#[trace_fn(group = "model_init", name = "model.init", args(params))]
fn init_model(params: usize) -> Model {
    Model {
        weights: (0..params).map(|i| (i as f64).sin()).collect(),
    }
}

#[trace_fn(group = "forward_backward", args(microbatches))]
fn forward_backward(model: &Model, microbatches: u32) -> f64 {
    let mut loss = 0.0;
    for mb in 0..microbatches {
        loss += model.weights.iter().map(|w| w * w).sum::<f64>() / (mb as f64 + 1.0);
    }
    loss / 1e3
}

#[trace_fn(group = "optimizer", fields(lr = lr))]
fn optimizer_step(model: &mut Model, lr: f64) {
    for w in &mut model.weights {
        *w -= lr * *w;
    }
}

#[trace_fn(group = "checkpoint", name = "checkpoint.save", args(iteration), err)]
fn save_checkpoint(model: &Model, iteration: u64) -> Result<usize, String> {
    Ok(model.weights.len() * 8 + iteration as usize)
}

#[trace_fn(group = "evaluate", name = "evaluate")]
fn evaluate(model: &Model) -> f64 {
    // an always-on span, e.g. for a one-off pass you always want to see
    let _pass = span_cm!("eval.pass", samples = 256, split = "validation");
    model.weights.iter().sum::<f64>().abs()
}

fn main() -> Result<(), Box<dyn Error>> {
    // Configuration comes from NEMO_LENS_* variables; this example turns
    // telemetry on and writes OTLP JSON lines to a file unless told otherwise
    // (OTEL_EXPORTER_OTLP_ENDPOINT set: OTLP to that collector).
    let config = examples::example_config(&["NEMO_LENS_"], &[], "per_step")?;
    let telemetry = lens::setup_telemetry(config.clone(), 0, 1)?;

    {
        // join a launcher's trace (TRACEPARENT, e.g. from `lens exec`), if any
        let _launcher = lens::propagation::context_from_env().attach();
        let _job = managed_span!("job", "job", "service.name" = config.service_name.as_str());
        let mut model = init_model(1024);
        for iteration in 0..3u64 {
            let step = managed_span!("step", "train.step", "dl.iteration" = iteration);
            let loss = forward_backward(&model, 2);
            optimizer_step(&mut model, 1e-3);
            if let Some(step) = &step {
                step.set_attribute("loss", loss); // known only after the work ran
            }
        }
        save_checkpoint(&model, 3)?;
        println!("eval score: {:.3}", evaluate(&model));
    }

    telemetry.shutdown(Duration::from_secs(10));
    examples::report(&telemetry, &config);
    Ok(())
}
