//! Quickstart: a small simulated training loop instrumented with all three
//! primitives (`#[trace_fn]`, `managed_span!`, `span_cm!`).
//!
//! ```text
//! cargo run --release -p examples --example quickstart
//! NEMO_LENS_SPAN_GROUPS=per_step cargo run --release -p examples --example quickstart
//! ```
//!
//! Groups come from `NEMO_LENS_SPAN_GROUPS` (default here: `per_step`).

use lens::otel_sdk::error::OTelSdkResult;
use lens::otel_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use lens::{managed_span, span_cm, trace_fn, LensConfig};
use std::error::Error;
use std::sync::{Arc, Mutex};

/// Keeps finished spans so the example can print them as a tree.
#[derive(Debug, Clone, Default)]
struct Collect(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Collect {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.lock().unwrap().extend(batch);
        Ok(())
    }
}

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
    let mut config = LensConfig::from_env()?;
    if std::env::var_os("NEMO_LENS_SPAN_GROUPS").is_none() {
        config.span_groups = "per_step".into();
    }
    config.validate()?;

    let exporter = Collect::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    lens::set_tracer_provider(&provider);
    lens::set_enabled_span_groups(&config.resolve_span_groups()?);

    {
        let _job = managed_span!("job", "job", "service.name" = config.service_name.as_str());
        let mut model = init_model(1024);
        for iteration in 0..3u64 {
            let step = managed_span!("step", "train.step", "nv.dl.iteration" = iteration);
            let loss = forward_backward(&model, 2);
            optimizer_step(&mut model, 1e-3);
            if let Some(step) = &step {
                step.set_attribute("loss", loss); // known only after the work ran
            }
        }
        save_checkpoint(&model, 3)?;
        println!("eval score: {:.3}", evaluate(&model));
    }

    provider.force_flush()?;
    let spans = exporter.0.lock().unwrap().clone();
    println!(
        "{} spans (groups: {}) went to an in-memory exporter:",
        spans.len(),
        config.resolve_span_groups()?.names().join(",")
    );
    print_tree(&spans, lens::otel::trace::SpanId::INVALID, 1);
    provider.shutdown()?;
    Ok(())
}

fn print_tree(spans: &[SpanData], parent: lens::otel::trace::SpanId, depth: usize) {
    let mut children: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.parent_span_id == parent)
        .collect();
    children.sort_by_key(|s| s.start_time);
    for s in children {
        let us = s
            .end_time
            .duration_since(s.start_time)
            .unwrap_or_default()
            .as_micros();
        let attrs: Vec<String> = s
            .attributes
            .iter()
            .map(|kv| format!("{}={}", kv.key, kv.value))
            .collect();
        println!(
            "{:indent$}{} ({us} µs) {}",
            "",
            s.name,
            attrs.join(" "),
            indent = depth * 2
        );
        print_tree(spans, s.span_context.span_id(), depth + 1);
    }
}
