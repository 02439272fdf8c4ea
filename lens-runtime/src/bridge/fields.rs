//! `tracing` fields to span attributes, under lens's scalar and redaction
//! rules (the same as `managed_span!` fields and `set_attribute`).

use crate::api::attr::{value_for_key, AttributeValue};
use opentelemetry::trace::SpanKind;
use opentelemetry::{Key, KeyValue};
use std::borrow::Cow;
use std::fmt;
use tracing::field::{Field, Visit};

/// The fields of a span or an event.
///
/// * numbers and booleans are kept as they are (`u64`/`i128`/`u128` beyond
///   `i64` become decimal strings), strings as strings, anything recorded
///   with `?` / `%` as its text;
/// * a string under a redacted key (`prompt`, `api_key`, ... — see
///   `is_redacted_key`) becomes `[REDACTED]`, a number is kept;
/// * `otel.name` renames the span, `otel.kind` sets its kind (`server`,
///   `client`, `producer`, `consumer`, `internal`), as with
///   `tracing-opentelemetry`; `message` of an event is its name.
#[derive(Debug, Default)]
pub(crate) struct Fields {
    pub(crate) attributes: Vec<KeyValue>,
    pub(crate) name: Option<Cow<'static, str>>,
    pub(crate) kind: Option<SpanKind>,
    pub(crate) message: Option<String>,
    /// Reading an event: `message` is its name, not an attribute.
    event: bool,
}

impl Fields {
    pub(crate) fn span(capacity: usize) -> Self {
        Fields {
            attributes: Vec::with_capacity(capacity),
            ..Fields::default()
        }
    }

    pub(crate) fn event(capacity: usize) -> Self {
        Fields {
            attributes: Vec::with_capacity(capacity),
            event: true,
            ..Fields::default()
        }
    }

    fn push<V: AttributeValue + ?Sized>(&mut self, field: &Field, value: &V) {
        let key = field.name();
        if let Some(value) = value_for_key(key, value) {
            self.attributes
                .push(KeyValue::new(Key::from_static_str(key), value));
        }
    }

    /// Text fields: `message` of an event, the `otel.*` fields, or an
    /// attribute.
    fn text(&mut self, field: &Field, value: Cow<'_, str>) {
        match field.name() {
            "message" if self.event => self.message = Some(value.into_owned()),
            "otel.name" => self.name = Some(Cow::Owned(value.into_owned())),
            "otel.kind" => self.kind = parse_kind(&value),
            _ => self.push(field, value.as_ref()),
        }
    }
}

/// A span kind by name (case-insensitive); `None` for anything else.
pub(crate) fn parse_kind(name: &str) -> Option<SpanKind> {
    Some(match name.trim().to_ascii_lowercase().as_str() {
        "server" => SpanKind::Server,
        "client" => SpanKind::Client,
        "producer" => SpanKind::Producer,
        "consumer" => SpanKind::Consumer,
        "internal" => SpanKind::Internal,
        _ => return None,
    })
}

impl Visit for Fields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, &value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, &value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, &value);
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        match i64::try_from(value) {
            Ok(v) => self.push(field, &v),
            Err(_) => self.push(field, value.to_string().as_str()),
        }
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        match i64::try_from(value) {
            Ok(v) => self.push(field, &v),
            Err(_) => self.push(field, value.to_string().as_str()),
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, &value);
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.text(field, Cow::Borrowed(value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.text(field, Cow::Owned(value.to_string()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.text(field, Cow::Owned(format!("{value:?}")));
    }
}

/// Sets or replaces `new` in `attributes` (a field recorded again keeps
/// its latest value).
pub(crate) fn merge(attributes: &mut Vec<KeyValue>, new: Vec<KeyValue>) {
    for kv in new {
        match attributes.iter_mut().find(|a| a.key == kv.key) {
            Some(old) => *old = kv,
            None => attributes.push(kv),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse() {
        assert_eq!(parse_kind("SERVER"), Some(SpanKind::Server));
        assert_eq!(parse_kind(" client "), Some(SpanKind::Client));
        assert_eq!(parse_kind("rpc"), None);
    }

    #[test]
    fn merge_replaces_by_key() {
        let mut a = vec![KeyValue::new("x", 1), KeyValue::new("y", 2)];
        merge(&mut a, vec![KeyValue::new("y", 3), KeyValue::new("z", 4)]);
        assert_eq!(
            a,
            [
                KeyValue::new("x", 1),
                KeyValue::new("y", 3),
                KeyValue::new("z", 4)
            ]
        );
    }
}
