//! The redaction rule: which keys are sensitive, and what a redacted value becomes.

use opentelemetry::{Array, StringValue, Value};
// The tables and the rule live in `lens-names`, which the proc macros use
// too: one rule at compile time and at run time.

/// The text that replaces a redacted string value.
///
/// ```
/// assert_eq!(lens::REDACTED, "[REDACTED]");
/// ```
pub const REDACTED: &str = lens_names::REDACTED;

/// Sensitive words: a key matches when the whole key or any of its
/// dot-separated segments equals one of these (ASCII case-insensitive), so
/// `prompt`, `gen_ai.Prompt` and `API.KEY.id` all match. The full rule is
/// [`is_redacted_key`].
///
/// ```
/// assert!(lens::REDACTED_KEYS.contains(&"password"));
/// ```
pub const REDACTED_KEYS: &[&str] = lens_names::REDACTED_KEYS;

/// Whether string values (and string arrays) under `key` are redacted by the
/// default rule. A key matches when (all comparisons ASCII case-insensitive):
///
/// * the whole key or any dot-separated segment equals one of
///   [`REDACTED_KEYS`] (`prompt`, `gen_ai.prompt`, `llm.text.raw`);
/// * any segment ends in `_key`, `_token`, `_secret` or `_password`
///   (`api_key`, `hf_token`, `db_password`);
/// * it starts with `gen_ai.prompt` or `gen_ai.completion`
///   (`gen_ai.completion.0.content`) or is one of `gen_ai.input.messages`,
///   `gen_ai.output.messages`, `gen_ai.system_instructions`;
///
/// and it is not `gen_ai.token.type` (an enumeration). The proc macros apply
/// the same rule, from the same table, to literal keys at compile time.
///
/// ```
/// use lens::is_redacted_key;
/// for k in ["prompt", "gen_ai.Prompt", "api_key", "HF_TOKEN", "gen_ai.completion.0.content"] {
///     assert!(is_redacted_key(k), "{k}");
/// }
/// for k in ["prompt_tokens", "gen_ai.usage.input_tokens", "tokenizer", "keyframe", "text_len"] {
///     assert!(!is_redacted_key(k), "{k}");
/// }
/// ```
#[inline]
pub fn is_redacted_key(key: &str) -> bool {
    lens_names::is_redacted_key(key)
}

/// Whether string values under `key` are redacted by the default rule
/// ([`is_redacted_key`]) or by one of `extra`. An extra key matches when it
/// equals the whole key or a run of whole dot-separated segments of it
/// (ASCII case-insensitive): `email` matches `user.Email`, `user.email`
/// matches `app.user.email.hash`; `email` does not match `emails` or
/// `user_email`. Blank extra keys are ignored. Never allocates.
pub(crate) fn is_redacted_key_with<S: AsRef<str>>(key: &str, extra: &[S]) -> bool {
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

/// Redacts `value` in place as it would be under a redacted key: a string
/// (other than [`REDACTED`] itself) or a string array becomes the string
/// [`REDACTED`]; other values are kept. Returns whether it changed.
pub(crate) fn redact_value(value: &mut Value) -> bool {
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
pub(super) fn redacted(mut value: Value) -> Value {
    redact_value(&mut value);
    value
}

#[cfg(test)]
mod examples {
    //! Examples of crate-private items, kept as unit tests.

    #[test]
    fn is_redacted_key_with() {
        use crate::api::attr::is_redacted_key_with;
        assert!(is_redacted_key_with("user.Email", &["email"]));
        assert!(is_redacted_key_with("app.user.email.hash", &["user.email"]));
        assert!(!is_redacted_key_with("user_email", &["email"]));
        assert!(is_redacted_key_with("prompt", &[] as &[&str]));
    }

    #[test]
    fn redact_value() {
        use crate::api::attr::redact_value;
        use opentelemetry::{Array, Value};
        let mut v = Value::from("secret");
        assert!(redact_value(&mut v));
        assert_eq!(v.as_str(), "[REDACTED]");
        let mut v = Value::Array(Array::String(vec!["a".into()]));
        assert!(redact_value(&mut v) && v.as_str() == "[REDACTED]");
        let mut n = Value::I64(42);
        assert!(!redact_value(&mut n));
    }
}
