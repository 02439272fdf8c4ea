//! The redaction rule: built-in keys plus extra keys, applied to attributes, spans, scopes, resources and log records.

use crate::api::attr::{is_redactable, is_redacted_key_with, redact_value, REDACTED};
use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, LoggerProvider as _};
use opentelemetry::{InstrumentationScope, KeyValue, StringValue};
use opentelemetry_sdk::logs::{SdkLogRecord, SdkLogger, SdkLoggerProvider};
use opentelemetry_sdk::trace::SpanData;
use opentelemetry_sdk::Resource;
use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

/// The redaction rule: the default sensitive keys plus caller-given extra
/// keys. Cheap to clone (the extra keys are shared); checking a key never
/// allocates.
#[derive(Debug, Clone, Default)]
pub(crate) struct Redactor {
    extra: Arc<[Box<str>]>,
}

impl Redactor {
    /// The default rule plus `extra_keys` (trimmed; blank ones ignored).
    pub(crate) fn new<I>(extra_keys: I) -> Self
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
    #[cfg(test)]
    pub(crate) fn extra_keys(&self) -> impl Iterator<Item = &str> {
        self.extra.iter().map(|k| &**k)
    }

    /// Whether string values under `key` are redacted.
    pub(crate) fn is_redacted(&self, key: &str) -> bool {
        is_redacted_key_with(key, &self.extra)
    }

    /// Whether [`redact_key_value`](Self::redact_key_value) would change
    /// `kv` (the value's kind is checked before the key).
    fn needs(&self, kv: &KeyValue) -> bool {
        is_redactable(&kv.value) && self.is_redacted(kv.key.as_str())
    }

    /// Redacts one attribute in place; returns whether it changed.
    pub(crate) fn redact_key_value(&self, kv: &mut KeyValue) -> bool {
        self.needs(kv) && redact_value(&mut kv.value)
    }

    /// Redacts attributes in place (span, event, link or resource
    /// attributes); returns whether any changed. Never allocates when none
    /// is sensitive.
    pub(crate) fn redact_attributes(&self, attributes: &mut [KeyValue]) -> bool {
        let mut changed = false;
        for kv in attributes {
            changed |= self.redact_key_value(kv);
        }
        changed
    }

    /// `attributes` with sensitive ones redacted: borrowed (no allocation)
    /// when none is sensitive, else a redacted copy.
    pub(crate) fn redacted_attributes<'a>(
        &self,
        attributes: &'a [KeyValue],
    ) -> Cow<'a, [KeyValue]> {
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
    pub(crate) fn redact_span(&self, span: &mut SpanData) -> bool {
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
    #[inline]
    pub(crate) fn redact_scope(
        &self,
        scope: &InstrumentationScope,
    ) -> Option<InstrumentationScope> {
        // most scopes have no attributes (lens's own has none): no call
        match scope.attributes().next() {
            None => None,
            Some(_) => self.redact_scope_attributes(scope),
        }
    }

    #[inline(never)]
    fn redact_scope_attributes(
        &self,
        scope: &InstrumentationScope,
    ) -> Option<InstrumentationScope> {
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

    /// Hands `set` the resource as an exporter may see it: `resource`
    /// redacted where it holds a sensitive attribute.
    pub(crate) fn with_resource(&self, resource: &Resource, set: impl FnOnce(&Resource)) {
        match self.redact_resource(resource) {
            Some(redacted) => set(&redacted),
            None => set(resource),
        }
    }

    /// A copy of `resource` with sensitive attributes redacted (schema URL
    /// kept), or `None` when nothing in it is sensitive.
    pub(crate) fn redact_resource(&self, resource: &Resource) -> Option<Resource> {
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
    pub(super) fn record_needs(&self, record: &SdkLogRecord) -> bool {
        record
            .attributes_iter()
            .any(|(k, v)| self.any_needs(k.as_str(), v))
            || record.body().is_some_and(|b| self.nested_needs(b))
    }

    /// A new record with every field of `record` and its attributes (and
    /// map body entries) redacted.
    pub(super) fn redact_record(&self, record: &SdkLogRecord) -> SdkLogRecord {
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

#[cfg(test)]
mod examples {
    //! Examples of crate-private items, kept as unit tests.

    #[test]
    fn redactor() {
        use crate::sdk::redact::Redactor;
        use opentelemetry::KeyValue;
        let r = Redactor::new(["email", " "]); // blank keys are ignored
        let mut attrs = vec![
            KeyValue::new("user.email", "a@b.c"),
            KeyValue::new("api_key", "k"),
            KeyValue::new("token", 42),
            KeyValue::new("http.route", "/v1"),
        ];
        assert!(r.redact_attributes(&mut attrs));
        assert_eq!(attrs[0].value.as_str(), "[REDACTED]");
        assert_eq!(attrs[1].value.as_str(), "[REDACTED]");
        assert_eq!(attrs[2].value.as_str(), "42"); // not a string: kept
        assert_eq!(attrs[3].value.as_str(), "/v1");
    }

    #[test]
    fn new() {
        let r = crate::sdk::redact::Redactor::new(["ssn"]);
        assert!(r.is_redacted("user.ssn") && r.is_redacted("prompt"));
    }

    #[test]
    fn extra_keys() {
        let r = crate::sdk::redact::Redactor::new([" email ", ""]);
        assert_eq!(r.extra_keys().collect::<Vec<_>>(), ["email"]);
    }

    #[test]
    fn is_redacted() {
        let r = crate::sdk::redact::Redactor::default();
        assert!(r.is_redacted("gen_ai.prompt.0.content"));
        assert!(!r.is_redacted("gen_ai.usage.input_tokens"));
    }

    #[test]
    fn redact_key_value() {
        use opentelemetry::KeyValue;
        let r = crate::sdk::redact::Redactor::default();
        let mut kv = KeyValue::new("hf_token", "hf_abc");
        assert!(r.redact_key_value(&mut kv));
        assert_eq!(kv.value.as_str(), "[REDACTED]");
    }

    #[test]
    fn redact_attributes() {
        use opentelemetry::KeyValue;
        let r = crate::sdk::redact::Redactor::default();
        let mut attrs = vec![KeyValue::new("deploy.token", "t0k3n")];
        r.redact_attributes(&mut attrs);
        assert_eq!(attrs[0].value.as_str(), "[REDACTED]");
    }

    #[test]
    fn redacted_attributes() {
        use opentelemetry::KeyValue;
        use std::borrow::Cow;
        let r = crate::sdk::redact::Redactor::default();
        let clean = [KeyValue::new("n", 1)];
        assert!(matches!(r.redacted_attributes(&clean), Cow::Borrowed(_)));
        let dirty = [KeyValue::new("prompt", "p")];
        assert_eq!(
            r.redacted_attributes(&dirty)[0].value.as_str(),
            "[REDACTED]"
        );
    }

    #[test]
    fn redact_span() {
        use crate::sdk::redact::Redactor;
        use opentelemetry::trace::{Span as _, Tracer as _, TracerProvider as _};
        use opentelemetry::KeyValue;
        use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let mut span = provider.tracer("doc").start("s");
        span.set_attribute(KeyValue::new("api_key", "k"));
        span.end();
        let mut data = exporter.get_finished_spans().unwrap().remove(0);
        assert!(Redactor::default().redact_span(&mut data));
        assert_eq!(data.attributes[0].value.as_str(), "[REDACTED]");
    }

    #[test]
    fn redact_scope() {
        use opentelemetry::{InstrumentationScope, KeyValue};
        let r = crate::sdk::redact::Redactor::new::<[&str; 0]>([]);
        let scope = InstrumentationScope::builder("s")
            .with_attributes([KeyValue::new("api_key", "x")])
            .build();
        let redacted = r.redact_scope(&scope).unwrap();
        assert_eq!(
            redacted.attributes().next().unwrap().value.as_str(),
            "[REDACTED]"
        );
    }

    #[test]
    fn redact_resource() {
        use opentelemetry::KeyValue;
        use opentelemetry_sdk::Resource;
        let r = crate::sdk::redact::Redactor::default();
        let res = Resource::builder_empty()
            .with_attribute(KeyValue::new("deploy.token", "t"))
            .build();
        let red = r.redact_resource(&res).unwrap();
        assert_eq!(
            red.get(&"deploy.token".into()).unwrap().as_str(),
            "[REDACTED]"
        );
        assert!(r.redact_resource(&red).is_none());
    }
}
