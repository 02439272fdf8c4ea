//! The names that the Lens proc macros check at compile time and the runtime
//! uses at run time: the base family's groups and presets, and the default
//! redaction rule. One table, used by both crates, so that nothing has to be
//! kept in step by hand. Depend on the `lens` crate instead: this one has no
//! API of its own beyond these tables.
//!
//! ```
//! assert_eq!(lens_names::BASE_GROUPS[5], "step");
//! assert!(lens_names::is_redacted_key("api_key"));
//! ```

#![no_std]
#![forbid(unsafe_code)]

/// The base family's groups, in bit order (bit `i` of word 0 is
/// `BASE_GROUPS[i]`).
///
/// ```
/// assert_eq!(lens_names::BASE_GROUPS.len(), 8);
/// ```
pub const BASE_GROUPS: [&str; 8] = [
    "job",
    "checkpoint",
    "evaluate",
    "model_init",
    "load_checkpoint",
    "step",
    "forward_backward",
    "optimizer",
];

/// The base family's presets and their masks over word 0: `default` = job,
/// checkpoint, evaluate; `per_step` = every base group; `all` = every base
/// group.
///
/// ```
/// assert_eq!(lens_names::BASE_PRESETS[0], ("default", 0b111));
/// ```
pub const BASE_PRESETS: [(&str, u64); 3] =
    [("default", 0b0000_0111), ("per_step", 0xff), ("all", 0xff)];

/// The text that replaces a redacted string value.
///
/// ```
/// assert_eq!(lens_names::REDACTED, "[REDACTED]");
/// ```
pub const REDACTED: &str = "[REDACTED]";

/// Sensitive words: a key matches when the whole key or any of its
/// dot-separated segments equals one of these (ASCII case-insensitive).
///
/// ```
/// assert!(lens_names::REDACTED_KEYS.contains(&"prompt"));
/// ```
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
///
/// ```
/// assert!(lens_names::REDACTED_KEY_SUFFIXES.contains(&"_key"));
/// ```
pub const REDACTED_KEY_SUFFIXES: &[&str] = &["_key", "_token", "_secret", "_password"];

/// GenAI content key prefixes (ASCII case-insensitive): `gen_ai.prompt`,
/// `gen_ai.prompt.0.content`, `gen_ai.completion.0.content` all match.
///
/// ```
/// assert!(lens_names::is_redacted_key("gen_ai.completion.0.content"));
/// ```
pub const REDACTED_GEN_AI_PREFIXES: &[&str] = &["gen_ai.prompt", "gen_ai.completion"];

/// GenAI content keys matched whole (ASCII case-insensitive).
///
/// ```
/// assert!(lens_names::is_redacted_key("gen_ai.input.messages"));
/// ```
pub const REDACTED_GEN_AI_KEYS: &[&str] = &[
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
];

/// Keys that would match the segment rule but are well-known, non-sensitive
/// semantic-convention attributes whose value is an enumeration (redacting
/// them would merge metric series): `gen_ai.token.type` (`input` / `output`).
///
/// ```
/// assert!(!lens_names::is_redacted_key("gen_ai.token.type"));
/// ```
pub const NOT_REDACTED_KEYS: &[&str] = &["gen_ai.token.type"];

/// Whether string values under `key` are redacted by the default rule. A key
/// matches when (all comparisons ASCII case-insensitive) the whole key or any
/// dot-separated segment equals one of [`REDACTED_KEYS`], any segment ends in
/// one of [`REDACTED_KEY_SUFFIXES`], or it starts with one of
/// [`REDACTED_GEN_AI_PREFIXES`] or equals one of [`REDACTED_GEN_AI_KEYS`];
/// and it is not one of [`NOT_REDACTED_KEYS`]. Never allocates.
///
/// ```
/// assert!(lens_names::is_redacted_key("HF_TOKEN"));
/// assert!(!lens_names::is_redacted_key("prompt_tokens"));
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

fn eq_any(s: &str, list: &[&str]) -> bool {
    list.iter().any(|w| w.eq_ignore_ascii_case(s))
}

fn starts_with_ignore_case(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len() && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

fn ends_with_ignore_case(s: &str, suffix: &str) -> bool {
    s.len() >= suffix.len()
        && s.as_bytes()[s.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
}
