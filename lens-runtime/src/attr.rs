//! Attribute values: the scalar rule and redaction.

use opentelemetry::{Array, KeyValue, StringValue, Value};
use std::borrow::Cow;
use std::rc::Rc;
use std::sync::Arc;

/// The text that replaces a redacted string value.
pub const REDACTED: &str = "[REDACTED]";

/// Keys whose string values are replaced by [`REDACTED`]. A key matches when
/// it, or its last dot-separated segment, equals one of these (ASCII
/// case-insensitive): `prompt`, `gen_ai.prompt` and `API.KEY` all match.
pub const REDACTED_KEYS: &[&str] = &[
    "prompt",
    "input_text",
    "output_text",
    "text",
    "password",
    "token",
    "secret",
    "key",
];

/// Whether string values under `key` are redacted.
///
/// ```
/// use lens_runtime::attr::is_redacted_key;
/// assert!(is_redacted_key("prompt"));
/// assert!(is_redacted_key("gen_ai.Prompt"));
/// assert!(!is_redacted_key("prompt_tokens"));
/// ```
pub fn is_redacted_key(key: &str) -> bool {
    key_in(key, REDACTED_KEYS)
}

/// Whether `key`, or its last dot-separated segment, equals one of `list`
/// (ASCII case-insensitive): the one matching rule for redaction keys.
fn key_in(key: &str, list: &[&str]) -> bool {
    let last = key.rsplit('.').next().unwrap_or(key);
    list.iter()
        .any(|k| k.eq_ignore_ascii_case(last) || k.eq_ignore_ascii_case(key))
}

/// A value that can be recorded as a span attribute: `bool`, an integer, a
/// float, a string, a slice / array / `Vec` of one of those, or an `Option`
/// of any of these (`None` records nothing).
///
/// ```
/// use lens_runtime::attr::AttributeValue;
/// assert!(3u32.to_value().is_some());
/// assert!(None::<f64>.to_value().is_none());
/// assert_eq!("hi".to_value_redacted().unwrap().as_str(), "[REDACTED]");
/// assert_eq!(7i64.to_value_redacted().unwrap().as_str(), "7");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be recorded as a span attribute value",
    label = "not a scalar, a slice/Vec of scalars, or an Option of those",
    note = "span attribute values must be bool, an integer, a float, a string, a slice/array/Vec of one of those, or an Option of one of those (None is skipped)",
    note = "record a field of it instead, or convert it first (e.g. `value.to_string()`)"
)]
pub trait AttributeValue {
    /// The OpenTelemetry value, or `None` to record nothing.
    fn to_value(&self) -> Option<Value>;
    /// The value under a redacted key: strings become [`REDACTED`], other
    /// values are kept.
    fn to_value_redacted(&self) -> Option<Value> {
        self.to_value()
    }
}

macro_rules! int_value {
    ($($t:ty),*) => {$(
        impl AttributeValue for $t {
            #[inline]
            fn to_value(&self) -> Option<Value> { Some(Value::I64(i64::from(*self))) }
        }
        impl ArrayElement for $t {
            fn to_array(items: &[Self]) -> Array { Array::I64(items.iter().map(|v| i64::from(*v)).collect()) }
        }
    )*};
}
int_value!(i8, i16, i32, i64, u8, u16, u32);

macro_rules! wide_int_value {
    ($($t:ty),*) => {$(
        impl AttributeValue for $t {
            /// Values above `i64::MAX` are recorded as decimal strings.
            #[inline]
            fn to_value(&self) -> Option<Value> {
                Some(match i64::try_from(*self) {
                    Ok(v) => Value::I64(v),
                    Err(_) => Value::String(self.to_string().into()),
                })
            }
        }
        impl ArrayElement for $t {
            /// Saturates at `i64::MAX` (arrays hold one type).
            fn to_array(items: &[Self]) -> Array {
                Array::I64(items.iter().map(|v| i64::try_from(*v).unwrap_or(i64::MAX)).collect())
            }
        }
    )*};
}
wide_int_value!(u64, usize, isize);

impl AttributeValue for f64 {
    #[inline]
    fn to_value(&self) -> Option<Value> {
        Some(Value::F64(*self))
    }
}
impl AttributeValue for f32 {
    #[inline]
    fn to_value(&self) -> Option<Value> {
        Some(Value::F64(f64::from(*self)))
    }
}
impl AttributeValue for bool {
    #[inline]
    fn to_value(&self) -> Option<Value> {
        Some(Value::Bool(*self))
    }
}

macro_rules! str_value {
    ($($t:ty),*) => {$(
        impl AttributeValue for $t {
            #[inline]
            fn to_value(&self) -> Option<Value> { Some(Value::String(StringValue::from(<str as ToOwned>::to_owned(self)))) }
            #[inline]
            fn to_value_redacted(&self) -> Option<Value> { Some(Value::String(StringValue::from(REDACTED))) }
        }
    )*};
}
str_value!(str, String, Cow<'_, str>, Box<str>, Rc<str>, Arc<str>);

impl<T: AttributeValue + ?Sized> AttributeValue for &T {
    #[inline]
    fn to_value(&self) -> Option<Value> {
        (**self).to_value()
    }
    #[inline]
    fn to_value_redacted(&self) -> Option<Value> {
        (**self).to_value_redacted()
    }
}

impl<T: AttributeValue> AttributeValue for Option<T> {
    #[inline]
    fn to_value(&self) -> Option<Value> {
        self.as_ref().and_then(T::to_value)
    }
    #[inline]
    fn to_value_redacted(&self) -> Option<Value> {
        self.as_ref().and_then(T::to_value_redacted)
    }
}

/// A scalar type that can be an element of an array attribute.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be an element of an array span attribute",
    note = "array attribute elements must all be one of: bool, an integer, a float, a string"
)]
pub trait ArrayElement: Sized {
    /// Builds the OpenTelemetry array.
    fn to_array(items: &[Self]) -> Array;
    /// The array under a redacted key.
    fn to_array_redacted(items: &[Self]) -> Value {
        Value::Array(Self::to_array(items))
    }
}

impl ArrayElement for bool {
    fn to_array(items: &[Self]) -> Array {
        Array::Bool(items.to_vec())
    }
}
impl ArrayElement for f64 {
    fn to_array(items: &[Self]) -> Array {
        Array::F64(items.to_vec())
    }
}
impl ArrayElement for f32 {
    fn to_array(items: &[Self]) -> Array {
        Array::F64(items.iter().map(|v| f64::from(*v)).collect())
    }
}
macro_rules! str_elem {
    ($($t:ty),*) => {$(
        impl ArrayElement for $t {
            fn to_array(items: &[Self]) -> Array {
                Array::String(items.iter().map(|s| StringValue::from(<str as ToOwned>::to_owned(s))).collect())
            }
            fn to_array_redacted(_: &[Self]) -> Value { Value::String(StringValue::from(REDACTED)) }
        }
    )*};
}
str_elem!(&str, String, Cow<'_, str>, Box<str>, Arc<str>);

impl<T: ArrayElement> AttributeValue for [T] {
    fn to_value(&self) -> Option<Value> {
        Some(Value::Array(T::to_array(self)))
    }
    fn to_value_redacted(&self) -> Option<Value> {
        Some(T::to_array_redacted(self))
    }
}
impl<T: ArrayElement> AttributeValue for Vec<T> {
    fn to_value(&self) -> Option<Value> {
        self.as_slice().to_value()
    }
    fn to_value_redacted(&self) -> Option<Value> {
        self.as_slice().to_value_redacted()
    }
}
impl<T: ArrayElement, const N: usize> AttributeValue for [T; N] {
    fn to_value(&self) -> Option<Value> {
        self.as_slice().to_value()
    }
    fn to_value_redacted(&self) -> Option<Value> {
        self.as_slice().to_value_redacted()
    }
}

/// The value recorded under `key`: redacted when the runtime key rule says
/// so, `None` for `None`.
///
/// ```
/// use lens_runtime::attr::value_for_key;
/// assert_eq!(value_for_key("api.token", &"t").unwrap().as_str(), "[REDACTED]");
/// assert!(value_for_key("n", &None::<i64>).is_none());
/// ```
pub fn value_for_key<V: AttributeValue + ?Sized>(key: &str, value: &V) -> Option<Value> {
    if is_redacted_key(key) {
        value.to_value_redacted()
    } else {
        value.to_value()
    }
}

/// Pushes `key = value` (skipping `None`), redacting by the runtime key rule.
///
/// ```
/// let mut v = Vec::new();
/// lens_runtime::attr::push_attribute(&mut v, "password", &"hunter2");
/// assert_eq!(v[0].value.as_str(), "[REDACTED]");
/// ```
#[inline]
pub fn push_attribute<V: AttributeValue + ?Sized>(
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
///
/// ```
/// let attrs = lens_runtime::attr::collect(&[("n", &3), ("secret", &"x"), ("skip", &None::<i64>)]);
/// assert_eq!(attrs.len(), 2);
/// assert_eq!(attrs[1].value.as_str(), "[REDACTED]");
/// ```
pub fn collect(attributes: &[(&str, &dyn AttributeValue)]) -> Vec<KeyValue> {
    let mut attrs = Vec::with_capacity(attributes.len());
    for (k, v) in attributes {
        push_attribute(&mut attrs, opentelemetry::Key::new((*k).to_owned()), *v);
    }
    attrs
}

/// Whether `key` is redacted by the default keys or one of `extra` (same
/// rule: the key or its last dotted segment, ASCII case-insensitive).
fn is_redacted_with(key: &str, extra: &[&str]) -> bool {
    is_redacted_key(key) || key_in(key, extra)
}

/// A span that [`safe_set_span_attributes`] can write to: a lens
/// [`LensSpan`](crate::span::LensSpan) or [`SpanGuard`](crate::span::SpanGuard),
/// the span of an OpenTelemetry [`Context`](opentelemetry::Context), or the
/// [`SpanRef`](opentelemetry::trace::SpanRef) that
/// `opentelemetry::trace::get_active_span` hands out.
///
/// ```
/// use lens_runtime::attr::SpanAttributeTarget;
/// fn takes(_: &impl SpanAttributeTarget) {}
/// takes(&lens_runtime::otel::Context::current());
/// ```
pub trait SpanAttributeTarget {
    /// Whether the span records (attributes of a non-recording span are not
    /// even built).
    fn is_recording(&self) -> bool;
    /// Sets one attribute that already passed the scalar and redaction rules.
    fn set_checked_attribute(&self, attribute: KeyValue);
}

impl SpanAttributeTarget for opentelemetry::Context {
    fn is_recording(&self) -> bool {
        use opentelemetry::trace::TraceContextExt as _;
        self.span().is_recording()
    }
    fn set_checked_attribute(&self, attribute: KeyValue) {
        use opentelemetry::trace::TraceContextExt as _;
        self.span().set_attribute(attribute);
    }
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
/// (`None` is skipped); string values under the default redacted keys
/// ([`REDACTED_KEYS`]) *and* under any of `redact_keys` become
/// [`REDACTED`] (a key matches when it, or its last dotted segment, equals
/// one of them, ASCII case-insensitive; the defaults cannot be switched
/// off). For keys known at the call site, `managed_span!`/`span_cm!` fields
/// and `SpanGuard::set_attribute` do the same with the check at compile
/// time. Never panics; a non-recording span is left alone.
///
/// ```
/// use lens_runtime::attr::safe_set_span_attributes;
/// let span = lens_runtime::span::start_detached("request", Vec::new());
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
        let value = if is_redacted_with(key, redact_keys) {
            value.to_value_redacted()
        } else {
            value.to_value()
        };
        if let Some(value) = value {
            span.set_checked_attribute(KeyValue::new((*key).to_owned(), value));
        }
    }
}
