//! The one reader of the process environment: every `NEMO_LENS_*`,
//! `OTEL_*` and launcher variable lens reads goes through [`raw`] (the
//! value as set, non-UTF-8 bytes replaced) or [`var`] (blank means unset).
//! The bottom layer: it uses nothing of lens.

/// The one reader of the process environment: a variable's value, `None`
/// when unset or blank (non-UTF-8 bytes are replaced).
pub(crate) fn var(name: &str) -> Option<String> {
    std::env::var_os(name)
        .map(|v| v.to_string_lossy().into_owned())
        .filter(|v| !v.trim().is_empty())
}

/// The value of `name` as set (an empty value is `Some("")`: for
/// `CUDA_VISIBLE_DEVICES`, empty means no device), non-UTF-8 bytes
/// replaced.
pub(crate) fn raw(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}
