//! A token-streaming inference handler: spans of the `inference_server`
//! family (`request`, `prefill`, `decode`, `sample`) and the GenAI server
//! metrics `gen_ai.server.time_to_first_token` and
//! `gen_ai.server.time_per_output_token` (with request duration and token
//! usage), timed by `lens::metrics::TokenTimer`.
//!
//! ```text
//! NEMO_LENS_ENABLED=1 NEMO_LENS_EXPORTER=file NEMO_LENS_SPAN_GROUPS=per_step \
//!     cargo run --release -p examples --example token_streaming
//! # every group (one span per sampled token too), recorded and reported on
//! lens record -- cargo run --release -p examples --example token_streaming
//! ```
//!
//! `per_step`: request, prefill and decode spans; `all` adds one span per
//! sampled token.

use lens::inference_server as inf;
use lens::metrics::{InferenceMetrics, InferenceRecord, TokenTimer};
use lens::{managed_span, trace_fn, InSpan as _};
use std::error::Error;
use std::time::Duration;

/// The prompt's forward pass; returns the first token.
#[trace_fn(group = inf::PREFILL, args(prompt_tokens))]
async fn prefill(prompt_tokens: u64) -> u32 {
    tokio::time::sleep(Duration::from_millis(prompt_tokens / 8)).await;
    7
}

/// One decode step: a forward pass, then sampling.
async fn decode_step(prev: u32) -> u32 {
    tokio::time::sleep(Duration::from_millis(2)).await;
    let _sample = managed_span!(inf::SAMPLE, "sample", temperature = 0.7);
    prev.wrapping_mul(31).wrapping_add(17) % 32_000
}

/// Streams `max_tokens` tokens to `send`, recording spans and metrics.
#[trace_fn(group = inf::REQUEST, name = "generate", kind = server, args(max_tokens))]
async fn generate(
    metrics: &InferenceMetrics,
    prompt_tokens: u64,
    max_tokens: u64,
    send: impl Fn(u32),
) -> u64 {
    let mut timer = TokenTimer::start();
    let mut token = prefill(prompt_tokens).await;
    timer.token(); // time to first token
    send(token);
    async {
        for _ in 1..max_tokens {
            token = decode_step(token).await;
            timer.token();
            send(token);
        }
    }
    .in_span(managed_span!(inf::DECODE, "decode"))
    .await;
    let record = timer.finish(InferenceRecord {
        input_tokens: Some(prompt_tokens),
        model: Some("tiny-llm"),
        operation: Some("chat"),
        ..Default::default()
    });
    metrics.record(&record);
    timer.tokens()
}

fn main() -> Result<(), Box<dyn Error>> {
    let telemetry = lens::setup_telemetry_from_env()?;
    let metrics = InferenceMetrics::new(&telemetry.meter());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut streamed = 0;
        for prompt_tokens in [64, 128] {
            streamed += generate(&metrics, prompt_tokens, 8, |_token| {}).await;
        }
        println!("streamed {streamed} tokens");
    });
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
