//! A Megatron-style pretraining loop: the `megatron` span-group family
//! (microbatch, layer, communication, data_loading), training metrics
//! (`nv.dl.*`), checkpoint and evaluate spans, and logs bridged to
//! OpenTelemetry with the active trace and span ids. Shipped with the
//! `nemo-lens` crate.
//!
//! ```text
//! NEMO_LENS_ENABLED=1 NEMO_LENS_EXPORTER=file NEMO_LENS_LOGS_ENABLED=1 \
//!     NEMO_LENS_SPAN_GROUPS=per_step,microbatch \
//!     cargo run --release -p nemo-lens --example megatron_pretrain
//! # every group of every family, recorded and reported on by `lens record`
//! NEMO_LENS_LOGS_ENABLED=1 lens record -- cargo run --release -p nemo-lens --example megatron_pretrain
//! # to a collector (OTLP is the default exporter)
//! NEMO_LENS_ENABLED=1 NEMO_LENS_LOGS_ENABLED=1 OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 \
//!     cargo run --release -p nemo-lens --example megatron_pretrain
//! ```
//!
//! The `megatron` family's groups are names in `NEMO_LENS_SPAN_GROUPS` like
//! the base ones (`per_step,microbatch`: steps, microbatches, data loading
//! and communication; `layer` adds a span per layer forward). Without
//! `NEMO_LENS_LOGS_ENABLED` the log bridge is off and only spans and
//! metrics are recorded.

use lens::logs::{log, setup_logging_bridge, LogBridgeOptions};
use lens::megatron;
use lens::metrics::{TrainingMetrics, TrainingRecord};
use lens::{managed_span, trace_fn};
use std::error::Error;
use std::time::{Duration, Instant};

const LAYERS: u32 = 4;
const MICROBATCHES: u32 = 2;
const TOKENS_PER_STEP: f64 = 8.0 * 4096.0;

#[trace_fn(group = megatron::DATA_LOADING, name = "data.next_batch", args(step))]
fn next_batch(step: u64) -> Vec<f32> {
    (0..256)
        .map(|i| ((i as u64 + step) % 17) as f32 / 17.0)
        .collect()
}

#[trace_fn(group = megatron::LAYER, name = "layer.forward", args(layer))]
fn layer_forward(layer: u32, x: &mut [f32]) {
    for v in x.iter_mut() {
        *v = (*v * 1.01 + layer as f32 * 1e-3).tanh();
    }
}

#[trace_fn(group = megatron::COMMUNICATION, name = "allreduce.grads", fields(bytes = n * 4))]
fn all_reduce(n: usize) {
    std::thread::sleep(Duration::from_micros(200 + n as u64 / 4));
}

#[trace_fn(group = "checkpoint", name = "checkpoint.save", args(step), err)]
fn save_checkpoint(step: u64) -> Result<(), String> {
    log::info!(target: "trainer::ckpt", "saved checkpoint at step {step}");
    Ok(())
}

#[trace_fn(group = "evaluate", name = "evaluate")]
fn evaluate(step: u64) -> f64 {
    let loss = 3.0 / (1.0 + step as f64);
    log::info!(target: "trainer::eval", "validation loss {loss:.3}");
    loss
}

fn main() -> Result<(), Box<dyn Error>> {
    let telemetry = lens::setup_telemetry_from_env()?;
    let _bridge = setup_logging_bridge(&telemetry, LogBridgeOptions::new().with_target("trainer"))?;
    let metrics = TrainingMetrics::new(&telemetry.meter());

    {
        let _job = managed_span!("job", "pretrain.job", "nemo.model" = "gpt-tiny");
        for step in 0..4u64 {
            let started = Instant::now();
            let step_span = managed_span!("step", "train.step", "dl.iteration" = step);
            let mut loss = 0.0;
            for mb in 0..MICROBATCHES {
                let _mb = managed_span!(megatron::MICROBATCH, "microbatch", microbatch = mb);
                let mut x = next_batch(step);
                {
                    let _fb = managed_span!("forward_backward", "forward_backward");
                    for layer in 0..LAYERS {
                        layer_forward(layer, &mut x);
                    }
                }
                loss += x.iter().map(|v| f64::from(*v)).sum::<f64>() / x.len() as f64;
                all_reduce(x.len());
            }
            {
                let _opt = managed_span!("optimizer", "optimizer.step", lr = 3e-4);
            }
            loss /= f64::from(MICROBATCHES);
            step_span.set_attribute("loss", loss);
            let secs = started.elapsed().as_secs_f64();
            metrics.record(&TrainingRecord {
                step_duration_s: Some(secs),
                loss: Some(loss),
                grad_norm: Some(1.0 / (1.0 + step as f64)),
                learning_rate: Some(3e-4),
                tokens_per_sec: Some(TOKENS_PER_STEP / secs),
                tflops: Some(TOKENS_PER_STEP * 6.0 * 125e6 / secs / 1e12),
                iterations: Some(1),
            });
            log::info!(target: "trainer::loop", "step {step} loss {loss:.4}");
        }
        save_checkpoint(4)?;
        evaluate(4);
    }

    // lost telemetry is reported (one warning line), never an error
    let report = telemetry.shutdown(Duration::from_secs(10));
    if let Some(path) = telemetry.file_path() {
        println!(
            "telemetry went to {} ({} spans)",
            path.display(),
            report.traces.exported
        );
    }
    Ok(())
}
