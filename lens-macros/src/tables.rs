//! Names the macros check at compile time. `lens` has a test that these agree
//! with the runtime's base family and redaction list.

/// The base family's groups, in bit order.
pub(crate) const BASE_GROUPS: &[&str] = &[
    "job",
    "checkpoint",
    "evaluate",
    "model_init",
    "load_checkpoint",
    "step",
    "forward_backward",
    "optimizer",
];

/// The base family's presets and their masks over word 0.
pub(crate) const BASE_PRESETS: &[(&str, u64)] =
    &[("default", 0b0000_0111), ("per_step", 0xff), ("all", 0xff)];

// The redaction rule for literal keys, decided at compile time. A copy of
// `lens_runtime::attr::is_redacted_key` and its lists: the runtime's unit
// tests compile this file and check that both agree on every listed key and
// on a table of matches and near-misses.

/// Sensitive words (whole key or any dot-separated segment).
pub(crate) const REDACTED_KEYS: &[&str] = &[
    "prompt",
    "input_text",
    "output_text",
    "text",
    "password",
    "token",
    "secret",
    "key",
];

/// Sensitive segment endings.
pub(crate) const REDACTED_KEY_SUFFIXES: &[&str] = &["_key", "_token", "_secret", "_password"];

/// GenAI content key prefixes.
pub(crate) const REDACTED_GEN_AI_PREFIXES: &[&str] = &["gen_ai.prompt", "gen_ai.completion"];

/// GenAI content keys matched whole.
pub(crate) const REDACTED_GEN_AI_KEYS: &[&str] = &[
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
];

/// Well-known enumeration keys the segment rule would otherwise catch.
pub(crate) const NOT_REDACTED_KEYS: &[&str] = &["gen_ai.token.type"];

/// Whether string values under the literal `key` are redacted (ASCII
/// case-insensitive; same rule as the runtime).
pub(crate) fn is_redacted_key(key: &str) -> bool {
    if eq_any(key, NOT_REDACTED_KEYS) {
        return false;
    }
    eq_any(key, REDACTED_KEYS)
        || eq_any(key, REDACTED_GEN_AI_KEYS)
        || REDACTED_GEN_AI_PREFIXES.iter().any(|p| {
            key.len() >= p.len() && key.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes())
        })
        || key.split('.').any(|seg| {
            eq_any(seg, REDACTED_KEYS)
                || REDACTED_KEY_SUFFIXES.iter().any(|x| {
                    seg.len() >= x.len()
                        && seg.as_bytes()[seg.len() - x.len()..].eq_ignore_ascii_case(x.as_bytes())
                })
        })
}

fn eq_any(s: &str, list: &[&str]) -> bool {
    list.iter().any(|w| w.eq_ignore_ascii_case(s))
}

pub(crate) fn base_group_list() -> String {
    BASE_GROUPS.join(", ")
}
