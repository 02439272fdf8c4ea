//! Inference metrics (GenAI semantic conventions).

use super::common::*;
use crate::api::semconv as sc;
use opentelemetry::metrics::{Histogram, Meter};
use opentelemetry::{KeyValue, Value};
use std::sync::{Arc, PoisonError, RwLock};

/// One inference request (or a batch of them with one duration), as
/// [`InferenceMetrics::record`] takes it. Unset fields are not recorded;
/// unset attributes take their defaults.
///
/// ```
/// let r = lens::metrics::InferenceRecord { output_tokens: Some(7), ..Default::default() };
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
    /// Seconds from arrival to the first output token →
    /// `gen_ai.server.time_to_first_token`.
    pub time_to_first_token_s: Option<f64>,
    /// Mean seconds per output token after the first →
    /// `gen_ai.server.time_per_output_token`.
    pub time_per_output_token_s: Option<f64>,
}

/// Inference instruments, named by the GenAI semantic conventions:
/// histograms `gen_ai.server.request.duration`,
/// `gen_ai.server.time_to_first_token` and
/// `gen_ai.server.time_per_output_token` (`s`, each with the convention's
/// buckets) and histogram `gen_ai.client.token.usage` (`{token}`, one point
/// per `gen_ai.token.type`), all with `gen_ai.operation.name`,
/// `gen_ai.provider.name` and, when given, `gen_ai.request.model`.
///
/// ```
/// use lens::{metrics::InferenceMetrics, metrics::InferenceRecord};
/// let meter = lens::otel::global::meter("doc");
/// let m = InferenceMetrics::new(&meter);
/// m.record(&InferenceRecord { duration_s: Some(1.5), operation: Some("chat"), ..Default::default() });
/// ```
#[derive(Debug)]
pub struct InferenceMetrics {
    duration: Histogram<f64>,
    ttft: Histogram<f64>,
    tpot: Histogram<f64>,
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
    /// let meter = lens::otel::global::meter("doc");
    /// let _m = lens::metrics::InferenceMetrics::new(&meter);
    /// ```
    pub fn new(meter: &Meter) -> Self {
        Self::with_attributes(meter, [])
    }

    /// Like [`new`](Self::new), adding constant `attributes` to every point
    /// (e.g. a server or replica name).
    ///
    /// ```
    /// use lens::otel::KeyValue;
    /// let meter = lens::otel::global::meter("doc");
    /// let _m = lens::metrics::InferenceMetrics::with_attributes(
    ///     &meter, [KeyValue::new("server.address", "gen-0")]);
    /// ```
    pub fn with_attributes(meter: &Meter, attributes: impl IntoIterator<Item = KeyValue>) -> Self {
        let extra: Box<[KeyValue]> = attributes.into_iter().collect();
        // the two instruments the Python library shares: its boundaries (the
        // SDK's; NEMO_LENS_FINE_BUCKETS opts into the GenAI conventions' ones)
        let duration = shared_histogram(
            meter,
            sc::METRIC_GEN_AI_SERVER_REQUEST_DURATION,
            UNIT_S,
            "Generative AI server request duration such as time-to-last byte or last output token.",
        );
        let ttft = histogram(
            meter,
            sc::METRIC_GEN_AI_SERVER_TIME_TO_FIRST_TOKEN,
            UNIT_S,
            "Time to generate first token for successful responses.",
            &GEN_AI_TTFT_BUCKETS_S,
        );
        let tpot = histogram(
            meter,
            sc::METRIC_GEN_AI_SERVER_TIME_PER_OUTPUT_TOKEN,
            UNIT_S,
            "Time per output token generated after the first token for successful responses.",
            &GEN_AI_TPOT_BUCKETS_S,
        );
        let tokens = meter
            .u64_histogram(sc::METRIC_GEN_AI_CLIENT_TOKEN_USAGE)
            .with_unit(UNIT_TOKEN)
            .with_description("Number of input and output tokens used.")
            .build();
        let default = InferenceAttrs::build(
            sc::GEN_AI_OPERATION_NAME_TEXT_COMPLETION,
            sc::GEN_AI_PROVIDER_NAME_NEMO,
            None,
            &extra,
        );
        InferenceMetrics {
            duration,
            ttft,
            tpot,
            tokens,
            extra,
            sets: RwLock::new(vec![default]),
        }
    }

    /// Records what `record` holds: the duration and one token-usage point
    /// per token type given.
    ///
    /// ```
    /// use lens::{metrics::InferenceMetrics, metrics::InferenceRecord};
    /// let meter = lens::otel::global::meter("doc");
    /// let m = InferenceMetrics::new(&meter);
    /// m.record(&InferenceRecord { input_tokens: Some(512), model: Some("llama"), ..Default::default() });
    /// ```
    pub fn record(&self, record: &InferenceRecord<'_>) {
        if record.duration_s.is_none()
            && record.input_tokens.is_none()
            && record.output_tokens.is_none()
            && record.time_to_first_token_s.is_none()
            && record.time_per_output_token_s.is_none()
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
        if let Some(t) = record.time_to_first_token_s {
            self.ttft.record(t, &attrs.request);
        }
        if let Some(t) = record.time_per_output_token_s {
            self.tpot.record(t, &attrs.request);
        }
        if let Some(n) = record.input_tokens {
            self.tokens.record(n, &attrs.input);
        }
        if let Some(n) = record.output_tokens {
            self.tokens.record(n, &attrs.output);
        }
    }
}

impl InferenceMetrics {
    /// How many attribute sets are cached (for the module's tests).
    #[cfg(test)]
    pub(super) fn attribute_sets(&self) -> usize {
        self.sets
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// The timing of one streamed generation: made when the request arrives,
/// told of every output token, it fills the duration, time to first token,
/// time per output token and output token count of an [`InferenceRecord`].
///
/// ```
/// use lens::metrics::{InferenceMetrics, InferenceRecord, TokenTimer};
/// let meter = lens::otel::global::meter("doc");
/// let metrics = InferenceMetrics::new(&meter);
/// let mut timer = TokenTimer::start();
/// for _token in ["Hello", ",", " world"] {
///     timer.token(); // the first call marks the time to first token
/// }
/// let record = timer.finish(InferenceRecord { input_tokens: Some(12), model: Some("llama"), ..Default::default() });
/// assert_eq!(record.output_tokens, Some(3));
/// assert!(record.time_to_first_token_s.is_some() && record.time_per_output_token_s.is_some());
/// metrics.record(&record);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TokenTimer {
    start: std::time::Instant,
    first: Option<std::time::Instant>,
    last: Option<std::time::Instant>,
    tokens: u64,
}

impl TokenTimer {
    /// Starts timing a request (at its arrival).
    ///
    /// ```
    /// let t = lens::metrics::TokenTimer::start();
    /// assert_eq!(t.tokens(), 0);
    /// ```
    pub fn start() -> Self {
        TokenTimer {
            start: std::time::Instant::now(),
            first: None,
            last: None,
            tokens: 0,
        }
    }

    /// Counts one output token, now; returns whether it was the first.
    ///
    /// ```
    /// let mut t = lens::metrics::TokenTimer::start();
    /// assert!(t.token());
    /// assert!(!t.token());
    /// ```
    pub fn token(&mut self) -> bool {
        self.tokens_now(1)
    }

    /// Counts `n` output tokens produced together (a decode step of a
    /// speculative or batched decoder), now; returns whether they were the
    /// first.
    ///
    /// ```
    /// let mut t = lens::metrics::TokenTimer::start();
    /// t.tokens_now(4);
    /// assert_eq!(t.tokens(), 4);
    /// ```
    pub fn tokens_now(&mut self, n: u64) -> bool {
        let now = std::time::Instant::now();
        let first = self.first.is_none() && n > 0;
        if first {
            self.first = Some(now);
        }
        self.last = Some(now);
        self.tokens += n;
        first
    }

    /// Output tokens counted so far.
    ///
    /// ```
    /// assert_eq!(lens::metrics::TokenTimer::start().tokens(), 0);
    /// ```
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// `base` with the duration (arrival to now), the output token count,
    /// the time to first token and the time per output token (the time
    /// from the first token to the last over the tokens after the first;
    /// unset with fewer than two tokens) filled in.
    ///
    /// ```
    /// let r = lens::metrics::TokenTimer::start().finish(Default::default());
    /// assert_eq!((r.output_tokens, r.time_to_first_token_s), (Some(0), None));
    /// ```
    pub fn finish<'a>(&self, base: InferenceRecord<'a>) -> InferenceRecord<'a> {
        let secs = |a: std::time::Instant, b: std::time::Instant| b.duration_since(a).as_secs_f64();
        let ttft = self.first.map(|f| secs(self.start, f));
        let tpot = match (self.first, self.last) {
            (Some(f), Some(l)) if self.tokens > 1 => Some(secs(f, l) / (self.tokens - 1) as f64),
            _ => None,
        };
        InferenceRecord {
            duration_s: Some(self.start.elapsed().as_secs_f64()),
            output_tokens: Some(self.tokens),
            time_to_first_token_s: ttft,
            time_per_output_token_s: tpot,
            ..base
        }
    }
}
