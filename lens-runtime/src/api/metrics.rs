//! Instrument sets: inference (GenAI semantic conventions), RL, Gym and
//! training (`nv.dl.*`) metrics.
//!
//! Each set is a struct holding its instruments, created once per [`Meter`]
//! with `::new(&meter)` (keep it next to the meter, e.g. in a `OnceLock` or a
//! field of your trainer), and recorded through a record struct of `Option`
//! fields, so a caller records only what it has:
//!
//! ```
//! use lens_runtime::metrics::{InferenceMetrics, InferenceRecord};
//! let meter = lens_runtime::otel::global::meter("doc");
//! let inference = InferenceMetrics::new(&meter);
//! inference.record(&InferenceRecord {
//!     duration_s: Some(0.2),
//!     input_tokens: Some(100),
//!     output_tokens: Some(20),
//!     model: Some("llama"),
//!     ..Default::default()
//! });
//! ```
//!
//! Recording allocates nothing beyond what the SDK needs for a new attribute
//! set: the attribute arrays are built when a set is created (the inference
//! set caches one array per operation / provider / model combination, up to
//! [`MAX_INFERENCE_ATTRIBUTE_SETS`]). Names come from [`crate::api::semconv`];
//! the README's "Metrics" section has the full table.
//!
//! Choices the design left open, for the training set: the names mirror the
//! `nv.dl.*` attributes (`nv.dl.iteration` → counter `nv.dl.iterations`);
//! the step duration is in seconds (`nv.dl.step.duration`, as OpenTelemetry
//! recommends for durations) while the `rl.*` / `gym.*` durations keep the
//! `_ms` names and `ms` unit of the Python library; loss, gradient norm and
//! learning rate are dimensionless gauges (`1`) holding the last step's
//! value; TFLOP/s uses the UCUM annotation form `{TFLOP}/s`.

use crate::api::semconv as sc;
use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter};
use opentelemetry::{KeyValue, Value};
use std::sync::{Arc, PoisonError, RwLock};

/// Bucket boundaries (seconds) of `gen_ai.server.request.duration`, as the
/// GenAI semantic conventions recommend for their duration histograms.
///
/// ```
/// assert_eq!(lens_runtime::metrics::GEN_AI_DURATION_BUCKETS_S[0], 0.01);
/// ```
pub const GEN_AI_DURATION_BUCKETS_S: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// Bucket boundaries (tokens) of `gen_ai.client.token.usage`, as the GenAI
/// semantic conventions recommend (powers of 4 from 1 to 4^13).
///
/// ```
/// assert_eq!(lens_runtime::metrics::GEN_AI_TOKEN_BUCKETS[13], 67_108_864.0);
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

/// Bucket boundaries (milliseconds) of the `rl.*` and `gym.*` duration
/// histograms: 1 ms to 10 minutes, 1-2.5-5 per decade (the SDK's default
/// boundaries stop at 10 s, shorter than many generations and rollouts).
///
/// ```
/// assert_eq!(*lens_runtime::metrics::DURATION_MS_BUCKETS.last().unwrap(), 600_000.0);
/// ```
pub const DURATION_MS_BUCKETS: [f64; 18] = [
    1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1_000.0, 2_500.0, 5_000.0, 10_000.0,
    25_000.0, 50_000.0, 100_000.0, 250_000.0, 600_000.0,
];

/// Bucket boundaries (seconds) of `nv.dl.step.duration`: the GenAI duration
/// buckets extended by two doublings, 10 ms to about 5.5 minutes.
///
/// ```
/// assert_eq!(lens_runtime::metrics::STEP_DURATION_BUCKETS_S.len(), 16);
/// ```
pub const STEP_DURATION_BUCKETS_S: [f64; 16] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 163.84,
    327.68,
];

/// How many distinct (operation, provider, model) attribute combinations one
/// [`InferenceMetrics`] caches; further combinations are still recorded, with
/// their attribute arrays built per record.
///
/// ```
/// assert!(lens_runtime::metrics::MAX_INFERENCE_ATTRIBUTE_SETS >= 8);
/// ```
pub const MAX_INFERENCE_ATTRIBUTE_SETS: usize = 64;

const UNIT_S: &str = "s";
const UNIT_MS: &str = "ms";
const UNIT_ONE: &str = "1";
const UNIT_TOKEN: &str = "{token}";
const UNIT_TOKENS_PER_S: &str = "{token}/s";
const UNIT_TFLOPS: &str = "{TFLOP}/s";
const UNIT_ITERATION: &str = "{iteration}";
const UNIT_SERVER: &str = "{server}";

fn gauge(meter: &Meter, name: &'static str, unit: &'static str, desc: &'static str) -> Gauge<f64> {
    meter
        .f64_gauge(name)
        .with_unit(unit)
        .with_description(desc)
        .build()
}

fn histogram(
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

// ---------------------------------------------------------------- inference

/// One inference request (or a batch of them with one duration), as
/// [`InferenceMetrics::record`] takes it. Unset fields are not recorded;
/// unset attributes take their defaults.
///
/// ```
/// let r = lens_runtime::metrics::InferenceRecord { output_tokens: Some(7), ..Default::default() };
/// assert_eq!(r.model, None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct InferenceRecord<'a> {
    /// Request duration in seconds → `gen_ai.server.request.duration`.
    pub duration_s: Option<f64>,
    /// Prompt tokens → `gen_ai.client.token.usage{gen_ai.token.type=input}`.
    pub input_tokens: Option<u64>,
    /// Generated tokens → `gen_ai.client.token.usage{gen_ai.token.type=output}`.
    pub output_tokens: Option<u64>,
    /// `gen_ai.request.model`; absent when `None`.
    pub model: Option<&'a str>,
    /// `gen_ai.operation.name`; default `text_completion`.
    pub operation: Option<&'a str>,
    /// `gen_ai.provider.name`; default `nemo`.
    pub provider: Option<&'a str>,
}

/// Inference instruments, named by the GenAI semantic conventions:
/// histogram `gen_ai.server.request.duration` (`s`) and histogram
/// `gen_ai.client.token.usage` (`{token}`, one point per
/// `gen_ai.token.type`), both with `gen_ai.operation.name`,
/// `gen_ai.provider.name` and, when given, `gen_ai.request.model`.
///
/// ```
/// use lens_runtime::metrics::{InferenceMetrics, InferenceRecord};
/// let meter = lens_runtime::otel::global::meter("doc");
/// let m = InferenceMetrics::new(&meter);
/// m.record(&InferenceRecord { duration_s: Some(1.5), operation: Some("chat"), ..Default::default() });
/// ```
#[derive(Debug)]
pub struct InferenceMetrics {
    duration: Histogram<f64>,
    tokens: Histogram<u64>,
    extra: Box<[KeyValue]>,
    sets: RwLock<Vec<InferenceAttrs>>,
}

/// Pre-built attribute arrays of one (operation, provider, model).
#[derive(Debug)]
struct InferenceAttrs {
    operation: Arc<str>,
    provider: Arc<str>,
    model: Option<Arc<str>>,
    request: Box<[KeyValue]>,
    input: Box<[KeyValue]>,
    output: Box<[KeyValue]>,
}

impl InferenceAttrs {
    fn matches(&self, operation: &str, provider: &str, model: Option<&str>) -> bool {
        &*self.operation == operation
            && &*self.provider == provider
            && self.model.as_deref() == model
    }

    fn build(operation: &str, provider: &str, model: Option<&str>, extra: &[KeyValue]) -> Self {
        let operation: Arc<str> = operation.into();
        let provider: Arc<str> = provider.into();
        let model: Option<Arc<str>> = model.map(Into::into);
        let mut request = vec![
            KeyValue::new(sc::GEN_AI_OPERATION_NAME, Value::from(operation.clone())),
            KeyValue::new(sc::GEN_AI_PROVIDER_NAME, Value::from(provider.clone())),
        ];
        if let Some(m) = &model {
            request.push(KeyValue::new(
                sc::GEN_AI_REQUEST_MODEL,
                Value::from(m.clone()),
            ));
        }
        request.extend(extra.iter().cloned());
        let with_type = |t: &'static str| {
            let mut v = request.clone();
            v.push(KeyValue::new(sc::GEN_AI_TOKEN_TYPE, t));
            v.into_boxed_slice()
        };
        let input = with_type(sc::GEN_AI_TOKEN_TYPE_INPUT);
        let output = with_type(sc::GEN_AI_TOKEN_TYPE_OUTPUT);
        InferenceAttrs {
            operation,
            provider,
            model,
            request: request.into_boxed_slice(),
            input,
            output,
        }
    }
}

impl InferenceMetrics {
    /// Creates the instruments on `meter` (once per meter).
    ///
    /// ```
    /// let meter = lens_runtime::otel::global::meter("doc");
    /// let _m = lens_runtime::metrics::InferenceMetrics::new(&meter);
    /// ```
    pub fn new(meter: &Meter) -> Self {
        Self::with_attributes(meter, [])
    }

    /// Like [`new`](Self::new), adding constant `attributes` to every point
    /// (e.g. a server or replica name).
    ///
    /// ```
    /// use lens_runtime::otel::KeyValue;
    /// let meter = lens_runtime::otel::global::meter("doc");
    /// let _m = lens_runtime::metrics::InferenceMetrics::with_attributes(
    ///     &meter, [KeyValue::new("server.address", "gen-0")]);
    /// ```
    pub fn with_attributes(meter: &Meter, attributes: impl IntoIterator<Item = KeyValue>) -> Self {
        let extra: Box<[KeyValue]> = attributes.into_iter().collect();
        let duration = histogram(
            meter,
            sc::METRIC_GEN_AI_SERVER_REQUEST_DURATION,
            UNIT_S,
            "Generative AI server request duration such as time-to-last byte or last output token.",
            &GEN_AI_DURATION_BUCKETS_S,
        );
        let tokens = meter
            .u64_histogram(sc::METRIC_GEN_AI_CLIENT_TOKEN_USAGE)
            .with_unit(UNIT_TOKEN)
            .with_description("Number of input and output tokens used.")
            .with_boundaries(GEN_AI_TOKEN_BUCKETS.to_vec())
            .build();
        let default = InferenceAttrs::build(
            sc::GEN_AI_OPERATION_NAME_TEXT_COMPLETION,
            sc::GEN_AI_PROVIDER_NAME_NEMO,
            None,
            &extra,
        );
        InferenceMetrics {
            duration,
            tokens,
            extra,
            sets: RwLock::new(vec![default]),
        }
    }

    /// Records what `record` holds: the duration and one token-usage point
    /// per token type given.
    ///
    /// ```
    /// use lens_runtime::metrics::{InferenceMetrics, InferenceRecord};
    /// let meter = lens_runtime::otel::global::meter("doc");
    /// let m = InferenceMetrics::new(&meter);
    /// m.record(&InferenceRecord { input_tokens: Some(512), model: Some("llama"), ..Default::default() });
    /// ```
    pub fn record(&self, record: &InferenceRecord<'_>) {
        if record.duration_s.is_none()
            && record.input_tokens.is_none()
            && record.output_tokens.is_none()
        {
            return;
        }
        let operation = record
            .operation
            .unwrap_or(sc::GEN_AI_OPERATION_NAME_TEXT_COMPLETION);
        let provider = record.provider.unwrap_or(sc::GEN_AI_PROVIDER_NAME_NEMO);
        {
            let sets = self.sets.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(a) = sets
                .iter()
                .find(|a| a.matches(operation, provider, record.model))
            {
                self.emit(a, record);
                return;
            }
        }
        let attrs = InferenceAttrs::build(operation, provider, record.model, &self.extra);
        self.emit(&attrs, record);
        let mut sets = self.sets.write().unwrap_or_else(PoisonError::into_inner);
        if sets.len() < MAX_INFERENCE_ATTRIBUTE_SETS
            && !sets
                .iter()
                .any(|a| a.matches(operation, provider, record.model))
        {
            sets.push(attrs);
        }
    }

    fn emit(&self, attrs: &InferenceAttrs, record: &InferenceRecord<'_>) {
        if let Some(d) = record.duration_s {
            self.duration.record(d, &attrs.request);
        }
        if let Some(n) = record.input_tokens {
            self.tokens.record(n, &attrs.input);
        }
        if let Some(n) = record.output_tokens {
            self.tokens.record(n, &attrs.output);
        }
    }
}

// ----------------------------------------------------------------------- RL

/// One RL step's values, as [`RlMetrics::record`] takes them. Unset fields
/// are not recorded.
///
/// ```
/// let r = lens_runtime::metrics::RlRecord { reward_mean: Some(0.7), ..Default::default() };
/// assert_eq!(r.entropy, None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RlRecord {
    /// → gauge `rl.reward.mean` (`1`).
    pub reward_mean: Option<f64>,
    /// → gauge `rl.kl_divergence` (`1`).
    pub kl_divergence: Option<f64>,
    /// → gauge `rl.policy_loss` (`1`).
    pub policy_loss: Option<f64>,
    /// → gauge `rl.value_loss` (`1`).
    pub value_loss: Option<f64>,
    /// → gauge `rl.entropy` (`1`).
    pub entropy: Option<f64>,
    /// → gauge `rl.response_length.mean` (`{token}`).
    pub response_length_mean: Option<f64>,
    /// → gauge `rl.grad_norm` (`1`).
    pub grad_norm: Option<f64>,
    /// → gauge `rl.learning_rate` (`1`).
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
/// use lens_runtime::metrics::{RlMetrics, RlRecord};
/// let meter = lens_runtime::otel::global::meter("doc");
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
    /// let meter = lens_runtime::otel::global::meter("doc");
    /// let _rl = lens_runtime::metrics::RlMetrics::new(&meter);
    /// ```
    pub fn new(meter: &Meter) -> Self {
        Self::with_attributes(meter, [])
    }

    /// Like [`new`](Self::new), adding constant `attributes` to every point.
    ///
    /// ```
    /// use lens_runtime::otel::KeyValue;
    /// let meter = lens_runtime::otel::global::meter("doc");
    /// let _rl = lens_runtime::metrics::RlMetrics::with_attributes(&meter, [KeyValue::new("algo", "grpo")]);
    /// ```
    pub fn with_attributes(meter: &Meter, attributes: impl IntoIterator<Item = KeyValue>) -> Self {
        let g = |name, unit, desc| gauge(meter, name, unit, desc);
        let h = |name, desc| histogram(meter, name, UNIT_MS, desc, &DURATION_MS_BUCKETS);
        RlMetrics {
            reward_mean: g(
                sc::METRIC_RL_REWARD_MEAN,
                UNIT_ONE,
                "Mean reward of the last batch.",
            ),
            kl_divergence: g(
                sc::METRIC_RL_KL_DIVERGENCE,
                UNIT_ONE,
                "KL divergence between the policy and the reference policy.",
            ),
            policy_loss: g(sc::METRIC_RL_POLICY_LOSS, UNIT_ONE, "Policy loss."),
            value_loss: g(sc::METRIC_RL_VALUE_LOSS, UNIT_ONE, "Value loss."),
            entropy: g(sc::METRIC_RL_ENTROPY, UNIT_ONE, "Policy entropy."),
            response_length_mean: g(
                sc::METRIC_RL_RESPONSE_LENGTH_MEAN,
                UNIT_TOKEN,
                "Mean length of generated responses.",
            ),
            grad_norm: g(sc::METRIC_RL_GRAD_NORM, UNIT_ONE, "Gradient norm."),
            learning_rate: g(sc::METRIC_RL_LEARNING_RATE, UNIT_ONE, "Learning rate."),
            tokens_per_sec: g(
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
    /// use lens_runtime::metrics::{RlMetrics, RlRecord};
    /// let meter = lens_runtime::otel::global::meter("doc");
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

// ---------------------------------------------------------------------- Gym

/// Environment-server values, as [`GymMetrics::record`] takes them. Unset
/// fields are not recorded.
///
/// ```
/// let r = lens_runtime::metrics::GymRecord { verify_duration_ms: Some(12.0), ..Default::default() };
/// assert_eq!(r.servers_active, None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GymRecord {
    /// → histogram `gym.server.request_duration_ms` (`ms`).
    pub request_duration_ms: Option<f64>,
    /// → histogram `gym.rollout.duration_ms` (`ms`).
    pub rollout_duration_ms: Option<f64>,
    /// → histogram `gym.verify.duration_ms` (`ms`).
    pub verify_duration_ms: Option<f64>,
    /// → gauge `gym.verify.success_rate` (`1`, 0..1).
    pub verify_success_rate: Option<f64>,
    /// → gauge `gym.servers.active` (`{server}`).
    pub servers_active: Option<u64>,
}

/// RL environment-server instruments (`gym.*`): three duration histograms
/// and two gauges, see [`GymRecord`].
///
/// ```
/// use lens_runtime::metrics::{GymMetrics, GymRecord};
/// let meter = lens_runtime::otel::global::meter("doc");
/// let gym = GymMetrics::new(&meter);
/// gym.record(&GymRecord { request_duration_ms: Some(35.0), servers_active: Some(4), ..Default::default() });
/// ```
#[derive(Debug)]
pub struct GymMetrics {
    request_duration: Histogram<f64>,
    rollout_duration: Histogram<f64>,
    verify_duration: Histogram<f64>,
    verify_success_rate: Gauge<f64>,
    servers_active: Gauge<u64>,
    attrs: Box<[KeyValue]>,
}

impl GymMetrics {
    /// Creates the instruments on `meter` (once per meter).
    ///
    /// ```
    /// let meter = lens_runtime::otel::global::meter("doc");
    /// let _gym = lens_runtime::metrics::GymMetrics::new(&meter);
    /// ```
    pub fn new(meter: &Meter) -> Self {
        Self::with_attributes(meter, [])
    }

    /// Like [`new`](Self::new), adding constant `attributes` to every point
    /// (e.g. the environment's name).
    ///
    /// ```
    /// use lens_runtime::otel::KeyValue;
    /// let meter = lens_runtime::otel::global::meter("doc");
    /// let _gym = lens_runtime::metrics::GymMetrics::with_attributes(&meter, [KeyValue::new("env", "math")]);
    /// ```
    pub fn with_attributes(meter: &Meter, attributes: impl IntoIterator<Item = KeyValue>) -> Self {
        let h = |name, desc| histogram(meter, name, UNIT_MS, desc, &DURATION_MS_BUCKETS);
        GymMetrics {
            request_duration: h(
                sc::METRIC_GYM_SERVER_REQUEST_DURATION_MS,
                "Duration of one request to an environment server.",
            ),
            rollout_duration: h(
                sc::METRIC_GYM_ROLLOUT_DURATION_MS,
                "Duration of one rollout collection.",
            ),
            verify_duration: h(
                sc::METRIC_GYM_VERIFY_DURATION_MS,
                "Duration of one verification.",
            ),
            verify_success_rate: gauge(
                meter,
                sc::METRIC_GYM_VERIFY_SUCCESS_RATE,
                UNIT_ONE,
                "Fraction of verifications that passed.",
            ),
            servers_active: meter
                .u64_gauge(sc::METRIC_GYM_SERVERS_ACTIVE)
                .with_unit(UNIT_SERVER)
                .with_description("Environment servers currently serving.")
                .build(),
            attrs: attributes.into_iter().collect(),
        }
    }

    /// Records what `record` holds.
    ///
    /// ```
    /// use lens_runtime::metrics::{GymMetrics, GymRecord};
    /// let meter = lens_runtime::otel::global::meter("doc");
    /// GymMetrics::new(&meter).record(&GymRecord { verify_success_rate: Some(0.9), ..Default::default() });
    /// ```
    pub fn record(&self, r: &GymRecord) {
        let a = &*self.attrs;
        if let Some(v) = r.request_duration_ms {
            self.request_duration.record(v, a);
        }
        if let Some(v) = r.rollout_duration_ms {
            self.rollout_duration.record(v, a);
        }
        if let Some(v) = r.verify_duration_ms {
            self.verify_duration.record(v, a);
        }
        if let Some(v) = r.verify_success_rate {
            self.verify_success_rate.record(v, a);
        }
        if let Some(v) = r.servers_active {
            self.servers_active.record(v, a);
        }
    }
}

// ----------------------------------------------------------------- training

/// One training step's values, as [`TrainingMetrics::record`] takes them.
/// Unset fields are not recorded.
///
/// ```
/// let r = lens_runtime::metrics::TrainingRecord { loss: Some(2.3), iterations: Some(1), ..Default::default() };
/// assert_eq!(r.tflops, None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TrainingRecord {
    /// Step wall time in seconds → histogram `nv.dl.step.duration` (`s`).
    pub step_duration_s: Option<f64>,
    /// → gauge `nv.dl.loss` (`1`).
    pub loss: Option<f64>,
    /// → gauge `nv.dl.grad_norm` (`1`).
    pub grad_norm: Option<f64>,
    /// → gauge `nv.dl.learning_rate` (`1`).
    pub learning_rate: Option<f64>,
    /// → gauge `nv.dl.throughput.tokens_per_sec` (`{token}/s`).
    pub tokens_per_sec: Option<f64>,
    /// → gauge `nv.dl.throughput.tflops` (`{TFLOP}/s`).
    pub tflops: Option<f64>,
    /// Iterations completed since the last record (usually 1) → counter
    /// `nv.dl.iterations` (`{iteration}`).
    pub iterations: Option<u64>,
}

/// Training-loop instruments (`nv.dl.*`): step-duration histogram, loss,
/// gradient norm, learning rate, tokens/s and TFLOP/s gauges, iteration
/// counter, see [`TrainingRecord`].
///
/// ```
/// use lens_runtime::metrics::{TrainingMetrics, TrainingRecord};
/// let meter = lens_runtime::otel::global::meter("doc");
/// let train = TrainingMetrics::new(&meter);
/// train.record(&TrainingRecord {
///     step_duration_s: Some(1.8), loss: Some(2.31), iterations: Some(1), ..Default::default()
/// });
/// ```
#[derive(Debug)]
pub struct TrainingMetrics {
    step_duration: Histogram<f64>,
    loss: Gauge<f64>,
    grad_norm: Gauge<f64>,
    learning_rate: Gauge<f64>,
    tokens_per_sec: Gauge<f64>,
    tflops: Gauge<f64>,
    iterations: Counter<u64>,
    attrs: Box<[KeyValue]>,
}

impl TrainingMetrics {
    /// Creates the instruments on `meter` (once per meter).
    ///
    /// ```
    /// let meter = lens_runtime::otel::global::meter("doc");
    /// let _train = lens_runtime::metrics::TrainingMetrics::new(&meter);
    /// ```
    pub fn new(meter: &Meter) -> Self {
        Self::with_attributes(meter, [])
    }

    /// Like [`new`](Self::new), adding constant `attributes` to every point.
    ///
    /// ```
    /// use lens_runtime::otel::KeyValue;
    /// let meter = lens_runtime::otel::global::meter("doc");
    /// let _t = lens_runtime::metrics::TrainingMetrics::with_attributes(&meter, [KeyValue::new("phase", "sft")]);
    /// ```
    pub fn with_attributes(meter: &Meter, attributes: impl IntoIterator<Item = KeyValue>) -> Self {
        let g = |name, unit, desc| gauge(meter, name, unit, desc);
        TrainingMetrics {
            step_duration: histogram(
                meter,
                sc::METRIC_NV_DL_STEP_DURATION,
                UNIT_S,
                "Wall time of one training step.",
                &STEP_DURATION_BUCKETS_S,
            ),
            loss: g(sc::METRIC_NV_DL_LOSS, UNIT_ONE, "Training loss."),
            grad_norm: g(
                sc::METRIC_NV_DL_GRAD_NORM,
                UNIT_ONE,
                "Global gradient norm.",
            ),
            learning_rate: g(sc::METRIC_NV_DL_LEARNING_RATE, UNIT_ONE, "Learning rate."),
            tokens_per_sec: g(
                sc::METRIC_NV_DL_THROUGHPUT_TOKENS_PER_SEC,
                UNIT_TOKENS_PER_S,
                "Training token throughput.",
            ),
            tflops: g(
                sc::METRIC_NV_DL_THROUGHPUT_TFLOPS,
                UNIT_TFLOPS,
                "Model TFLOP/s achieved.",
            ),
            iterations: meter
                .u64_counter(sc::METRIC_NV_DL_ITERATIONS)
                .with_unit(UNIT_ITERATION)
                .with_description("Training iterations completed.")
                .build(),
            attrs: attributes.into_iter().collect(),
        }
    }

    /// Records what `record` holds.
    ///
    /// ```
    /// use lens_runtime::metrics::{TrainingMetrics, TrainingRecord};
    /// let meter = lens_runtime::otel::global::meter("doc");
    /// TrainingMetrics::new(&meter).record(&TrainingRecord { tflops: Some(410.0), ..Default::default() });
    /// ```
    pub fn record(&self, r: &TrainingRecord) {
        let a = &*self.attrs;
        if let Some(v) = r.step_duration_s {
            self.step_duration.record(v, a);
        }
        let set = |g: &Gauge<f64>, v: Option<f64>| {
            if let Some(v) = v {
                g.record(v, a);
            }
        };
        set(&self.loss, r.loss);
        set(&self.grad_norm, r.grad_norm);
        set(&self.learning_rate, r.learning_rate);
        set(&self.tokens_per_sec, r.tokens_per_sec);
        set(&self.tflops, r.tflops);
        if let Some(n) = r.iterations {
            self.iterations.add(n, a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, Metric, MetricData};

    use crate::metrics_test_support::{collect, flat, provider};

    fn find<'a>(metrics: &[&'a Metric], name: &str) -> &'a Metric {
        metrics
            .iter()
            .rev()
            .find(|m| m.name() == name)
            .copied()
            .unwrap_or_else(|| panic!("no {name}"))
    }

    fn attrs(it: impl Iterator<Item = KeyValue>) -> Vec<(String, String)> {
        let mut v: Vec<_> = it
            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
            .collect();
        v.sort();
        v
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.to_owned(), v.to_owned())
    }

    #[test]
    fn inference_histograms_carry_genai_attributes_and_buckets() {
        let (p, e) = provider();
        let m = InferenceMetrics::new(&p.meter("t"));
        m.record(&InferenceRecord {
            duration_s: Some(0.2),
            input_tokens: Some(100),
            output_tokens: Some(20),
            model: Some("llama"),
            ..Default::default()
        });
        m.record(&InferenceRecord {
            duration_s: Some(3.0),
            operation: Some("chat"),
            provider: Some("vllm"),
            ..Default::default()
        });
        let rms = collect(&p, &e);
        let all = flat(&rms);
        let d = find(&all, sc::METRIC_GEN_AI_SERVER_REQUEST_DURATION);
        assert_eq!(d.unit(), "s");
        let AggregatedMetrics::F64(MetricData::Histogram(h)) = d.data() else {
            panic!("duration is not an f64 histogram: {:?}", d.data());
        };
        let mut points: Vec<_> = h
            .data_points()
            .map(|p| (attrs(p.attributes().cloned()), p.count()))
            .collect();
        points.sort();
        assert_eq!(
            points,
            vec![
                (
                    vec![
                        kv(sc::GEN_AI_OPERATION_NAME, "chat"),
                        kv(sc::GEN_AI_PROVIDER_NAME, "vllm"),
                    ],
                    1
                ),
                (
                    vec![
                        kv(sc::GEN_AI_OPERATION_NAME, "text_completion"),
                        kv(sc::GEN_AI_PROVIDER_NAME, "nemo"),
                        kv(sc::GEN_AI_REQUEST_MODEL, "llama"),
                    ],
                    1
                ),
            ]
        );
        let bounds: Vec<f64> = h.data_points().next().unwrap().bounds().collect();
        assert_eq!(bounds, GEN_AI_DURATION_BUCKETS_S);

        let t = find(&all, sc::METRIC_GEN_AI_CLIENT_TOKEN_USAGE);
        assert_eq!(t.unit(), "{token}");
        let AggregatedMetrics::U64(MetricData::Histogram(h)) = t.data() else {
            panic!("token usage is not a u64 histogram");
        };
        let mut points: Vec<_> = h
            .data_points()
            .map(|p| (attrs(p.attributes().cloned()), p.sum()))
            .collect();
        points.sort();
        let base = |t: &str| {
            vec![
                kv(sc::GEN_AI_OPERATION_NAME, "text_completion"),
                kv(sc::GEN_AI_PROVIDER_NAME, "nemo"),
                kv(sc::GEN_AI_REQUEST_MODEL, "llama"),
                kv(sc::GEN_AI_TOKEN_TYPE, t),
            ]
        };
        assert_eq!(points, vec![(base("input"), 100), (base("output"), 20)]);
        let bounds: Vec<f64> = h.data_points().next().unwrap().bounds().collect();
        assert_eq!(bounds, GEN_AI_TOKEN_BUCKETS);
    }

    #[test]
    fn inference_caches_attribute_sets_up_to_the_cap() {
        let (p, _e) = provider();
        let m = InferenceMetrics::new(&p.meter("t"));
        let names: Vec<String> = (0..MAX_INFERENCE_ATTRIBUTE_SETS + 10)
            .map(|i| format!("m{i}"))
            .collect();
        for n in &names {
            for _ in 0..3 {
                m.record(&InferenceRecord {
                    duration_s: Some(0.1),
                    model: Some(n),
                    ..Default::default()
                });
            }
        }
        assert_eq!(m.sets.read().unwrap().len(), MAX_INFERENCE_ATTRIBUTE_SETS);
        // a record with nothing to record builds no set
        m.record(&InferenceRecord::default());
    }

    fn gauge_value(all: &[&Metric], name: &str) -> (String, f64) {
        let m = find(all, name);
        match m.data() {
            AggregatedMetrics::F64(MetricData::Gauge(g)) => {
                (m.unit().to_owned(), g.data_points().next().unwrap().value())
            }
            AggregatedMetrics::U64(MetricData::Gauge(g)) => (
                m.unit().to_owned(),
                g.data_points().next().unwrap().value() as f64,
            ),
            other => panic!("{name} is not a gauge: {other:?}"),
        }
    }

    fn histogram_unit_count(all: &[&Metric], name: &str) -> (String, u64) {
        let m = find(all, name);
        let AggregatedMetrics::F64(MetricData::Histogram(h)) = m.data() else {
            panic!("{name} is not an f64 histogram");
        };
        let p = h.data_points().next().unwrap();
        (m.unit().to_owned(), p.count())
    }

    #[test]
    fn rl_gym_training_sets_record_only_what_is_given() {
        let (p, e) = provider();
        let meter = p.meter("t");
        let rl = RlMetrics::with_attributes(&meter, [KeyValue::new("algo", "grpo")]);
        rl.record(&RlRecord {
            reward_mean: Some(0.5),
            kl_divergence: Some(0.01),
            policy_loss: Some(0.2),
            value_loss: Some(0.3),
            entropy: Some(1.1),
            response_length_mean: Some(250.0),
            grad_norm: Some(0.9),
            learning_rate: Some(1e-6),
            tokens_per_sec: Some(5000.0),
            generation_duration_ms: Some(1200.0),
            rollout_duration_ms: Some(3400.0),
        });
        let gym = GymMetrics::new(&meter);
        gym.record(&GymRecord {
            request_duration_ms: Some(12.0),
            servers_active: Some(3),
            ..Default::default()
        });
        let train = TrainingMetrics::new(&meter);
        for _ in 0..3 {
            train.record(&TrainingRecord {
                step_duration_s: Some(1.5),
                loss: Some(2.0),
                iterations: Some(1),
                ..Default::default()
            });
        }
        let rms = collect(&p, &e);
        let all = flat(&rms);
        for (name, unit, v) in [
            (sc::METRIC_RL_REWARD_MEAN, "1", 0.5),
            (sc::METRIC_RL_KL_DIVERGENCE, "1", 0.01),
            (sc::METRIC_RL_POLICY_LOSS, "1", 0.2),
            (sc::METRIC_RL_VALUE_LOSS, "1", 0.3),
            (sc::METRIC_RL_ENTROPY, "1", 1.1),
            (sc::METRIC_RL_RESPONSE_LENGTH_MEAN, "{token}", 250.0),
            (sc::METRIC_RL_GRAD_NORM, "1", 0.9),
            (sc::METRIC_RL_LEARNING_RATE, "1", 1e-6),
            (sc::METRIC_RL_THROUGHPUT_TOKENS_PER_SEC, "{token}/s", 5000.0),
            (sc::METRIC_GYM_SERVERS_ACTIVE, "{server}", 3.0),
            (sc::METRIC_NV_DL_LOSS, "1", 2.0),
        ] {
            assert_eq!(gauge_value(&all, name), (unit.to_owned(), v), "{name}");
        }
        for (name, unit, n) in [
            (sc::METRIC_RL_GENERATION_DURATION_MS, "ms", 1),
            (sc::METRIC_RL_ROLLOUT_DURATION_MS, "ms", 1),
            (sc::METRIC_GYM_SERVER_REQUEST_DURATION_MS, "ms", 1),
            (sc::METRIC_NV_DL_STEP_DURATION, "s", 3),
        ] {
            assert_eq!(
                histogram_unit_count(&all, name),
                (unit.to_owned(), n),
                "{name}"
            );
        }
        // the rl set carries its constant attribute
        let m = find(&all, sc::METRIC_RL_REWARD_MEAN);
        let AggregatedMetrics::F64(MetricData::Gauge(g)) = m.data() else {
            unreachable!()
        };
        assert_eq!(
            attrs(g.data_points().next().unwrap().attributes().cloned()),
            vec![kv("algo", "grpo")]
        );
        // not given: not recorded
        for name in [
            sc::METRIC_GYM_ROLLOUT_DURATION_MS,
            sc::METRIC_GYM_VERIFY_DURATION_MS,
            sc::METRIC_GYM_VERIFY_SUCCESS_RATE,
            sc::METRIC_NV_DL_GRAD_NORM,
            sc::METRIC_NV_DL_THROUGHPUT_TFLOPS,
        ] {
            assert!(all.iter().all(|m| m.name() != name), "{name} was recorded");
        }
        let it = find(&all, sc::METRIC_NV_DL_ITERATIONS);
        assert_eq!(it.unit(), "{iteration}");
        let AggregatedMetrics::U64(MetricData::Sum(s)) = it.data() else {
            panic!("iterations is not a u64 sum");
        };
        assert!(s.is_monotonic());
        assert_eq!(s.data_points().next().unwrap().value(), 3);
    }
}
