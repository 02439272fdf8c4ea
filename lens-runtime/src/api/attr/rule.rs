//! The redaction rule: which keys are sensitive, and what a redacted value becomes.

use opentelemetry::{Array, StringValue, Value};
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
pub(super) fn redacted(mut value: Value) -> Value {
    redact_value(&mut value);
    value
}
