//! What the instrument sets share: bucket boundaries, units and builders.

use opentelemetry::metrics::{Gauge, Histogram, Meter};

/// Bucket boundaries (seconds) the GenAI semantic conventions recommend for
/// `gen_ai.server.request.duration`: applied by the opt-in view of
/// `NEMO_LENS_FINE_BUCKETS` ([`fine_bucket_boundaries`]); by default the
/// histogram has the SDK's boundaries, as the Python library's.
///
/// ```
/// assert_eq!(lens::metrics::GEN_AI_DURATION_BUCKETS_S[0], 0.01);
/// ```
pub const GEN_AI_DURATION_BUCKETS_S: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// Bucket boundaries (tokens) the GenAI semantic conventions recommend for
/// `gen_ai.client.token.usage` (powers of 4 from 1 to 4^13): applied by the
/// opt-in view of `NEMO_LENS_FINE_BUCKETS` ([`fine_bucket_boundaries`]).
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

/// Finer bucket boundaries (milliseconds) for the `rl.*` and `gym.*`
/// duration histograms: 1 ms to 10 minutes, 1-2.5-5 per decade (the SDK's
/// default boundaries, which the Python library uses and lens uses by
/// default, stop at 10 s). Applied by the opt-in view of
/// `NEMO_LENS_FINE_BUCKETS` ([`fine_bucket_boundaries`]).
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

/// The SDK's default histogram bucket boundaries, which the Python library's
/// histograms have (it gives none) and so do lens's histograms of the same
/// names unless `NEMO_LENS_FINE_BUCKETS` is on.
///
/// ```
/// assert_eq!(lens::metrics::SDK_DEFAULT_BUCKETS.last(), Some(&10_000.0));
/// ```
pub const SDK_DEFAULT_BUCKETS: [f64; 15] = [
    0.0, 5.0, 10.0, 25.0, 50.0, 75.0, 100.0, 250.0, 500.0, 750.0, 1_000.0, 2_500.0, 5_000.0,
    7_500.0, 10_000.0,
];

/// The finer boundaries the opt-in view of `NEMO_LENS_FINE_BUCKETS` gives a
/// histogram that the Python library shares (its `rl.*`, `gym.*` and GenAI
/// ones); `None` for any other name. Off by default: a histogram with other
/// boundaries than the Python ranks' cannot be summed with theirs.
///
/// ```
/// use lens::metrics::{fine_bucket_boundaries, DURATION_MS_BUCKETS};
/// assert_eq!(fine_bucket_boundaries("rl.rollout.duration_ms"), Some(&DURATION_MS_BUCKETS[..]));
/// assert_eq!(fine_bucket_boundaries("nv.dl.step.duration"), None);
/// ```
pub fn fine_bucket_boundaries(name: &str) -> Option<&'static [f64]> {
    use crate::api::semconv as sc;
    Some(match name {
        sc::METRIC_GEN_AI_SERVER_REQUEST_DURATION => &GEN_AI_DURATION_BUCKETS_S,
        sc::METRIC_GEN_AI_CLIENT_TOKEN_USAGE => &GEN_AI_TOKEN_BUCKETS,
        sc::METRIC_RL_GENERATION_DURATION_MS
        | sc::METRIC_RL_ROLLOUT_DURATION_MS
        | sc::METRIC_GYM_SERVER_REQUEST_DURATION_MS
        | sc::METRIC_GYM_ROLLOUT_DURATION_MS
        | sc::METRIC_GYM_VERIFY_DURATION_MS => &DURATION_MS_BUCKETS,
        _ => return None,
    })
}

pub(super) const UNIT_S: &str = "s";
pub(super) const UNIT_MS: &str = "ms";
pub(super) const UNIT_ONE: &str = "1";
pub(super) const UNIT_TOKEN: &str = "{token}";
pub(super) const UNIT_TOKENS_PER_S: &str = "{token}/s";
pub(super) const UNIT_TFLOPS: &str = "{TFLOP}/s";
pub(super) const UNIT_ITERATION: &str = "{iteration}";

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

/// A gauge without a unit, as the Python library creates its `rl.*` and
/// `gym.*` gauges (a unit would change the series name in Prometheus:
/// `rl_reward_mean_ratio` instead of `rl_reward_mean`).
pub(super) fn unitless_gauge(meter: &Meter, name: &'static str, desc: &'static str) -> Gauge<f64> {
    meter.f64_gauge(name).with_description(desc).build()
}

/// A histogram with the SDK's default boundaries, as the Python library
/// creates its histograms (`NEMO_LENS_FINE_BUCKETS` opts into finer ones).
pub(super) fn shared_histogram(
    meter: &Meter,
    name: &'static str,
    unit: &'static str,
    desc: &'static str,
) -> Histogram<f64> {
    meter
        .f64_histogram(name)
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
