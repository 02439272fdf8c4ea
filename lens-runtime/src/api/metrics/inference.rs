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
}

/// Inference instruments, named by the GenAI semantic conventions:
/// histogram `gen_ai.server.request.duration` (`s`) and histogram
/// `gen_ai.client.token.usage` (`{token}`, one point per
/// `gen_ai.token.type`), both with `gen_ai.operation.name`,
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
    /// use lens::{metrics::InferenceMetrics, metrics::InferenceRecord};
    /// let meter = lens::otel::global::meter("doc");
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
