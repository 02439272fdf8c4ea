//! Setting attributes on spans under the scalar and redaction rules.

use super::rule::*;
use super::value::*;
use opentelemetry::{KeyValue, Value};
/// The value recorded under `key`: redacted when the runtime key rule says
/// so, `None` for `None`.
pub(crate) fn value_for_key<V: AttributeValue + ?Sized>(key: &str, value: &V) -> Option<Value> {
    if is_redacted_key(key) {
        value.to_value_redacted()
    } else {
        value.to_value()
    }
}

/// Pushes `key = value` (skipping `None`), redacting by the runtime key rule.
#[inline]
pub(crate) fn push_attribute<V: AttributeValue + ?Sized>(
    attrs: &mut Vec<KeyValue>,
    key: impl Into<opentelemetry::Key>,
    value: &V,
) {
    let key = key.into();
    if let Some(value) = value_for_key(key.as_str(), value) {
        attrs.push(KeyValue::new(key, value));
    }
}

/// Builds attributes from `(key, value)` pairs under the scalar and
/// redaction rules (used for events and links).
pub(crate) fn collect(attributes: &[(&str, &dyn AttributeValue)]) -> Vec<KeyValue> {
    let mut attrs = Vec::with_capacity(attributes.len());
    for (k, v) in attributes {
        push_attribute(&mut attrs, opentelemetry::Key::new((*k).to_owned()), *v);
    }
    attrs
}

/// A span that [`safe_set_span_attributes`] can write to: a lens
/// [`LensSpan`](crate::api::span::LensSpan) or [`SpanGuard`](crate::api::span::SpanGuard),
/// the span of an OpenTelemetry [`Context`](opentelemetry::Context), or the
/// [`SpanRef`](opentelemetry::trace::SpanRef) that
/// `opentelemetry::trace::get_active_span` hands out.
///
/// ```
/// use lens::SpanAttributeTarget;
/// fn takes(_: &impl SpanAttributeTarget) {}
/// takes(&lens::otel::Context::current());
/// ```
pub trait SpanAttributeTarget {
    /// Whether the span records (attributes of a non-recording span are not
    /// even built).
    fn is_recording(&self) -> bool;
    /// Sets one attribute that already passed the scalar and redaction rules.
    fn set_checked_attribute(&self, attribute: KeyValue);
}

impl SpanAttributeTarget for opentelemetry::trace::SpanRef<'_> {
    fn is_recording(&self) -> bool {
        opentelemetry::trace::SpanRef::is_recording(self)
    }
    fn set_checked_attribute(&self, attribute: KeyValue) {
        self.set_attribute(attribute);
    }
}

/// Sets a dynamic set of attributes on `span` under lens's rules: values
/// must be scalars, slices/`Vec`s of one scalar type or `Option`s of those
/// (`None` is skipped); string values under a key of the default rule
/// ([`is_redacted_key`]) *and* under any of `redact_keys` become
/// [`REDACTED`] (see `is_redacted_key_with`; the defaults cannot be
/// switched off). For keys known at the call site, `managed_span!`/`span_cm!` fields
/// and `SpanGuard::set_attribute` do the same with the check at compile
/// time. Never panics; a non-recording span is left alone.
///
/// ```
/// use lens::safe_set_span_attributes;
/// let span = lens::detached_span("request");
/// let user = "alice".to_owned();
/// safe_set_span_attributes(
///     &span,
///     &[("http.status", &200), ("user.email", &user), ("prompt", &"hi"), ("retry", &None::<u32>)],
///     &["email"], // user.email -> "[REDACTED]", as is prompt
/// );
/// ```
pub fn safe_set_span_attributes<S: SpanAttributeTarget + ?Sized>(
    span: &S,
    attributes: &[(&str, &dyn AttributeValue)],
    redact_keys: &[&str],
) {
    if !span.is_recording() {
        return;
    }
    for (key, value) in attributes {
        let value = if is_redacted_key_with(key, redact_keys) {
            value.to_value_redacted()
        } else {
            value.to_value()
        };
        if let Some(value) = value {
            span.set_checked_attribute(KeyValue::new((*key).to_owned(), value));
        }
    }
}

#[cfg(test)]
mod examples {
    //! Examples of crate-private items, kept as unit tests.

    #[test]
    fn value_for_key() {
        use crate::api::attr::value_for_key;
        assert_eq!(
            value_for_key("api.token", &"t").unwrap().as_str(),
            "[REDACTED]"
        );
        assert!(value_for_key("n", &None::<i64>).is_none());
    }

    #[test]
    fn push_attribute() {
        let mut v = Vec::new();
        crate::api::attr::set::push_attribute(&mut v, "password", &"hunter2");
        assert_eq!(v[0].value.as_str(), "[REDACTED]");
    }

    #[test]
    fn collect() {
        let attrs =
            crate::api::attr::collect(&[("n", &3), ("secret", &"x"), ("skip", &None::<i64>)]);
        assert_eq!(attrs.len(), 2);
        assert_eq!(attrs[1].value.as_str(), "[REDACTED]");
    }
}
