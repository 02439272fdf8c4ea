//! What the log bridge forwards: the level, the targets, and errors in
//! the options.

use crate::api::targets::{is_internal, target_matches};
use std::fmt;
use std::str::FromStr;

/// The minimum severity a record needs to be bridged.
///
/// Ordered from the most verbose (`Trace`) to the most severe (`Error`);
/// parses case-insensitively from `trace`, `debug`, `info`, `warn` (or
/// `warning`) and `error`.
///
/// ```
/// use lens::logs::Level;
/// let level: Level = "WARN".parse().unwrap();
/// assert_eq!(level, Level::Warn);
/// assert!(Level::Error > Level::Info);
/// assert!("loud".parse::<Level>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Level {
    /// Everything, including `trace!`.
    Trace = 1,
    /// `debug!` and above.
    Debug = 2,
    /// `info!` and above (the default).
    #[default]
    Info = 3,
    /// `warn!` and `error!`.
    Warn = 4,
    /// Only `error!`.
    Error = 5,
}

impl Level {
    /// The name in lower case.
    ///
    /// ```
    /// assert_eq!(lens::logs::Level::Warn.as_str(), "warn");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }

    pub(super) fn from_log(level: log::Level) -> Level {
        match level {
            log::Level::Trace => Level::Trace,
            log::Level::Debug => Level::Debug,
            log::Level::Info => Level::Info,
            log::Level::Warn => Level::Warn,
            log::Level::Error => Level::Error,
        }
    }

    pub(super) fn from_tracing(level: &tracing::Level) -> Level {
        match *level {
            tracing::Level::TRACE => Level::Trace,
            tracing::Level::DEBUG => Level::Debug,
            tracing::Level::INFO => Level::Info,
            tracing::Level::WARN => Level::Warn,
            _ => Level::Error,
        }
    }

    pub(super) fn to_log_filter(self) -> log::LevelFilter {
        match self {
            Level::Trace => log::LevelFilter::Trace,
            Level::Debug => log::LevelFilter::Debug,
            Level::Info => log::LevelFilter::Info,
            Level::Warn => log::LevelFilter::Warn,
            Level::Error => log::LevelFilter::Error,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Level {
    type Err = LogBridgeError;

    fn from_str(s: &str) -> Result<Level, LogBridgeError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "trace" => Ok(Level::Trace),
            "debug" => Ok(Level::Debug),
            "info" => Ok(Level::Info),
            "warn" | "warning" => Ok(Level::Warn),
            "error" => Ok(Level::Error),
            _ => Err(LogBridgeError::InvalidLevel(s.to_owned())),
        }
    }
}

/// What [`setup_logging_bridge`](crate::setup::setup_logging_bridge) should bridge.
///
/// By default: records at [`Level::Info`] and above, from every target
/// (except the OpenTelemetry crates and the exporter's network stack), from
/// both `log` and `tracing`; the `log` logger is installed, no global
/// `tracing` subscriber is.
///
/// ```
/// use lens::{logs::Level, logs::LogBridgeOptions};
/// let options = LogBridgeOptions::new()
///     .with_level(Level::Debug)
///     .with_target("trainer")            // trainer, trainer::loop, ...
///     .with_target("data_loader")
///     .with_global_tracing_subscriber(true);
/// assert_eq!(options.level(), Level::Debug);
/// assert_eq!(options.targets(), ["trainer", "data_loader"]);
/// ```
#[derive(Debug, Clone)]
pub struct LogBridgeOptions {
    pub(super) level: Level,
    pub(super) targets: Vec<String>,
    pub(super) log: bool,
    pub(super) tracing: bool,
    pub(super) global_tracing_subscriber: bool,
}

impl Default for LogBridgeOptions {
    fn default() -> Self {
        LogBridgeOptions {
            level: Level::Info,
            targets: Vec::new(),
            log: true,
            tracing: true,
            global_tracing_subscriber: false,
        }
    }
}

impl LogBridgeOptions {
    /// The defaults: [`Level::Info`], every target, `log` and `tracing`.
    ///
    /// ```
    /// let options = lens::logs::LogBridgeOptions::new();
    /// assert!(options.targets().is_empty());
    /// ```
    pub fn new() -> Self {
        LogBridgeOptions::default()
    }

    /// Bridges records at `level` and above.
    ///
    /// ```
    /// use lens::{logs::Level, logs::LogBridgeOptions};
    /// let options = LogBridgeOptions::new().with_level(Level::Warn);
    /// assert_eq!(options.level(), Level::Warn);
    /// ```
    pub fn with_level(mut self, level: Level) -> Self {
        self.level = level;
        self
    }

    /// Adds a target prefix: a record is bridged when its target is `target`
    /// or lies below it as a module path (`trainer` takes `trainer` and
    /// `trainer::loop`, not `trainers`; a prefix ending in `::` takes only
    /// what lies below). With no target every target is bridged.
    ///
    /// ```
    /// let options = lens::logs::LogBridgeOptions::new().with_target("trainer");
    /// assert!(options.accepts("trainer::loop"));
    /// assert!(!options.accepts("trainers"));
    /// assert!(!options.accepts("tokio::runtime"));
    /// ```
    pub fn with_target(mut self, target: impl Into<String>) -> Self {
        self.targets.push(target.into());
        self
    }

    /// Adds several target prefixes (see [`with_target`](Self::with_target)).
    ///
    /// ```
    /// let options = lens::logs::LogBridgeOptions::new().with_targets(["a", "b::c"]);
    /// assert_eq!(options.targets(), ["a", "b::c"]);
    /// ```
    pub fn with_targets<I, T>(mut self, targets: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.targets.extend(targets.into_iter().map(Into::into));
        self
    }

    /// Whether records of the `log` crate are bridged (default `true`); the
    /// first bridge that wants them installs `LogBridgeLogger` as the
    /// process's `log` logger.
    ///
    /// ```
    /// let options = lens::logs::LogBridgeOptions::new().with_log(false);
    /// # drop(options);
    /// ```
    pub fn with_log(mut self, on: bool) -> Self {
        self.log = on;
        self
    }

    /// Whether `tracing` events reaching a `LogBridgeLayer` are bridged
    /// (default `true`).
    ///
    /// ```
    /// let options = lens::logs::LogBridgeOptions::new().with_tracing(false);
    /// # drop(options);
    /// ```
    pub fn with_tracing(mut self, on: bool) -> Self {
        self.tracing = on;
        self
    }

    /// Also installs a global `tracing` subscriber holding only a
    /// `LogBridgeLayer` (default `false`: add the layer to your own
    /// subscriber instead). Only possible when no global subscriber is set.
    ///
    /// ```
    /// let options =
    ///     lens::logs::LogBridgeOptions::new().with_global_tracing_subscriber(true);
    /// # drop(options);
    /// ```
    pub fn with_global_tracing_subscriber(mut self, on: bool) -> Self {
        self.global_tracing_subscriber = on;
        self
    }

    /// The minimum level.
    ///
    /// ```
    /// use lens::{logs::Level, logs::LogBridgeOptions};
    /// assert_eq!(LogBridgeOptions::new().level(), Level::Info);
    /// ```
    pub fn level(&self) -> Level {
        self.level
    }

    /// The target prefixes (empty: every target).
    ///
    /// ```
    /// assert!(lens::logs::LogBridgeOptions::new().targets().is_empty());
    /// ```
    pub fn targets(&self) -> &[String] {
        &self.targets
    }

    /// Whether a record with this target passes the target filter (the
    /// level filter aside).
    ///
    /// ```
    /// let all = lens::logs::LogBridgeOptions::new();
    /// assert!(all.accepts("my_app"));
    /// assert!(!all.accepts("opentelemetry_sdk"), "never the SDK's own logs");
    /// ```
    pub fn accepts(&self, target: &str) -> bool {
        target_accepted(&self.targets, target)
    }

    pub(super) fn validate(&self) -> Result<(), LogBridgeError> {
        for t in &self.targets {
            let bare = t.trim_end_matches(':');
            if t.trim().is_empty() || t.chars().any(char::is_whitespace) || bare.is_empty() {
                return Err(LogBridgeError::InvalidTarget(t.clone()));
            }
        }
        Ok(())
    }
}

/// Whether `target` is `prefix` or below it as a module path.
pub(super) fn target_accepted(prefixes: &[String], target: &str) -> bool {
    if is_internal(target) {
        return false;
    }
    prefixes.is_empty() || prefixes.iter().any(|p| target_matches(p, target))
}

/// An invalid [`LogBridgeOptions`] value or [`Level`] name.
///
/// ```
/// use lens::{logs::LogBridgeError, logs::LogBridgeOptions};
/// # let handle = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
/// let err = lens::logs::setup_logging_bridge(
///     &handle,
///     LogBridgeOptions::new().with_target(""),
/// )
/// .unwrap_err();
/// assert_eq!(err, LogBridgeError::InvalidTarget(String::new()));
/// ```
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LogBridgeError {
    /// A target prefix that is empty or contains whitespace.
    #[error(
        "invalid log bridge target {0:?}: expected a module path such as \"trainer\" or \"trainer::data\""
    )]
    InvalidTarget(String),
    /// A level name other than trace, debug, info, warn(ing), error.
    #[error("invalid log level {0:?}: expected one of trace, debug, info, warn, error")]
    InvalidLevel(String),
}

/// The whole chain on one line: what `main` prints when it returns this
/// error.
impl fmt::Debug for LogBridgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
