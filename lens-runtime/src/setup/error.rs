//! Why setup failed.

use crate::config::strategy::StrategyError;
use crate::config::ConfigError;
use std::fmt;

/// Why setup failed. Nothing was installed.
///
/// `{e}` (Display) is one line; [`source`](std::error::Error::source)
/// gives the underlying error where there is one (the I/O error of a file
/// that cannot be opened, the OTLP exporter's build error). `{e:?}`
/// (Debug) is the whole chain on one line, so a failed setup returned from
/// `fn main() -> Result<(), Box<dyn std::error::Error>>` prints as a
/// sentence: `Error: invalid value "zipkin" for NEMO_LENS_EXPORTER;
/// expected one of: …`.
///
/// ```
/// use lens::{ExporterKind, LensConfig, SetupError};
/// let mut cfg = LensConfig::default();
/// cfg.enabled = true;
/// cfg.exporter = ExporterKind::File;
/// cfg.file_path = Some("/proc/no/such/dir/run.jsonl".into());
/// match lens::setup_telemetry(cfg, 0, 1) {
///     Err(e @ SetupError::Exporter { .. }) => {
///         assert!(e.to_string().starts_with("cannot start telemetry export: cannot open"));
///         // the operating system's error is the source, not repeated
///         let io = std::error::Error::source(&e).unwrap();
///         assert!(!e.to_string().contains(&io.to_string()));
///         assert_eq!(format!("{e:?}"), format!("{e}: {io}"));
///     }
///     other => panic!("{other:?}"),
/// }
/// ```
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// A configuration value (field or environment variable) is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The export strategy is unknown.
    #[error(transparent)]
    Strategy(#[from] StrategyError),
    /// An enabled setup already exists in this process.
    #[error(
        "telemetry is already set up in this process; shut the first handle down, or call \
         `TelemetryBuilder::allow_reinit(true)` (meant for tests) to replace it"
    )]
    AlreadyInitialized,
    /// An exporter could not be built (e.g. the output file cannot be
    /// opened, or this build lacks the feature an exporter needs).
    #[error("cannot start telemetry export: {what}")]
    Exporter {
        /// What could not be started, and where its setting came from.
        what: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
}

/// The whole chain on one line (see the type's docs).
impl fmt::Debug for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::config::error::write_chain(self, f)
    }
}

impl SetupError {
    /// An exporter error without an underlying error.
    pub(crate) fn exporter(what: impl Into<String>) -> Self {
        SetupError::Exporter {
            what: what.into(),
            source: None,
        }
    }
}
