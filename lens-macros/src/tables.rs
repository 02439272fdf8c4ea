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

/// Keys whose string values are redacted (same rule as the runtime).
const REDACTED_KEYS: &[&str] = &[
    "prompt",
    "input_text",
    "output_text",
    "text",
    "password",
    "token",
    "secret",
    "key",
];

pub(crate) fn is_redacted_key(key: &str) -> bool {
    let last = key.rsplit('.').next().unwrap_or(key);
    REDACTED_KEYS.iter().any(|k| k.eq_ignore_ascii_case(last))
}

pub(crate) fn base_group_list() -> String {
    BASE_GROUPS.join(", ")
}
