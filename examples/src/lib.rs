//! Shared set-up for the examples: every example turns telemetry on, exports
//! from its own process, exports logs too, and writes OTLP JSON lines to a
//! file — unless the
//! environment says otherwise (`NEMO_LENS_*`, or `OTEL_EXPORTER_OTLP_ENDPOINT`
//! to send to a collector).

use lens::{ConfigError, ExporterKind, LensConfig, SpanGroupFamily, TelemetryHandle};

/// The configuration an example runs with: `NEMO_LENS_*` (and `prefixes`
/// first) from the environment, validated against `families`, with the
/// example defaults described in the crate docs and `span_groups` unless set.
///
/// ```
/// let cfg = examples::example_config(&["NEMO_LENS_"], &[], "per_step").unwrap();
/// assert!(cfg.enabled);
/// ```
pub fn example_config(
    prefixes: &[&str],
    families: &[&'static SpanGroupFamily],
    span_groups: &str,
) -> Result<LensConfig, ConfigError> {
    let mut config = LensConfig::from_env_with(prefixes, families)?;
    let set = |key: &str| {
        prefixes
            .iter()
            .chain(["NEMO_LENS_"].iter())
            .any(|p| std::env::var_os(format!("{p}{key}")).is_some())
    };
    if !set("ENABLED") {
        config.enabled = true;
    }
    if !set("EXPORTER") {
        let otlp = [
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
        config.exporter = if otlp {
            ExporterKind::Otlp
        } else {
            ExporterKind::File
        };
    }
    if !set("SPAN_GROUPS") {
        config.span_groups = span_groups.into();
    }
    if !set("LOGS_ENABLED") {
        config.logs_enabled = true;
    }
    if !set("EXPORT_STRATEGY") {
        config.export_strategy = "all_ranks".into();
    }
    config.validate()?;
    Ok(config)
}

/// Names of the spans in an OTLP JSON lines file.
///
/// ```
/// assert!(examples::span_names_in_file(std::path::Path::new("/nonexistent")).is_empty());
/// ```
pub fn span_names_in_file(path: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out = Vec::new();
    for req in text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    {
        for rs in req["resourceSpans"].as_array().into_iter().flatten() {
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                for s in ss["spans"].as_array().into_iter().flatten() {
                    out.push(s["name"].as_str().unwrap_or("?").to_owned());
                }
            }
        }
    }
    out
}

/// Prints where the telemetry of a finished (shut down) handle went.
///
/// ```
/// let h = lens::setup_telemetry(lens::LensConfig::default(), 0, 1).unwrap();
/// examples::report(&h, &lens::LensConfig::default());
/// ```
pub fn report(telemetry: &TelemetryHandle, config: &LensConfig) {
    match telemetry.file_path() {
        Some(path) => {
            let spans = span_names_in_file(path);
            println!(
                "telemetry went to {} ({} spans): {}",
                path.display(),
                spans.len(),
                spans.join(", ")
            );
            // the last line: how to look at what was written
            println!(
                "look at it: cargo run --release -p nemo-lens-cli -- report {p}    (or: report --html run.html {p})",
                p = path.display()
            );
        }
        None => println!(
            "telemetry went to the {} exporter (exporting: {})",
            config.exporter,
            telemetry.is_exporting()
        ),
    }
}
