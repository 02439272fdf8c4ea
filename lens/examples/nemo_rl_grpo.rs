//! A NeMo-RL-style GRPO loop: rollout → generation → logprob → reward →
//! advantage → policy_update spans (the `nemo_rl` family), RL metrics
//! (`rl.*`) and inference metrics (`gen_ai.*`) for generation. Shipped with
//! the `nemo-lens` crate.
//!
//! ```text
//! NEMO_LENS_ENABLED=1 NEMO_LENS_EXPORTER=file NEMO_LENS_SPAN_GROUPS=per_step,logprob \
//!     cargo run --release -p nemo-lens --example nemo_rl_grpo
//! # every group, recorded and reported on by `lens record`
//! lens record -- cargo run --release -p nemo-lens --example nemo_rl_grpo
//! # to a collector (OTLP is the default exporter)
//! NEMO_LENS_ENABLED=1 OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 \
//!     cargo run --release -p nemo-lens --example nemo_rl_grpo
//! ```
//!
//! The `nemo_rl` family's groups are names in `NEMO_LENS_SPAN_GROUPS` like
//! the base ones (`per_step`: the step and its phases; `logprob` adds the
//! logprob pass).

use lens::metrics::{InferenceMetrics, InferenceRecord, RlMetrics, RlRecord};
use lens::nemo_rl;
use lens::{managed_span, trace_fn};
use std::error::Error;
use std::time::{Duration, Instant};

const PROMPTS: usize = 4;
const GROUP: usize = 4; // responses per prompt (GRPO group size)

struct Sample {
    tokens: Vec<u32>,
    logprob: f64,
    reward: f64,
}

#[trace_fn(group = nemo_rl::GENERATION, name = "generation", args(prompt))]
fn generate(prompt: usize, inference: &InferenceMetrics) -> Vec<Sample> {
    let started = Instant::now();
    let out: Vec<Sample> = (0..GROUP)
        .map(|g| Sample {
            tokens: (0..(16 + 3 * g + prompt) as u32).collect(),
            logprob: 0.0,
            reward: 0.0,
        })
        .collect();
    std::thread::sleep(Duration::from_millis(3));
    inference.record(&InferenceRecord {
        duration_s: Some(started.elapsed().as_secs_f64()),
        input_tokens: Some(32),
        output_tokens: Some(out.iter().map(|s| s.tokens.len() as u64).sum()),
        model: Some("policy-tiny"),
        ..Default::default()
    });
    out
}

#[trace_fn(group = nemo_rl::LOGPROB, name = "logprob")]
fn logprobs(samples: &mut [Sample]) {
    for s in samples {
        s.logprob = -(s.tokens.len() as f64).ln();
    }
}

#[trace_fn(group = nemo_rl::REWARD, name = "reward")]
fn rewards(samples: &mut [Sample]) {
    for (i, s) in samples.iter_mut().enumerate() {
        s.reward = if i % 2 == 0 { 1.0 } else { 0.25 };
    }
}

#[trace_fn(group = nemo_rl::ADVANTAGE, name = "advantage")]
fn advantages(samples: &[Sample]) -> Vec<f64> {
    let mean = samples.iter().map(|s| s.reward).sum::<f64>() / samples.len() as f64;
    samples.iter().map(|s| s.reward - mean).collect()
}

#[trace_fn(group = nemo_rl::POLICY_UPDATE, name = "policy_update", fields(samples = adv.len()))]
fn policy_update(adv: &[f64]) -> (f64, f64) {
    let loss = -adv.iter().sum::<f64>() / adv.len() as f64 + 0.1;
    (loss, 0.01)
}

fn main() -> Result<(), Box<dyn Error>> {
    let telemetry = lens::setup_telemetry_from_env()?;
    let meter = telemetry.meter();
    let rl = RlMetrics::new(&meter);
    let inference = InferenceMetrics::new(&meter);

    {
        let _job = managed_span!("job", "grpo.job", algorithm = "grpo");
        for step in 0..3u64 {
            let _step = managed_span!("step", "rl.step", "dl.iteration" = step);
            let rollout_started = Instant::now();
            let mut samples = Vec::new();
            {
                let _rollout = managed_span!(nemo_rl::ROLLOUT, "rollout", prompts = PROMPTS);
                let gen_started = Instant::now();
                for p in 0..PROMPTS {
                    samples.extend(generate(p, &inference));
                }
                rl.record(&RlRecord {
                    generation_duration_ms: Some(gen_started.elapsed().as_secs_f64() * 1e3),
                    ..Default::default()
                });
                logprobs(&mut samples);
                rewards(&mut samples);
            }
            let adv = advantages(&samples);
            let (policy_loss, kl) = policy_update(&adv);
            let tokens: usize = samples.iter().map(|s| s.tokens.len()).sum();
            let secs = rollout_started.elapsed().as_secs_f64();
            rl.record(&RlRecord {
                reward_mean: Some(
                    samples.iter().map(|s| s.reward).sum::<f64>() / samples.len() as f64,
                ),
                kl_divergence: Some(kl),
                policy_loss: Some(policy_loss),
                entropy: Some(
                    -samples.iter().map(|s| s.logprob).sum::<f64>() / samples.len() as f64,
                ),
                response_length_mean: Some(tokens as f64 / samples.len() as f64),
                grad_norm: Some(0.5),
                learning_rate: Some(1e-6),
                tokens_per_sec: Some(tokens as f64 / secs),
                rollout_duration_ms: Some(secs * 1e3),
                ..Default::default()
            });
        }
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
