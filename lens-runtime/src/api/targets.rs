//! `log` and `tracing` targets as module paths, and the targets lens never
//! bridges by default: one list for the log bridge and the `tracing` bridge.

/// The network and TLS stack the OTLP exporters run on. Their records and
/// spans, made while exporting, would need exporting in turn, so neither
/// bridge takes them by default (the `tracing` bridge still routes one that
/// has an explicit entry; the OpenTelemetry crates' own, `opentelemetry*`,
/// are never taken).
pub(crate) const INTERNAL_TARGETS: &[&str] = &[
    "hyper",
    "hyper_util",
    "hyper_rustls",
    "h2",
    "tonic",
    "tower",
    "tower_http",
    "reqwest",
    "rustls",
    "tokio_rustls",
];

/// Whether `target` is `prefix` or below it as a module path
/// (`candle_transformers` covers `candle_transformers::models::llama`, not
/// `candle_transformers_x`).
pub(crate) fn target_matches(prefix: &str, target: &str) -> bool {
    match target.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || prefix.ends_with("::") || rest.starts_with("::"),
        None => false,
    }
}

/// Whether `target` belongs to OpenTelemetry or the export stack (the log
/// bridge's rule; the `tracing` bridge lets explicit routes come first).
#[cfg_attr(not(feature = "logs"), allow(dead_code))]
pub(crate) fn is_internal(target: &str) -> bool {
    target.starts_with("opentelemetry")
        || INTERNAL_TARGETS.iter().any(|p| target_matches(p, target))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_paths_and_the_export_stack() {
        assert!(target_matches("candle", "candle"));
        assert!(target_matches("candle", "candle::nn"));
        assert!(!target_matches("candle", "candle_nn"));
        assert!(target_matches("candle::", "candle::nn"));
        assert!(!target_matches("candle::nn", "candle"));
        for t in [
            "opentelemetry_sdk::trace",
            "hyper_util::client",
            "rustls::client::hs",
            "h2",
        ] {
            assert!(is_internal(t), "{t}");
        }
        for t in ["hyperparameters", "trainer::loop", "rustlings"] {
            assert!(!is_internal(t), "{t}");
        }
    }
}
