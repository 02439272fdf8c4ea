//! Redaction at the last point before export, for every signal.
//!
//! One rule decides which keys are sensitive: the default rule of
//! [`is_redacted_key`](crate::api::attr::is_redacted_key) plus the extra keys of a
//! [`Redactor`] (`NEMO_LENS_REDACT_KEYS`, `TelemetryBuilder::redact_keys`),
//! matched as [`is_redacted_key_with`] describes. Under a sensitive key,
//! string values and string arrays become [`REDACTED`]; numbers and booleans
//! (e.g. `token = 42`, a token count) are kept. It is applied to:
//!
//! * span attributes, event attributes and link attributes:
//!   [`Redactor::redact_span`], or the [`RedactSpans`] exporter wrapper;
//! * log record attributes: the [`RedactLogs`] exporter wrapper;
//! * metric attributes: [`RedactingMeterProvider`], at the measurement (the
//!   SDK's aggregated metrics cannot be edited);
//! * resource attributes: [`Redactor::redact_attributes`] before the
//!   resource is built, [`Redactor::redact_resource`] for a built one.
//!
//! Free text (error messages, log bodies, event and span names) is not
//! scanned.

use crate::api::attr::{is_redactable, is_redacted_key_with, redact_value, REDACTED};
use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, LoggerProvider as _};
use opentelemetry::metrics::{
    AsyncInstrument, AsyncInstrumentBuilder, Counter, Gauge, Histogram, HistogramBuilder,
    InstrumentBuilder, InstrumentProvider, Meter, MeterProvider, ObservableCounter,
    ObservableGauge, ObservableUpDownCounter, SyncInstrument, UpDownCounter,
};
use opentelemetry::{InstrumentationScope, KeyValue, StringValue};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::logs::{LogBatch, LogExporter, SdkLogRecord, SdkLogger, SdkLoggerProvider};
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use std::borrow::Cow;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The redaction rule: the default sensitive keys plus caller-given extra
/// keys. Cheap to clone (the extra keys are shared); checking a key never
/// allocates.
///
/// ```
/// use lens_runtime::redact::Redactor;
/// use lens_runtime::otel::KeyValue;
/// let r = Redactor::new(["email", " "]); // blank keys are ignored
/// let mut attrs = vec![
///     KeyValue::new("user.email", "a@b.c"),
///     KeyValue::new("api_key", "k"),
///     KeyValue::new("token", 42),
///     KeyValue::new("http.route", "/v1"),
/// ];
/// assert!(r.redact_attributes(&mut attrs));
/// assert_eq!(attrs[0].value.as_str(), "[REDACTED]");
/// assert_eq!(attrs[1].value.as_str(), "[REDACTED]");
/// assert_eq!(attrs[2].value.as_str(), "42"); // not a string: kept
/// assert_eq!(attrs[3].value.as_str(), "/v1");
/// ```
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    extra: Arc<[Box<str>]>,
}

impl Redactor {
    /// The default rule plus `extra_keys` (trimmed; blank ones ignored).
    ///
    /// ```
    /// let r = lens_runtime::redact::Redactor::new(["ssn"]);
    /// assert!(r.is_redacted("user.ssn") && r.is_redacted("prompt"));
    /// ```
    pub fn new<I>(extra_keys: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let extra: Vec<Box<str>> = extra_keys
            .into_iter()
            .filter_map(|k| {
                let k = k.as_ref().trim();
                (!k.is_empty()).then(|| Box::from(k))
            })
            .collect();
        Redactor {
            extra: extra.into(),
        }
    }

    /// The extra keys, trimmed, blank ones dropped.
    ///
    /// ```
    /// let r = lens_runtime::redact::Redactor::new([" email ", ""]);
    /// assert_eq!(r.extra_keys().collect::<Vec<_>>(), ["email"]);
    /// ```
    pub fn extra_keys(&self) -> impl Iterator<Item = &str> {
        self.extra.iter().map(|k| &**k)
    }

    /// Whether string values under `key` are redacted.
    ///
    /// ```
    /// let r = lens_runtime::redact::Redactor::default();
    /// assert!(r.is_redacted("gen_ai.prompt.0.content"));
    /// assert!(!r.is_redacted("gen_ai.usage.input_tokens"));
    /// ```
    pub fn is_redacted(&self, key: &str) -> bool {
        is_redacted_key_with(key, &self.extra)
    }

    /// Whether [`redact_key_value`](Self::redact_key_value) would change
    /// `kv` (the value's kind is checked before the key).
    fn needs(&self, kv: &KeyValue) -> bool {
        is_redactable(&kv.value) && self.is_redacted(kv.key.as_str())
    }

    /// Redacts one attribute in place; returns whether it changed.
    ///
    /// ```
    /// use lens_runtime::otel::KeyValue;
    /// let r = lens_runtime::redact::Redactor::default();
    /// let mut kv = KeyValue::new("hf_token", "hf_abc");
    /// assert!(r.redact_key_value(&mut kv));
    /// assert_eq!(kv.value.as_str(), "[REDACTED]");
    /// ```
    pub fn redact_key_value(&self, kv: &mut KeyValue) -> bool {
        self.needs(kv) && redact_value(&mut kv.value)
    }

    /// Redacts attributes in place (span, event, link or resource
    /// attributes); returns whether any changed. Never allocates when none
    /// is sensitive.
    ///
    /// ```
    /// use lens_runtime::otel::KeyValue;
    /// let r = lens_runtime::redact::Redactor::default();
    /// let mut attrs = vec![KeyValue::new("deploy.token", "t0k3n")];
    /// r.redact_attributes(&mut attrs);
    /// assert_eq!(attrs[0].value.as_str(), "[REDACTED]");
    /// ```
    pub fn redact_attributes(&self, attributes: &mut [KeyValue]) -> bool {
        let mut changed = false;
        for kv in attributes {
            changed |= self.redact_key_value(kv);
        }
        changed
    }

    /// `attributes` with sensitive ones redacted: borrowed (no allocation)
    /// when none is sensitive, else a redacted copy.
    ///
    /// ```
    /// use lens_runtime::otel::KeyValue;
    /// use std::borrow::Cow;
    /// let r = lens_runtime::redact::Redactor::default();
    /// let clean = [KeyValue::new("n", 1)];
    /// assert!(matches!(r.redacted_attributes(&clean), Cow::Borrowed(_)));
    /// let dirty = [KeyValue::new("prompt", "p")];
    /// assert_eq!(r.redacted_attributes(&dirty)[0].value.as_str(), "[REDACTED]");
    /// ```
    pub fn redacted_attributes<'a>(&self, attributes: &'a [KeyValue]) -> Cow<'a, [KeyValue]> {
        match attributes.iter().position(|kv| self.needs(kv)) {
            None => Cow::Borrowed(attributes),
            Some(first) => {
                let mut owned = attributes.to_vec();
                if let Some(rest) = owned.get_mut(first..) {
                    self.redact_attributes(rest);
                }
                Cow::Owned(owned)
            }
        }
    }

    /// Redacts a finished span in place: its attributes, its events'
    /// attributes and its links' attributes (names are not scanned).
    /// Returns whether anything changed.
    ///
    /// ```
    /// use lens_runtime::redact::Redactor;
    /// use lens_runtime::otel_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
    /// use lens_runtime::otel::trace::{Span as _, Tracer as _, TracerProvider as _};
    /// use lens_runtime::otel::KeyValue;
    /// let exporter = InMemorySpanExporter::default();
    /// let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
    /// let mut span = provider.tracer("doc").start("s");
    /// span.set_attribute(KeyValue::new("api_key", "k"));
    /// span.end();
    /// let mut data = exporter.get_finished_spans().unwrap().remove(0);
    /// assert!(Redactor::default().redact_span(&mut data));
    /// assert_eq!(data.attributes[0].value.as_str(), "[REDACTED]");
    /// ```
    pub fn redact_span(&self, span: &mut SpanData) -> bool {
        let mut changed = self.redact_attributes(&mut span.attributes);
        if let Some(scope) = self.redact_scope(&span.instrumentation_scope) {
            span.instrumentation_scope = scope;
            changed = true;
        }
        for event in &mut span.events.events {
            changed |= self.redact_attributes(&mut event.attributes);
        }
        for link in &mut span.links.links {
            changed |= self.redact_attributes(&mut link.attributes);
        }
        changed
    }

    /// A copy of `scope` with sensitive attributes redacted (name, version
    /// and schema URL kept), or `None` when nothing in it is sensitive.
    ///
    /// ```
    /// use lens_runtime::otel::{InstrumentationScope, KeyValue};
    /// let r = lens_runtime::redact::Redactor::new::<[&str; 0]>([]);
    /// let scope = InstrumentationScope::builder("s")
    ///     .with_attributes([KeyValue::new("api_key", "x")])
    ///     .build();
    /// let redacted = r.redact_scope(&scope).unwrap();
    /// assert_eq!(redacted.attributes().next().unwrap().value.as_str(), "[REDACTED]");
    /// ```
    pub fn redact_scope(&self, scope: &InstrumentationScope) -> Option<InstrumentationScope> {
        if !scope
            .attributes()
            .any(|kv| self.is_redacted(kv.key.as_str()))
        {
            return None;
        }
        let mut attributes: Vec<KeyValue> = scope.attributes().cloned().collect();
        self.redact_attributes(&mut attributes);
        let mut b = InstrumentationScope::builder(scope.name().to_owned());
        if let Some(v) = scope.version() {
            b = b.with_version(v.to_owned());
        }
        if let Some(u) = scope.schema_url() {
            b = b.with_schema_url(u.to_owned());
        }
        Some(b.with_attributes(attributes).build())
    }

    /// A copy of `resource` with sensitive attributes redacted (schema URL
    /// kept), or `None` when nothing in it is sensitive.
    ///
    /// ```
    /// use lens_runtime::otel::KeyValue;
    /// use lens_runtime::otel_sdk::Resource;
    /// let r = lens_runtime::redact::Redactor::default();
    /// let res = Resource::builder_empty().with_attribute(KeyValue::new("deploy.token", "t")).build();
    /// let red = r.redact_resource(&res).unwrap();
    /// assert_eq!(red.get(&"deploy.token".into()).unwrap().as_str(), "[REDACTED]");
    /// assert!(r.redact_resource(&red).is_none());
    /// ```
    pub fn redact_resource(&self, resource: &Resource) -> Option<Resource> {
        let needs = |k: &opentelemetry::Key, v: &opentelemetry::Value| {
            is_redactable(v) && self.is_redacted(k.as_str())
        };
        if !resource.iter().any(|(k, v)| needs(k, v)) {
            return None;
        }
        let attributes = resource.iter().map(|(k, v)| {
            let mut kv = KeyValue::new(k.clone(), v.clone());
            self.redact_key_value(&mut kv);
            kv
        });
        let builder = Resource::builder_empty();
        let builder = match resource.schema_url() {
            Some(url) => builder.with_schema_url(attributes, url.to_owned()),
            None => builder.with_attributes(attributes),
        };
        Some(builder.build())
    }

    /// Whether the log attribute `key = value` needs redacting: a text value
    /// (string, bytes, or a list/map holding one) under a sensitive key, or a
    /// map (possibly inside a list) with such an entry.
    fn any_needs(&self, key: &str, value: &AnyValue) -> bool {
        match value {
            AnyValue::Int(_) | AnyValue::Double(_) | AnyValue::Boolean(_) => false,
            _ => (has_text(value) && self.is_redacted(key)) || self.nested_needs(value),
        }
    }

    /// Whether a map inside `value` has an entry that needs redacting.
    fn nested_needs(&self, value: &AnyValue) -> bool {
        match value {
            AnyValue::ListAny(items) => items.iter().any(|v| self.nested_needs(v)),
            AnyValue::Map(map) => map.iter().any(|(k, v)| self.any_needs(k.as_str(), v)),
            _ => false,
        }
    }

    /// Redacts the log attribute value in place: under a sensitive key a
    /// value holding text becomes the string [`REDACTED`]; otherwise map
    /// entries (also inside lists) are redacted by their own keys.
    fn redact_any(&self, key: &str, value: &mut AnyValue) {
        if has_text(value) && self.is_redacted(key) {
            *value = AnyValue::String(StringValue::from(REDACTED));
        } else {
            self.redact_nested(value);
        }
    }

    fn redact_nested(&self, value: &mut AnyValue) {
        match value {
            AnyValue::ListAny(items) => items.iter_mut().for_each(|v| self.redact_nested(v)),
            AnyValue::Map(map) => map
                .iter_mut()
                .for_each(|(k, v)| self.redact_any(k.as_str(), v)),
            _ => {}
        }
    }

    /// Whether the log record holds an attribute (or a map body entry) that
    /// needs redacting. A string body is free text and not scanned.
    fn record_needs(&self, record: &SdkLogRecord) -> bool {
        record
            .attributes_iter()
            .any(|(k, v)| self.any_needs(k.as_str(), v))
            || record.body().is_some_and(|b| self.nested_needs(b))
    }

    /// A new record with every field of `record` and its attributes (and
    /// map body entries) redacted.
    fn redact_record(&self, record: &SdkLogRecord) -> SdkLogRecord {
        let mut out = record_factory().create_log_record();
        if let Some(name) = record.event_name() {
            out.set_event_name(name);
        }
        if let Some(target) = record.target() {
            out.set_target(target.clone());
        }
        if let Some(t) = record.timestamp() {
            out.set_timestamp(t);
        }
        if let Some(t) = record.observed_timestamp() {
            out.set_observed_timestamp(t);
        }
        if let Some(text) = record.severity_text() {
            out.set_severity_text(text);
        }
        if let Some(number) = record.severity_number() {
            out.set_severity_number(number);
        }
        if let Some(body) = record.body() {
            let mut body = body.clone();
            self.redact_nested(&mut body);
            out.set_body(body);
        }
        if let Some(cx) = record.trace_context() {
            out.set_trace_context(cx.trace_id, cx.span_id, cx.trace_flags);
        }
        for (key, value) in record.attributes_iter() {
            let mut value = value.clone();
            self.redact_any(key.as_str(), &mut value);
            out.add_attribute(key.clone(), value);
        }
        out
    }
}

/// Whether `value` is or holds text: a string other than [`REDACTED`],
/// bytes, or a kind added to OpenTelemetry later.
fn has_text(value: &AnyValue) -> bool {
    match value {
        AnyValue::String(s) => s.as_str() != REDACTED,
        AnyValue::Int(_) | AnyValue::Double(_) | AnyValue::Boolean(_) => false,
        AnyValue::ListAny(items) => items.iter().any(has_text),
        AnyValue::Map(map) => map.values().any(has_text),
        _ => true,
    }
}

/// Creates empty [`SdkLogRecord`]s (the SDK offers no other public
/// constructor): a logger of a provider with no processor, built once and
/// never dropped (so never shut down).
fn record_factory() -> &'static SdkLogger {
    static FACTORY: OnceLock<SdkLogger> = OnceLock::new();
    FACTORY.get_or_init(|| SdkLoggerProvider::builder().build().logger("lens.redact"))
}

/// A span exporter that redacts every span ([`Redactor::redact_span`]) and
/// the resource before handing them to `inner`.
///
/// ```
/// use lens_runtime::redact::{RedactSpans, Redactor};
/// use lens_runtime::otel_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
/// let exporter = InMemorySpanExporter::default();
/// let provider = SdkTracerProvider::builder()
///     .with_simple_exporter(RedactSpans::new(exporter.clone(), Redactor::default()))
///     .build();
/// # let _ = provider;
/// ```
#[derive(Debug)]
pub struct RedactSpans<E> {
    inner: E,
    redactor: Redactor,
}

impl<E> RedactSpans<E> {
    /// Wraps `inner`.
    pub fn new(inner: E, redactor: Redactor) -> Self {
        RedactSpans { inner, redactor }
    }

    /// The wrapped exporter.
    pub fn inner(&self) -> &E {
        &self.inner
    }
}

impl<E: SpanExporter> SpanExporter for RedactSpans<E> {
    async fn export(&self, mut batch: Vec<SpanData>) -> OTelSdkResult {
        for span in &mut batch {
            self.redactor.redact_span(span);
        }
        self.inner.export(batch).await
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn shutdown(&self) -> OTelSdkResult {
        self.inner.shutdown()
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        match self.redactor.redact_resource(resource) {
            Some(redacted) => self.inner.set_resource(&redacted),
            None => self.inner.set_resource(resource),
        }
    }
}

/// A log exporter that redacts log record attributes (and map-valued body
/// entries; a string body is not scanned) and the resource before handing
/// them to `inner`. A batch with nothing sensitive is passed through as is;
/// otherwise the affected records are rebuilt (the SDK's records cannot be
/// edited in place) and the batch re-assembled in order.
///
/// ```
/// use lens_runtime::redact::{RedactLogs, Redactor};
/// use lens_runtime::otel_sdk::logs::{InMemoryLogExporter, SdkLoggerProvider};
/// let exporter = InMemoryLogExporter::default();
/// let provider = SdkLoggerProvider::builder()
///     .with_simple_exporter(RedactLogs::new(exporter.clone(), Redactor::new(["email"])))
///     .build();
/// # let _ = provider;
/// ```
#[derive(Debug)]
pub struct RedactLogs<E> {
    inner: E,
    redactor: Redactor,
}

impl<E> RedactLogs<E> {
    /// Wraps `inner`.
    pub fn new(inner: E, redactor: Redactor) -> Self {
        RedactLogs { inner, redactor }
    }

    /// The wrapped exporter.
    pub fn inner(&self) -> &E {
        &self.inner
    }
}

impl<E: LogExporter> LogExporter for RedactLogs<E> {
    async fn export(&self, batch: LogBatch<'_>) -> OTelSdkResult {
        let scope_needs = |s: &InstrumentationScope| {
            s.attributes()
                .any(|kv| self.redactor.is_redacted(kv.key.as_str()))
        };
        if !batch
            .iter()
            .any(|(r, s)| self.redactor.record_needs(r) || scope_needs(s))
        {
            return self.inner.export(batch).await;
        }
        type Owned<'a> = (Cow<'a, SdkLogRecord>, Cow<'a, InstrumentationScope>);
        let records: Vec<Owned<'_>> = batch
            .iter()
            .map(|(record, scope)| {
                let record = if self.redactor.record_needs(record) {
                    Cow::Owned(self.redactor.redact_record(record))
                } else {
                    Cow::Borrowed(record)
                };
                let scope = match self.redactor.redact_scope(scope) {
                    Some(s) => Cow::Owned(s),
                    None => Cow::Borrowed(scope),
                };
                (record, scope)
            })
            .collect();
        let refs: Vec<(&SdkLogRecord, &InstrumentationScope)> = records
            .iter()
            .map(|(r, s)| (r.as_ref(), s.as_ref()))
            .collect();
        self.inner.export(LogBatch::new(&refs)).await
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn shutdown(&self) -> OTelSdkResult {
        self.inner.shutdown()
    }

    fn event_enabled(
        &self,
        level: opentelemetry::logs::Severity,
        target: &str,
        name: Option<&str>,
    ) -> bool {
        self.inner.event_enabled(level, target, name)
    }

    fn set_resource(&mut self, resource: &Resource) {
        match self.redactor.redact_resource(resource) {
            Some(redacted) => self.inner.set_resource(&redacted),
            None => self.inner.set_resource(resource),
        }
    }
}

/// A meter provider whose instruments redact measurement attributes before
/// they reach `inner` (the SDK's aggregated metrics cannot be edited, so
/// redaction happens at the measurement). Sync instruments copy the
/// attributes only when one is sensitive; observable instruments' callbacks
/// observe through a redacting instrument.
///
/// ```
/// use lens_runtime::redact::{RedactingMeterProvider, Redactor};
/// use lens_runtime::otel::metrics::MeterProvider as _;
/// use lens_runtime::otel::KeyValue;
/// let sdk = lens_runtime::otel_sdk::metrics::SdkMeterProvider::builder().build();
/// let provider = RedactingMeterProvider::new(sdk, Redactor::default());
/// let counter = provider.meter("doc").u64_counter("requests").build();
/// counter.add(1, &[KeyValue::new("prompt", "recorded as [REDACTED]")]);
/// // install it: lens_runtime::otel::global::set_meter_provider(provider);
/// ```
#[derive(Debug, Clone)]
pub struct RedactingMeterProvider<P = SdkMeterProvider> {
    inner: P,
    redactor: Redactor,
}

impl<P> RedactingMeterProvider<P> {
    /// Wraps `inner`.
    pub fn new(inner: P, redactor: Redactor) -> Self {
        RedactingMeterProvider { inner, redactor }
    }

    /// The wrapped provider (to flush or shut it down).
    pub fn inner(&self) -> &P {
        &self.inner
    }
}

impl<P: MeterProvider> MeterProvider for RedactingMeterProvider<P> {
    fn meter_with_scope(&self, scope: InstrumentationScope) -> Meter {
        let scope = self.redactor.redact_scope(&scope).unwrap_or(scope);
        Meter::new(Arc::new(RedactingInstruments {
            meter: self.inner.meter_with_scope(scope),
            redactor: self.redactor.clone(),
        }))
    }
}

/// Builds each instrument on the inner meter and wraps it.
#[derive(Debug)]
struct RedactingInstruments {
    meter: Meter,
    redactor: Redactor,
}

/// A sync instrument that redacts attributes, then records on `inner`.
struct RedactingSync<I> {
    inner: I,
    redactor: Redactor,
}

macro_rules! redacting_sync {
    ($($inst:ident::$record:ident),*) => {$(
        impl<T> SyncInstrument<T> for RedactingSync<$inst<T>> {
            fn measure(&self, measurement: T, attributes: &[KeyValue]) {
                // in a forked child the SDK's locks may be held forever by
                // a parent thread that does not exist here
                if crate::sdk::fork::in_child() {
                    return;
                }
                self.inner
                    .$record(measurement, &self.redactor.redacted_attributes(attributes));
            }
        }
    )*};
}
redacting_sync!(
    Counter::add,
    UpDownCounter::add,
    Histogram::record,
    Gauge::record
);

/// What an observable instrument's callback observes through.
struct RedactingObserver<'a, M> {
    inner: &'a dyn AsyncInstrument<M>,
    redactor: &'a Redactor,
}

impl<M> AsyncInstrument<M> for RedactingObserver<'_, M> {
    fn observe(&self, measurement: M, attributes: &[KeyValue]) {
        self.inner
            .observe(measurement, &self.redactor.redacted_attributes(attributes));
    }
}

macro_rules! sync_builders {
    ($($method:ident: $inst:ident<$t:ty>),*) => {$(
        fn $method(&self, b: InstrumentBuilder<'_, $inst<$t>>) -> $inst<$t> {
            let mut inner = self.meter.$method(b.name);
            if let Some(d) = b.description {
                inner = inner.with_description(d);
            }
            if let Some(u) = b.unit {
                inner = inner.with_unit(u);
            }
            $inst::new(Arc::new(RedactingSync {
                inner: inner.build(),
                redactor: self.redactor.clone(),
            }))
        }
    )*};
}

macro_rules! histogram_builders {
    ($($method:ident: $t:ty),*) => {$(
        fn $method(&self, b: HistogramBuilder<'_, Histogram<$t>>) -> Histogram<$t> {
            let mut inner = self.meter.$method(b.name);
            if let Some(d) = b.description {
                inner = inner.with_description(d);
            }
            if let Some(u) = b.unit {
                inner = inner.with_unit(u);
            }
            if let Some(bounds) = b.boundaries {
                inner = inner.with_boundaries(bounds);
            }
            Histogram::new(Arc::new(RedactingSync {
                inner: inner.build(),
                redactor: self.redactor.clone(),
            }))
        }
    )*};
}

macro_rules! observable_builders {
    ($($method:ident: $inst:ident<$t:ty>),*) => {$(
        fn $method(&self, b: AsyncInstrumentBuilder<'_, $inst<$t>, $t>) -> $inst<$t> {
            let mut inner = self.meter.$method(b.name);
            if let Some(d) = b.description {
                inner = inner.with_description(d);
            }
            if let Some(u) = b.unit {
                inner = inner.with_unit(u);
            }
            for callback in b.callbacks {
                let redactor = self.redactor.clone();
                inner = inner.with_callback(move |observer: &dyn AsyncInstrument<$t>| {
                    // a panicking user callback must not kill the SDK's
                    // metric reader thread (every later export would fail)
                    let observe = std::panic::AssertUnwindSafe(|| {
                        callback(&RedactingObserver {
                            inner: observer,
                            redactor: &redactor,
                        })
                    });
                    if std::panic::catch_unwind(observe).is_err() {
                        crate::diag::warn(format_args!(
                            "a metric callback panicked; its observations of this collection are lost"
                        ));
                    }
                });
            }
            inner.build()
        }
    )*};
}

impl InstrumentProvider for RedactingInstruments {
    sync_builders!(
        u64_counter: Counter<u64>,
        f64_counter: Counter<f64>,
        i64_up_down_counter: UpDownCounter<i64>,
        f64_up_down_counter: UpDownCounter<f64>,
        u64_gauge: Gauge<u64>,
        f64_gauge: Gauge<f64>,
        i64_gauge: Gauge<i64>
    );
    histogram_builders!(u64_histogram: u64, f64_histogram: f64);
    observable_builders!(
        u64_observable_counter: ObservableCounter<u64>,
        f64_observable_counter: ObservableCounter<f64>,
        i64_observable_up_down_counter: ObservableUpDownCounter<i64>,
        f64_observable_up_down_counter: ObservableUpDownCounter<f64>,
        u64_observable_gauge: ObservableGauge<u64>,
        i64_observable_gauge: ObservableGauge<i64>,
        f64_observable_gauge: ObservableGauge<f64>
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics_test_support::{collect, flat, provider};
    use opentelemetry::logs::Severity;
    use opentelemetry::trace::{
        Link, Span as _, SpanContext, TraceFlags, TraceState, Tracer as _, TracerProvider as _,
    };
    use opentelemetry::{Array, Key, SpanId, TraceId, Value};
    use opentelemetry_sdk::logs::InMemoryLogExporter;
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
    use std::collections::HashMap;

    fn red() -> Value {
        Value::from(REDACTED)
    }

    fn get<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a Value> {
        attrs
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| &kv.value)
    }

    fn sensitive() -> Vec<KeyValue> {
        vec![
            KeyValue::new("prompt", "secret text"),
            KeyValue::new("api_key", "x"),
            KeyValue::new("gen_ai.prompt.0.content", "hi"),
            KeyValue::new("user.email", "a@b.c"),
            KeyValue::new("tags.secret", Value::Array(Array::String(vec!["a".into()]))),
            KeyValue::new("token", 42),
            KeyValue::new("token_count", 5),
            KeyValue::new("gen_ai.usage.input_tokens", 7),
            KeyValue::new("tokenizer", "bpe"),
        ]
    }

    fn check(attrs: &[KeyValue]) {
        for k in [
            "prompt",
            "api_key",
            "gen_ai.prompt.0.content",
            "user.email",
            "tags.secret",
        ] {
            assert_eq!(get(attrs, k), Some(&red()), "{k}");
        }
        assert_eq!(get(attrs, "token"), Some(&Value::I64(42)));
        assert_eq!(get(attrs, "token_count"), Some(&Value::I64(5)));
        assert_eq!(
            get(attrs, "gen_ai.usage.input_tokens"),
            Some(&Value::I64(7))
        );
        assert_eq!(get(attrs, "tokenizer"), Some(&Value::from("bpe")));
    }

    fn redactor() -> Redactor {
        Redactor::new(["email"])
    }

    #[test]
    fn redacted_attributes_borrow_when_clean() {
        let r = redactor();
        let clean = [KeyValue::new("token", 1), KeyValue::new("model", "m")];
        assert!(matches!(r.redacted_attributes(&clean), Cow::Borrowed(_)));
        let already = [KeyValue::new("prompt", REDACTED)];
        assert!(matches!(r.redacted_attributes(&already), Cow::Borrowed(_)));
        check(&r.redacted_attributes(&sensitive()));
        let mut attrs = sensitive();
        assert!(r.redact_attributes(&mut attrs));
        check(&attrs);
        assert!(!r.redact_attributes(&mut attrs), "idempotent");
    }

    #[test]
    fn spans_events_links_and_resource_are_redacted() {
        let exporter = InMemorySpanExporter::default();
        let resource = Resource::builder_empty()
            .with_attributes([
                KeyValue::new("deploy.token", "t0k3n"),
                KeyValue::new("service.name", "svc"),
            ])
            .build();
        let provider = SdkTracerProvider::builder()
            .with_resource(resource)
            .with_simple_exporter(RedactSpans::new(exporter.clone(), redactor()))
            .build();
        let tracer = provider.tracer("t");
        let linked = SpanContext::new(
            TraceId::from(1),
            SpanId::from(2),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        );
        let mut span = tracer
            .span_builder("s")
            .with_attributes(sensitive())
            .with_links(vec![Link::new(linked, sensitive(), 0)])
            .start(&tracer);
        span.add_event("e", sensitive());
        span.end();
        provider.force_flush().unwrap();
        let spans = exporter.get_finished_spans().unwrap();
        let s = &spans[0];
        check(&s.attributes);
        check(&s.events.events[0].attributes);
        check(&s.links.links[0].attributes);
        assert_eq!(s.name, "s");
        assert_eq!(s.events.events[0].name, "e", "names are not scanned");
        let res = Resource::builder_empty()
            .with_schema_url([KeyValue::new("deploy.token", "t")], "https://s")
            .build();
        let redacted = redactor().redact_resource(&res).unwrap();
        assert_eq!(redacted.get(&Key::from("deploy.token")), Some(red()));
        assert_eq!(redacted.schema_url(), Some("https://s"));
    }

    /// Remembers the resource it was given.
    #[derive(Debug, Default)]
    struct ResourceProbe(std::sync::Mutex<Option<Resource>>);

    impl SpanExporter for ResourceProbe {
        async fn export(&self, _: Vec<SpanData>) -> OTelSdkResult {
            Ok(())
        }
        fn set_resource(&mut self, resource: &Resource) {
            if let Ok(mut r) = self.0.lock() {
                *r = Some(resource.clone());
            }
        }
    }

    #[test]
    fn span_exporter_gets_a_redacted_resource() {
        let mut wrapped = RedactSpans::new(ResourceProbe::default(), redactor());
        let res = Resource::builder_empty()
            .with_attributes([
                KeyValue::new("deploy.token", "t0k3n"),
                KeyValue::new("service.name", "svc"),
            ])
            .build();
        wrapped.set_resource(&res);
        let seen = wrapped.inner().0.lock().unwrap().clone().unwrap();
        assert_eq!(seen.get(&Key::from("deploy.token")), Some(red()));
        assert_eq!(
            seen.get(&Key::from("service.name")),
            Some(Value::from("svc"))
        );
    }

    #[test]
    fn redact_span_reports_changes() {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let mut span = provider.tracer("t").start("clean");
        span.set_attribute(KeyValue::new("n", 1));
        span.end();
        let mut data = exporter.get_finished_spans().unwrap().remove(0);
        assert!(!redactor().redact_span(&mut data));
    }

    #[test]
    fn resource_attributes_before_build() {
        // what setup does with OTEL_RESOURCE_ATTRIBUTES=deploy.token=...
        let mut attrs = vec![
            KeyValue::new("deploy.token", "t0k3n"),
            KeyValue::new("service.name", "svc"),
        ];
        assert!(redactor().redact_attributes(&mut attrs));
        let res = Resource::builder_empty().with_attributes(attrs).build();
        assert_eq!(res.get(&Key::from("deploy.token")), Some(red()));
        assert_eq!(
            res.get(&Key::from("service.name")),
            Some(Value::from("svc"))
        );
        assert!(redactor().redact_resource(&res).is_none());
    }

    fn log_provider(exporter: &InMemoryLogExporter) -> SdkLoggerProvider {
        SdkLoggerProvider::builder()
            .with_resource(
                Resource::builder_empty()
                    .with_attribute(KeyValue::new("deploy.token", "t0k3n"))
                    .build(),
            )
            .with_simple_exporter(RedactLogs::new(exporter.clone(), redactor()))
            .build()
    }

    fn any(record: &SdkLogRecord, key: &str) -> Option<AnyValue> {
        record
            .attributes_iter()
            .find(|(k, _)| k.as_str() == key)
            .map(|(_, v)| v.clone())
    }

    #[test]
    fn log_records_and_resource_are_redacted() {
        let exporter = InMemoryLogExporter::default();
        let provider = log_provider(&exporter);
        let logger = provider.logger("t");
        let mut rec = logger.create_log_record();
        rec.set_event_name("ev");
        rec.set_target("tgt");
        rec.set_severity_number(Severity::Warn);
        rec.set_severity_text("WARN");
        rec.set_timestamp(std::time::SystemTime::UNIX_EPOCH);
        rec.set_trace_context(TraceId::from(3), SpanId::from(4), Some(TraceFlags::SAMPLED));
        rec.set_body(AnyValue::from("prompt was: tell me")); // free text: kept
        rec.add_attribute("prompt", "secret text");
        rec.add_attribute("api_key", "x");
        rec.add_attribute("token_count", 5);
        rec.add_attribute("user.email", AnyValue::ListAny(Box::new(vec!["a".into()])));
        rec.add_attribute("bytes.secret", AnyValue::Bytes(Box::new(vec![1, 2])));
        let mut map = HashMap::new();
        map.insert(Key::from("hf_token"), AnyValue::from("hf_x"));
        map.insert(Key::from("n"), AnyValue::from("kept"));
        rec.add_attribute("cfg", AnyValue::Map(Box::new(map)));
        rec.add_attribute("model", "m");
        logger.emit(rec);
        // a clean record in another batch goes through as is
        let mut clean = logger.create_log_record();
        clean.add_attribute("model", "m");
        logger.emit(clean);

        let logs = exporter.get_emitted_logs().unwrap();
        let r = &logs[0].record;
        let redacted = Some(AnyValue::from(REDACTED));
        assert_eq!(any(r, "prompt"), redacted);
        assert_eq!(any(r, "api_key"), redacted);
        assert_eq!(any(r, "user.email"), redacted);
        assert_eq!(any(r, "bytes.secret"), redacted);
        assert_eq!(any(r, "token_count"), Some(AnyValue::Int(5)));
        assert_eq!(any(r, "model"), Some(AnyValue::from("m")));
        let Some(AnyValue::Map(m)) = any(r, "cfg") else {
            panic!("cfg is a map")
        };
        assert_eq!(m.get(&Key::from("hf_token")), redacted.as_ref());
        assert_eq!(m.get(&Key::from("n")), Some(&AnyValue::from("kept")));
        assert_eq!(r.attributes_iter().count(), 7, "order and count kept");
        assert_eq!(r.event_name(), Some("ev"));
        assert_eq!(r.target().map(|t| t.as_ref()), Some("tgt"));
        assert_eq!(r.severity_number(), Some(Severity::Warn));
        assert_eq!(r.severity_text(), Some("WARN"));
        assert_eq!(r.timestamp(), Some(std::time::SystemTime::UNIX_EPOCH));
        assert!(r.observed_timestamp().is_some());
        assert_eq!(r.trace_context().map(|c| c.span_id), Some(SpanId::from(4)));
        assert_eq!(r.body(), Some(&AnyValue::from("prompt was: tell me")));
        assert_eq!(any(&logs[1].record, "model"), Some(AnyValue::from("m")));
        assert_eq!(
            logs[0].resource.get(&Key::from("deploy.token")),
            Some(red()),
            "set_resource is redacted"
        );
    }

    #[test]
    fn rebuilt_record_keeps_every_field() {
        let exporter = InMemoryLogExporter::default();
        let provider = SdkLoggerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let logger = provider.logger("t");
        let mut rec = logger.create_log_record();
        rec.set_event_name("ev");
        rec.set_target("tgt");
        rec.set_severity_number(Severity::Error);
        rec.set_severity_text("ERROR");
        rec.set_timestamp(std::time::SystemTime::UNIX_EPOCH);
        rec.set_observed_timestamp(std::time::SystemTime::UNIX_EPOCH);
        rec.set_trace_context(TraceId::from(3), SpanId::from(4), Some(TraceFlags::SAMPLED));
        rec.set_body(AnyValue::from("b"));
        rec.add_attribute("n", 1);
        rec.add_attribute("s", "v");
        logger.emit(rec);
        let original = exporter.get_emitted_logs().unwrap().remove(0).record;
        assert!(!redactor().record_needs(&original));
        assert_eq!(redactor().redact_record(&original), original);
    }

    #[test]
    fn tracing_event_fields_through_the_log_bridge() {
        use tracing_subscriber::layer::SubscriberExt as _;
        let exporter = InMemoryLogExporter::default();
        let provider = log_provider(&exporter);
        let subscriber = tracing_subscriber::registry().with(
            opentelemetry_appender_tracing::layer::OpenTelemetryTracingBridge::new(&provider),
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(prompt = "tell me", token_count = 5_i64, "generated");
        });
        let logs = exporter.get_emitted_logs().unwrap();
        let r = &logs[0].record;
        assert_eq!(any(r, "prompt"), Some(AnyValue::from(REDACTED)));
        assert_eq!(any(r, "token_count"), Some(AnyValue::Int(5)));
        assert_eq!(r.body(), Some(&AnyValue::from("generated")));
    }

    fn points(
        rms: &[opentelemetry_sdk::metrics::data::ResourceMetrics],
        name: &str,
    ) -> Vec<Vec<KeyValue>> {
        let metrics = flat(rms);
        let m = metrics
            .iter()
            .find(|m| m.name() == name)
            .unwrap_or_else(|| panic!("no {name}"));
        let attrs = |it: &mut dyn Iterator<Item = &KeyValue>| it.cloned().collect::<Vec<_>>();
        match m.data() {
            AggregatedMetrics::U64(MetricData::Sum(s)) => s
                .data_points()
                .map(|p| attrs(&mut p.attributes()))
                .collect(),
            AggregatedMetrics::F64(MetricData::Histogram(h)) => h
                .data_points()
                .map(|p| attrs(&mut p.attributes()))
                .collect(),
            AggregatedMetrics::I64(MetricData::Gauge(g)) => g
                .data_points()
                .map(|p| attrs(&mut p.attributes()))
                .collect(),
            AggregatedMetrics::F64(MetricData::Sum(s)) => s
                .data_points()
                .map(|p| attrs(&mut p.attributes()))
                .collect(),
            _ => panic!("unexpected data for {name}"),
        }
    }

    #[test]
    fn metric_attributes_are_redacted_at_the_measurement() {
        let (sdk, exporter) = provider();
        let p = RedactingMeterProvider::new(sdk.clone(), redactor());
        let meter = p.meter("t");
        let attrs = [
            KeyValue::new("prompt", "secret text"),
            KeyValue::new("api_key", "x"),
            KeyValue::new("token_count", 5),
            KeyValue::new("gen_ai.token.type", "input"),
        ];
        meter
            .u64_counter("c")
            .with_description("d")
            .with_unit("{req}")
            .build()
            .add(1, &attrs);
        meter
            .f64_histogram("h")
            .with_boundaries(vec![1.0, 2.0])
            .build()
            .record(1.5, &attrs);
        meter.f64_up_down_counter("u").build().add(1.0, &attrs);
        let owned = attrs.to_vec();
        let _g = meter
            .i64_observable_gauge("g")
            .with_callback(move |o| o.observe(3, &owned))
            .build();
        let rms = collect(&sdk, &exporter);
        for name in ["c", "h", "u", "g"] {
            let pts = points(&rms, name);
            assert_eq!(pts.len(), 1, "{name}");
            let got = &pts[0];
            assert_eq!(get(got, "prompt"), Some(&red()), "{name}");
            assert_eq!(get(got, "api_key"), Some(&red()), "{name}");
            assert_eq!(get(got, "token_count"), Some(&Value::I64(5)), "{name}");
            assert_eq!(get(got, "gen_ai.token.type"), Some(&Value::from("input")));
        }
        let metrics = flat(&rms);
        let c = metrics.iter().find(|m| m.name() == "c").unwrap();
        assert_eq!((c.description(), c.unit()), ("d", "{req}"));
        let h = metrics.iter().find(|m| m.name() == "h").unwrap();
        let AggregatedMetrics::F64(MetricData::Histogram(h)) = h.data() else {
            panic!("histogram")
        };
        let bounds: Vec<f64> = h.data_points().next().unwrap().bounds().collect();
        assert_eq!(bounds, [1.0, 2.0], "boundaries kept");
    }
}
