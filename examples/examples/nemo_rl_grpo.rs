//! A NeMo-RL-style GRPO loop: rollout → generation → logprob → reward →
//! advantage → policy_update spans (the `nemo_rl` family), RL metrics
//! (`rl.*`) and inference metrics (`gen_ai.*`) for generation.
//!
//! ```text
//! cargo run --release -p examples --example nemo_rl_grpo
//! OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 cargo run --release -p examples --example nemo_rl_grpo
//! ```

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
    let config = examples::example_config(
        &["NEMO_RL_OTEL_", "NEMO_LENS_"],
        &[&nemo_rl::FAMILY],
        "per_step,logprob",
    )?;
    let telemetry = lens::setup_telemetry(config.clone(), 0, 1)?;
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

    telemetry.shutdown(Duration::from_secs(10));
    examples::report(&telemetry, &config);
    Ok(())
}
