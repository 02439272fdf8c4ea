//! Quickstart: a small simulated training loop instrumented with all three
//! primitives (`#[trace_fn]`, `managed_span!`, `span_cm!`). It needs no
//! environment and no collector: run it, and it writes OTLP JSON lines into
//! `lens-telemetry/` and prints where.
//!
//! ```text
//! cargo run --release -p examples --example quickstart
//! # the same job, recorded and reported on by the `lens` command
//! lens record -- cargo run --release -p examples --example quickstart
//! # your own choices win over the ones this program makes for you
//! NEMO_LENS_SPAN_GROUPS=all cargo run --release -p examples --example quickstart
//! NEMO_LENS_EXPORTER=otlp OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 \
//!     cargo run --release -p examples --example quickstart
//! ```
//!
//! The library's own defaults are telemetry off and OTLP to a collector on
//! `localhost:4317` (what a job that a collector watches wants). This
//! program, meant to show something on a first run, chooses otherwise in
//! its own `main` below, only where the `NEMO_LENS_*` variables say nothing:
//! on, to a file, the `per_step` span groups. A job launched by torchrun,
//! `mpirun` or `srun` calls `lens::setup_telemetry_from_env()` instead and
//! is switched on from its environment (see `train_loop` in `nemo-lens`).

use lens::{managed_span, span_cm, trace_fn, ExporterKind, LensConfig};
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
    // Everything the user set (NEMO_LENS_*, OTEL_SERVICE_NAME, ...) ...
    let mut config = LensConfig::from_env()?;
    // ... and this program's choices where the user set nothing: record
    // (unless NEMO_LENS_ENABLED or OTEL_SDK_DISABLED says otherwise), into
    // lens-telemetry/<run>-rank0.otlp.jsonl, the per-step groups.
    let user_set = |var: &str| std::env::var(var).is_ok_and(|v| !v.trim().is_empty());
    if !user_set("NEMO_LENS_ENABLED") && !user_set("OTEL_SDK_DISABLED") {
        config.enabled = true;
    }
    if !user_set("NEMO_LENS_EXPORTER") {
        config.exporter = ExporterKind::File;
    }
    if !user_set("NEMO_LENS_SPAN_GROUPS") {
        config.span_groups = "per_step".into();
    }
    // one process: rank 0 of 1
    let telemetry = lens::setup_telemetry(config, 0, 1)?;

    {
        // join a launcher's trace (TRACEPARENT, e.g. from `lens exec`), if any
        let _launcher = lens::propagation::context_from_env().attach();
        let _job = managed_span!("job", "job");
        let mut model = init_model(1024);
        for iteration in 0..3u64 {
            let step = managed_span!("step", "train.step", "dl.iteration" = iteration);
            let loss = forward_backward(&model, 2);
            optimizer_step(&mut model, 1e-3);
            step.set_attribute("loss", loss); // known only after the work ran
        }
        save_checkpoint(&model, 3)?;
        println!("eval score: {:.3}", evaluate(&model));
    }

    // lost telemetry is reported (one warning line), never an error
    let report = telemetry.shutdown(Duration::from_secs(10));
    if let Some(path) = telemetry.file_path() {
        println!(
            "telemetry went to {} ({} spans)",
            path.display(),
            report.traces.exported
        );
        // the last line: how to look at what was written
        println!(
            "look at it: cargo run --release -p nemo-lens-cli -- report {p}    (or: report --html run.html {p})",
            p = path.display()
        );
    }
    Ok(())
}
