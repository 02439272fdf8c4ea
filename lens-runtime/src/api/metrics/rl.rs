//! RL post-training metrics (`rl.*`).

use super::common::*;
use crate::api::semconv as sc;
use opentelemetry::metrics::{Gauge, Histogram, Meter};
use opentelemetry::KeyValue;

/// One RL step's values, as [`RlMetrics::record`] takes them. Unset fields
/// are not recorded.
///
/// ```
/// let r = lens::metrics::RlRecord { reward_mean: Some(0.7), ..Default::default() };
/// assert_eq!(r.entropy, None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RlRecord {
    /// → gauge `rl.reward.mean` (no unit, as in Python).
    pub reward_mean: Option<f64>,
    /// → gauge `rl.kl_divergence` (no unit, as in Python).
    pub kl_divergence: Option<f64>,
    /// → gauge `rl.policy_loss` (no unit, as in Python).
    pub policy_loss: Option<f64>,
    /// → gauge `rl.value_loss` (no unit, as in Python).
    pub value_loss: Option<f64>,
    /// → gauge `rl.entropy` (no unit, as in Python).
    pub entropy: Option<f64>,
    /// → gauge `rl.response_length.mean` (no unit, as in Python).
    pub response_length_mean: Option<f64>,
    /// → gauge `rl.grad_norm` (no unit, as in Python).
    pub grad_norm: Option<f64>,
    /// → gauge `rl.learning_rate` (no unit, as in Python).
    pub learning_rate: Option<f64>,
    /// → gauge `rl.throughput.tokens_per_sec` (`{token}/s`).
    pub tokens_per_sec: Option<f64>,
    /// → histogram `rl.generation.duration_ms` (`ms`).
    pub generation_duration_ms: Option<f64>,
    /// → histogram `rl.rollout.duration_ms` (`ms`).
    pub rollout_duration_ms: Option<f64>,
}

/// RL post-training instruments (`rl.*`): nine gauges and two duration
/// histograms, see [`RlRecord`].
///
/// ```
/// use lens::{metrics::RlMetrics, metrics::RlRecord};
/// let meter = lens::otel::global::meter("doc");
/// let rl = RlMetrics::new(&meter);
/// rl.record(&RlRecord { reward_mean: Some(0.4), kl_divergence: Some(0.01), ..Default::default() });
/// ```
#[derive(Debug)]
pub struct RlMetrics {
    reward_mean: Gauge<f64>,
    kl_divergence: Gauge<f64>,
    policy_loss: Gauge<f64>,
    value_loss: Gauge<f64>,
    entropy: Gauge<f64>,
    response_length_mean: Gauge<f64>,
    grad_norm: Gauge<f64>,
    learning_rate: Gauge<f64>,
    tokens_per_sec: Gauge<f64>,
    generation_duration: Histogram<f64>,
    rollout_duration: Histogram<f64>,
    attrs: Box<[KeyValue]>,
}

impl RlMetrics {
    /// Creates the instruments on `meter` (once per meter).
    ///
    /// ```
    /// let meter = lens::otel::global::meter("doc");
    /// let _rl = lens::metrics::RlMetrics::new(&meter);
    /// ```
    pub fn new(meter: &Meter) -> Self {
        Self::with_attributes(meter, [])
    }

    /// Like [`new`](Self::new), adding constant `attributes` to every point.
    ///
    /// ```
    /// use lens::otel::KeyValue;
    /// let meter = lens::otel::global::meter("doc");
    /// let _rl = lens::metrics::RlMetrics::with_attributes(&meter, [KeyValue::new("algo", "grpo")]);
    /// ```
    pub fn with_attributes(meter: &Meter, attributes: impl IntoIterator<Item = KeyValue>) -> Self {
        // no unit where the Python library gives none; its histograms'
        // boundaries (the SDK's)
        let g = |name, desc| unitless_gauge(meter, name, desc);
        let h = |name, desc| shared_histogram(meter, name, UNIT_MS, desc);
        RlMetrics {
            reward_mean: g(sc::METRIC_RL_REWARD_MEAN, "Mean reward of the last batch."),
            kl_divergence: g(
                sc::METRIC_RL_KL_DIVERGENCE,
                "KL divergence between the policy and the reference policy.",
            ),
            policy_loss: g(sc::METRIC_RL_POLICY_LOSS, "Policy loss."),
            value_loss: g(sc::METRIC_RL_VALUE_LOSS, "Value loss."),
            entropy: g(sc::METRIC_RL_ENTROPY, "Policy entropy."),
            response_length_mean: g(
                sc::METRIC_RL_RESPONSE_LENGTH_MEAN,
                "Mean length of generated responses.",
            ),
            grad_norm: g(sc::METRIC_RL_GRAD_NORM, "Gradient norm."),
            learning_rate: g(sc::METRIC_RL_LEARNING_RATE, "Learning rate."),
            tokens_per_sec: gauge(
                meter,
                sc::METRIC_RL_THROUGHPUT_TOKENS_PER_SEC,
                UNIT_TOKENS_PER_S,
                "Token throughput.",
            ),
            generation_duration: h(
                sc::METRIC_RL_GENERATION_DURATION_MS,
                "Duration of one generation phase.",
            ),
            rollout_duration: h(
                sc::METRIC_RL_ROLLOUT_DURATION_MS,
                "Duration of one rollout.",
            ),
            attrs: attributes.into_iter().collect(),
        }
    }

    /// Records what `record` holds.
    ///
    /// ```
    /// use lens::{metrics::RlMetrics, metrics::RlRecord};
    /// let meter = lens::otel::global::meter("doc");
    /// RlMetrics::new(&meter).record(&RlRecord { rollout_duration_ms: Some(850.0), ..Default::default() });
    /// ```
    pub fn record(&self, r: &RlRecord) {
        let a = &*self.attrs;
        let set = |g: &Gauge<f64>, v: Option<f64>| {
            if let Some(v) = v {
                g.record(v, a);
            }
        };
        set(&self.reward_mean, r.reward_mean);
        set(&self.kl_divergence, r.kl_divergence);
        set(&self.policy_loss, r.policy_loss);
        set(&self.value_loss, r.value_loss);
        set(&self.entropy, r.entropy);
        set(&self.response_length_mean, r.response_length_mean);
        set(&self.grad_norm, r.grad_norm);
        set(&self.learning_rate, r.learning_rate);
        set(&self.tokens_per_sec, r.tokens_per_sec);
        if let Some(v) = r.generation_duration_ms {
            self.generation_duration.record(v, a);
        }
        if let Some(v) = r.rollout_duration_ms {
            self.rollout_duration.record(v, a);
        }
    }
}
