//! Attribute values: the scalar rule and redaction.

use opentelemetry::{Array, KeyValue, StringValue, Value};
use std::borrow::Cow;
use std::rc::Rc;
use std::sync::Arc;

/// The text that replaces a redacted string value.
pub const REDACTED: &str = "[REDACTED]";

/// Sensitive words: a key matches when the whole key or any of its
/// dot-separated segments equals one of these (ASCII case-insensitive), so
/// `prompt`, `gen_ai.Prompt` and `API.KEY.id` all match. The full rule is
/// [`is_redacted_key`].
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

/// Segment endings that make a key sensitive (ASCII case-insensitive):
/// `api_key`, `hf_token`, `client_secret`, `db_password`. `prompt_tokens`
/// ends in `_tokens` and does not match.
pub const REDACTED_KEY_SUFFIXES: &[&str] = &["_key", "_token", "_secret", "_password"];

/// GenAI content key prefixes (ASCII case-insensitive): `gen_ai.prompt`,
/// `gen_ai.prompt.0.content`, `gen_ai.completion.0.content` all match.
pub const REDACTED_GEN_AI_PREFIXES: &[&str] = &["gen_ai.prompt", "gen_ai.completion"];

/// GenAI content keys matched whole (ASCII case-insensitive).
pub const REDACTED_GEN_AI_KEYS: &[&str] = &[
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
];

/// Keys that would match the segment rule but are well-known, non-sensitive
/// semantic-convention attributes whose value is an enumeration (redacting
/// them would merge metric series): `gen_ai.token.type` (`input` / `output`).
pub const NOT_REDACTED_KEYS: &[&str] = &["gen_ai.token.type"];

/// Whether string values (and string arrays) under `key` are redacted by the
/// default rule. A key matches when (all comparisons ASCII case-insensitive):
///
/// * the whole key or any dot-separated segment equals one of
///   [`REDACTED_KEYS`] (`prompt`, `gen_ai.prompt`, `llm.text.raw`);
/// * any segment ends in one of [`REDACTED_KEY_SUFFIXES`] (`api_key`,
///   `hf_token`, `db_password`);
/// * it starts with one of [`REDACTED_GEN_AI_PREFIXES`]
///   (`gen_ai.completion.0.content`) or equals one of [`REDACTED_GEN_AI_KEYS`];
///
/// and it is not one of [`NOT_REDACTED_KEYS`]. The proc macros apply the
/// same rule to literal keys at compile time.
///
/// ```
/// use lens_runtime::attr::is_redacted_key;
/// for k in ["prompt", "gen_ai.Prompt", "api_key", "HF_TOKEN", "gen_ai.completion.0.content"] {
///     assert!(is_redacted_key(k), "{k}");
/// }
/// for k in ["prompt_tokens", "gen_ai.usage.input_tokens", "tokenizer", "keyframe", "text_len"] {
///     assert!(!is_redacted_key(k), "{k}");
/// }
/// ```
pub fn is_redacted_key(key: &str) -> bool {
    if eq_any(key, NOT_REDACTED_KEYS) {
        return false;
    }
    eq_any(key, REDACTED_KEYS)
        || eq_any(key, REDACTED_GEN_AI_KEYS)
        || REDACTED_GEN_AI_PREFIXES
            .iter()
            .any(|p| starts_with_ignore_case(key, p))
        || key.split('.').any(|seg| {
            eq_any(seg, REDACTED_KEYS)
                || REDACTED_KEY_SUFFIXES
                    .iter()
                    .any(|s| ends_with_ignore_case(seg, s))
        })
}

/// Whether string values under `key` are redacted by the default rule
/// ([`is_redacted_key`]) or by one of `extra`. An extra key matches when it
/// equals the whole key or a run of whole dot-separated segments of it
/// (ASCII case-insensitive): `email` matches `user.Email`, `user.email`
/// matches `app.user.email.hash`; `email` does not match `emails` or
/// `user_email`. Blank extra keys are ignored. Never allocates.
///
/// ```
/// use lens_runtime::attr::is_redacted_key_with;
/// assert!(is_redacted_key_with("user.Email", &["email"]));
/// assert!(is_redacted_key_with("app.user.email.hash", &["user.email"]));
/// assert!(!is_redacted_key_with("user_email", &["email"]));
/// assert!(is_redacted_key_with("prompt", &[] as &[&str]));
/// ```
pub fn is_redacted_key_with<S: AsRef<str>>(key: &str, extra: &[S]) -> bool {
    is_redacted_key(key) || extra.iter().any(|e| key_has_segments(key, e.as_ref()))
}

/// Whether `needle` (trimmed, non-blank) equals `key` or a run of whole
/// dot-separated segments of `key`, ASCII case-insensitive.
fn key_has_segments(key: &str, needle: &str) -> bool {
    let needle = needle.trim().as_bytes();
    let key = key.as_bytes();
    if needle.is_empty() || needle.len() > key.len() {
        return false;
    }
    (0..=key.len() - needle.len()).any(|at| {
        let end = at + needle.len();
        (at == 0 || key[at - 1] == b'.')
            && (end == key.len() || key[end] == b'.')
            && key[at..end].eq_ignore_ascii_case(needle)
    })
}

fn eq_any(s: &str, list: &[&str]) -> bool {
    list.iter().any(|w| w.eq_ignore_ascii_case(s))
}

fn starts_with_ignore_case(s: &str, prefix: &str) -> bool {
    let (s, p) = (s.as_bytes(), prefix.as_bytes());
    s.len() >= p.len() && s[..p.len()].eq_ignore_ascii_case(p)
}

fn ends_with_ignore_case(s: &str, suffix: &str) -> bool {
    let (s, x) = (s.as_bytes(), suffix.as_bytes());
    s.len() >= x.len() && s[s.len() - x.len()..].eq_ignore_ascii_case(x)
}

/// Redacts `value` in place as it would be under a redacted key: a string
/// (other than [`REDACTED`] itself) or a string array becomes the string
/// [`REDACTED`]; other values are kept. Returns whether it changed.
///
/// ```
/// use lens_runtime::attr::redact_value;
/// use lens_runtime::otel::{Array, Value};
/// let mut v = Value::from("secret");
/// assert!(redact_value(&mut v));
/// assert_eq!(v.as_str(), "[REDACTED]");
/// let mut v = Value::Array(Array::String(vec!["a".into()]));
/// assert!(redact_value(&mut v) && v.as_str() == "[REDACTED]");
/// let mut n = Value::I64(42);
/// assert!(!redact_value(&mut n));
/// ```
pub fn redact_value(value: &mut Value) -> bool {
    let redact = is_redactable(value);
    if redact {
        *value = Value::String(StringValue::from(REDACTED));
    }
    redact
}

/// Whether [`redact_value`] would change `value`: a string other than
/// [`REDACTED`], a string array, or a kind of value added to OpenTelemetry
/// later (redacted rather than risk exporting text).
pub(crate) fn is_redactable(value: &Value) -> bool {
    match value {
        Value::String(s) => s.as_str() != REDACTED,
        Value::Array(Array::String(_)) => true,
        Value::Bool(_) | Value::I64(_) | Value::F64(_) => false,
        Value::Array(Array::Bool(_) | Array::I64(_) | Array::F64(_)) => false,
        _ => true,
    }
}

/// [`redact_value`] by value.
fn redacted(mut value: Value) -> Value {
    redact_value(&mut value);
    value
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
    /// The value under a redacted key: strings and string arrays become
    /// [`REDACTED`], other values are kept. The default applies
    /// [`redact_value`] to [`to_value`](Self::to_value), so a type
    /// implementing only `to_value` is redacted too.
    ///
    /// ```
    /// use lens_runtime::attr::AttributeValue;
    /// use lens_runtime::otel::Value;
    /// struct Prompt(String);
    /// impl AttributeValue for Prompt {
    ///     fn to_value(&self) -> Option<Value> { Some(Value::from(self.0.clone())) }
    /// }
    /// let p = Prompt("tell me a secret".into());
    /// assert_eq!(p.to_value_redacted().unwrap().as_str(), "[REDACTED]");
    /// ```
    fn to_value_redacted(&self) -> Option<Value> {
        self.to_value().map(redacted)
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
    /// The array under a redacted key: [`redact_value`] applied to
    /// [`to_array`](Self::to_array) (a string array becomes [`REDACTED`]).
    fn to_array_redacted(items: &[Self]) -> Value {
        redacted(Value::Array(Self::to_array(items)))
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

/// A span that [`safe_set_span_attributes`] can write to: a lens
/// [`LensSpan`](crate::api::span::LensSpan) or [`SpanGuard`](crate::api::span::SpanGuard),
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
/// (`None` is skipped); string values under a key of the default rule
/// ([`is_redacted_key`]) *and* under any of `redact_keys` become
/// [`REDACTED`] (see [`is_redacted_key_with`]; the defaults cannot be
/// switched off). For keys known at the call site, `managed_span!`/`span_cm!` fields
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
mod tests {
    use super::*;

    /// `(key, redacted by the default rule)`.
    const TABLE: &[(&str, bool)] = &[
        // sensitive words, whole key or any segment, any case
        ("prompt", true),
        ("PROMPT", true),
        ("gen_ai.Prompt", true),
        ("input_text", true),
        ("output_text", true),
        ("text", true),
        ("llm.text.raw", true),
        ("password", true),
        ("token", true),
        ("api.token", true),
        ("secret", true),
        ("api.secret", true),
        ("key", true),
        ("API.KEY.id", true),
        // sensitive segment endings
        ("api_key", true),
        ("openai.API_KEY", true),
        ("hf_token", true),
        ("access_token.v2", true),
        ("client_secret", true),
        ("db_password", true),
        // GenAI content keys
        ("gen_ai.prompt.0.content", true),
        ("gen_ai.prompt.1.role", true),
        ("gen_ai.completion", true),
        ("gen_ai.completion.0.content", true),
        ("GEN_AI.COMPLETION.0.CONTENT", true),
        ("gen_ai.input.messages", true),
        ("gen_ai.output.messages", true),
        ("gen_ai.system_instructions", true),
        // near-misses and common ML keys
        ("gen_ai.usage.input_tokens", false),
        ("gen_ai.usage.output_tokens", false),
        ("gen_ai.usage.prompt_tokens", false),
        ("prompt_tokens", false),
        ("output_tokens", false),
        ("tokens", false),
        ("tokenizer", false),
        ("tokenizer.name", false),
        ("keyframe", false),
        ("keys", false),
        ("monkey", false),
        ("text_len", false),
        ("texture", false),
        ("context", false),
        ("passwords_checked", false),
        ("secretary", false),
        ("gen_ai.request.model", false),
        ("gen_ai.response.finish_reasons", false),
        ("gen_ai.token.type", false),
        ("gen_ai.input.messages.count", false),
        ("_keys", false),
        ("", false),
        ("prompt\u{e9}", false),
        ("\u{e9}_key", true),
    ];

    #[test]
    fn default_rule_matches_and_near_misses() {
        for &(key, want) in TABLE {
            assert_eq!(is_redacted_key(key), want, "{key:?}");
        }
    }

    #[test]
    fn extra_keys_match_whole_segment_runs() {
        let extra = ["email", "user.ssn", " ", ""];
        for (key, want) in [
            ("email", true),
            ("user.EMAIL", true),
            ("email.hash", true),
            ("a.email.b", true),
            ("user.ssn", true),
            ("app.user.ssn.last4", true),
            ("emails", false),
            ("user_email", false),
            ("ssn", false),
            ("user.ssn_hash", false),
            ("xuser.ssn", false),
            ("http.status", false),
            ("prompt", true),
        ] {
            assert_eq!(is_redacted_key_with(key, &extra), want, "{key:?}");
        }
        assert!(
            !is_redacted_key_with("anything", &[" "]),
            "blank extras ignored"
        );
    }

    #[test]
    fn macro_rule_agrees_with_the_runtime_rule() {
        use crate::macro_tables as m;
        assert_eq!(m::REDACTED_KEYS, REDACTED_KEYS);
        assert_eq!(m::REDACTED_KEY_SUFFIXES, REDACTED_KEY_SUFFIXES);
        assert_eq!(m::REDACTED_GEN_AI_PREFIXES, REDACTED_GEN_AI_PREFIXES);
        assert_eq!(m::REDACTED_GEN_AI_KEYS, REDACTED_GEN_AI_KEYS);
        assert_eq!(m::NOT_REDACTED_KEYS, NOT_REDACTED_KEYS);
        let listed = REDACTED_KEYS
            .iter()
            .chain(REDACTED_GEN_AI_KEYS)
            .chain(REDACTED_GEN_AI_PREFIXES)
            .chain(NOT_REDACTED_KEYS)
            .map(|k| (*k, is_redacted_key(k)));
        for (key, want) in TABLE.iter().copied().chain(listed) {
            assert_eq!(m::is_redacted_key(key), want, "macro rule on {key:?}");
        }
    }

    #[test]
    fn user_types_are_redacted_by_default() {
        struct Doc(&'static str);
        impl AttributeValue for Doc {
            fn to_value(&self) -> Option<Value> {
                Some(Value::from(self.0))
            }
        }
        struct Tags;
        impl AttributeValue for Tags {
            fn to_value(&self) -> Option<Value> {
                Some(Value::Array(Array::String(vec!["a".into()])))
            }
        }
        struct Count;
        impl AttributeValue for Count {
            fn to_value(&self) -> Option<Value> {
                Some(Value::I64(42))
            }
        }
        assert_eq!(Doc("x").to_value_redacted(), Some(Value::from(REDACTED)));
        assert_eq!(Tags.to_value_redacted(), Some(Value::from(REDACTED)));
        assert_eq!(Count.to_value_redacted(), Some(Value::I64(42)));
        assert_eq!(
            value_for_key("prompt", &Doc("x")),
            Some(Value::from(REDACTED))
        );
        assert_eq!(value_for_key("note", &Doc("x")), Some(Value::from("x")));
        assert_eq!(
            value_for_key("api_key", &vec!["a", "b"]),
            Some(Value::from(REDACTED))
        );
        assert_eq!(
            value_for_key("gen_ai.prompt.0.content", &"hi"),
            Some(Value::from(REDACTED))
        );
        assert_eq!(value_for_key("token", &42u32), Some(Value::I64(42)));
        assert_eq!(
            value_for_key("key", &vec![1i64, 2]),
            Some(Value::Array(Array::I64(vec![1, 2])))
        );
    }

    #[test]
    fn redact_value_is_idempotent() {
        let mut v = Value::from(REDACTED);
        assert!(!redact_value(&mut v), "already redacted: no change");
        let mut f = Value::F64(1.5);
        assert!(!redact_value(&mut f));
        assert_eq!(f, Value::F64(1.5));
    }
}
