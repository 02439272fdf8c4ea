//! What the instrument sets share: bucket boundaries, units and builders.

use opentelemetry::metrics::{Gauge, Histogram, Meter};

/// Bucket boundaries (seconds) of `gen_ai.server.request.duration`, as the
/// GenAI semantic conventions recommend for their duration histograms.
///
/// ```
/// assert_eq!(lens::metrics::GEN_AI_DURATION_BUCKETS_S[0], 0.01);
/// ```
pub const GEN_AI_DURATION_BUCKETS_S: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// Bucket boundaries (tokens) of `gen_ai.client.token.usage`, as the GenAI
/// semantic conventions recommend (powers of 4 from 1 to 4^13).
///
/// ```
/// assert_eq!(lens::metrics::GEN_AI_TOKEN_BUCKETS[13], 67_108_864.0);
/// ```
pub const GEN_AI_TOKEN_BUCKETS: [f64; 14] = [
    1.0,
    4.0,
    16.0,
    64.0,
    256.0,
    1_024.0,
    4_096.0,
    16_384.0,
    65_536.0,
    262_144.0,
    1_048_576.0,
    4_194_304.0,
    16_777_216.0,
    67_108_864.0,
];

/// Bucket boundaries (seconds) of `gen_ai.server.time_to_first_token`, as
/// the GenAI semantic conventions recommend.
///
/// ```
/// assert_eq!(lens::metrics::GEN_AI_TTFT_BUCKETS_S[0], 0.001);
/// ```
pub const GEN_AI_TTFT_BUCKETS_S: [f64; 16] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// Bucket boundaries (seconds) of `gen_ai.server.time_per_output_token`, as
/// the GenAI semantic conventions recommend.
///
/// ```
/// assert_eq!(*lens::metrics::GEN_AI_TPOT_BUCKETS_S.last().unwrap(), 2.5);
/// ```
pub const GEN_AI_TPOT_BUCKETS_S: [f64; 13] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
];

/// Bucket boundaries (milliseconds) of the `rl.*` and `gym.*` duration
/// histograms: 1 ms to 10 minutes, 1-2.5-5 per decade (the SDK's default
/// boundaries stop at 10 s, shorter than many generations and rollouts).
///
/// ```
/// assert_eq!(*lens::metrics::DURATION_MS_BUCKETS.last().unwrap(), 600_000.0);
/// ```
pub const DURATION_MS_BUCKETS: [f64; 18] = [
    1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1_000.0, 2_500.0, 5_000.0, 10_000.0,
    25_000.0, 50_000.0, 100_000.0, 250_000.0, 600_000.0,
];

/// Bucket boundaries (seconds) of `nv.dl.step.duration`: the GenAI duration
/// buckets extended by two doublings, 10 ms to about 5.5 minutes.
///
/// ```
/// assert_eq!(lens::metrics::STEP_DURATION_BUCKETS_S.len(), 16);
/// ```
pub const STEP_DURATION_BUCKETS_S: [f64; 16] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 163.84,
    327.68,
];

/// How many distinct (operation, provider, model) attribute combinations one
/// `InferenceMetrics` caches; further combinations are still recorded, with
/// their attribute arrays built per record.
///
/// ```
/// assert!(lens::metrics::MAX_INFERENCE_ATTRIBUTE_SETS >= 8);
/// ```
pub const MAX_INFERENCE_ATTRIBUTE_SETS: usize = 64;

pub(super) const UNIT_S: &str = "s";
pub(super) const UNIT_MS: &str = "ms";
pub(super) const UNIT_ONE: &str = "1";
pub(super) const UNIT_TOKEN: &str = "{token}";
pub(super) const UNIT_TOKENS_PER_S: &str = "{token}/s";
pub(super) const UNIT_TFLOPS: &str = "{TFLOP}/s";
pub(super) const UNIT_ITERATION: &str = "{iteration}";
pub(super) const UNIT_SERVER: &str = "{server}";

pub(super) fn gauge(
    meter: &Meter,
    name: &'static str,
    unit: &'static str,
    desc: &'static str,
) -> Gauge<f64> {
    meter
        .f64_gauge(name)
        .with_unit(unit)
        .with_description(desc)
        .build()
}

pub(super) fn histogram(
    meter: &Meter,
    name: &'static str,
    unit: &'static str,
    desc: &'static str,
    bounds: &[f64],
) -> Histogram<f64> {
    meter
        .f64_histogram(name)
        .with_unit(unit)
        .with_description(desc)
        .with_boundaries(bounds.to_vec())
        .build()
}
