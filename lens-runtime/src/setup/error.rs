//! Why setup failed.

use crate::config::strategy::StrategyError;
use crate::config::ConfigError;
use std::fmt;

/// Why setup failed. Nothing was installed.
///
/// ```
/// use lens::{ExporterKind, LensConfig, SetupError};
/// let mut cfg = LensConfig::default();
/// cfg.enabled = true;
/// cfg.exporter = ExporterKind::File;
/// cfg.file_path = Some("/proc/no/such/dir/run.jsonl".into());
/// match lens::setup_telemetry(cfg, 0, 1) {
///     Err(e @ SetupError::Exporter(_)) => assert!(e.to_string().contains("cannot start")),
///     other => panic!("{other:?}"),
/// }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum SetupError {
    /// A configuration value (field or environment variable) is invalid.
    Config(ConfigError),
    /// The export strategy is unknown.
    Strategy(StrategyError),
    /// An enabled setup already exists in this process.
    AlreadyInitialized,
    /// An exporter could not be built (e.g. the output file cannot be opened).
    Exporter(String),
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetupError::Config(e) => write!(f, "invalid telemetry configuration: {e}"),
            SetupError::Strategy(e) => write!(f, "invalid telemetry configuration: {e}"),
            SetupError::AlreadyInitialized => f.write_str(
                "telemetry is already set up in this process; shut the first handle down, or call \
                 `TelemetryBuilder::allow_reinit(true)` (meant for tests) to replace it",
            ),
            SetupError::Exporter(e) => write!(f, "cannot start telemetry export: {e}"),
        }
    }
}

impl std::error::Error for SetupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SetupError::Config(e) => Some(e),
            SetupError::Strategy(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ConfigError> for SetupError {
    fn from(e: ConfigError) -> Self {
        SetupError::Config(e)
    }
}
