//! The log bridge of a handle: `log` and `tracing` records to the handle's
//! logger provider.

use super::handle::TelemetryHandle;
use crate::sdk::logs::{self, LogBridge, LogBridgeError, LogBridgeOptions};

/// Sends `log` records and `tracing` events to the logger provider of
/// `handle`, with the trace and span ids of the current OpenTelemetry
/// context (a lens span, or a `tracing-opentelemetry` span).
///
/// Only when logs are enabled (`NEMO_LENS_LOGS_ENABLED=1`) on a rank that
/// exports: otherwise nothing is installed and the bridge, if an earlier
/// call set one up, stops bridging. Each call replaces the configuration of
/// the previous one (level, targets, provider), so calling it twice never
/// duplicates a record. The `log` logger is installed on the first call that
/// wants it (see `InstallStatus` when another logger holds the slot); for
/// `tracing`, add `LogBridge::layer` to your subscriber or ask for a global
/// one with `LogBridgeOptions::with_global_tracing_subscriber`.
///
/// Records are exported with the handle's log exporter (OTLP with
/// `OTEL_EXPORTER_OTLP_LOGS_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`, the
/// file or the console exporter) and flushed by `TelemetryHandle::shutdown`.
///
/// ```no_run
/// use lens::{logs::log, logs::Level, logs::LogBridgeOptions, tracing::tracing};
/// use lens::logs::setup_logging_bridge;
/// let mut config = lens::LensConfig::from_env()?;
/// config.logs_enabled = true;
/// let telemetry = lens::setup_telemetry(config, 0, 1)?;
/// let bridge = setup_logging_bridge(
///     &telemetry,
///     LogBridgeOptions::new()
///         .with_level(Level::Info)
///         .with_target("trainer")
///         .with_global_tracing_subscriber(true),
/// )?;
/// assert!(bridge.is_active());
/// log::info!(target: "trainer::loop", "loss={}", 0.25);    // bridged
/// tracing::warn!(target: "trainer::ckpt", step = 10, "slow"); // bridged
/// log::debug!(target: "trainer::loop", "too verbose");      // below the level
/// log::info!(target: "tokio", "not ours");                  // not a bridged target
/// telemetry.shutdown(std::time::Duration::from_secs(10));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn setup_logging_bridge(
    handle: &TelemetryHandle,
    options: LogBridgeOptions,
) -> Result<LogBridge, LogBridgeError> {
    match handle.logger_provider() {
        Some(provider) => logs::setup_logging_bridge_with_provider(&provider, options),
        None => logs::disabled_bridge(&options),
    }
}
