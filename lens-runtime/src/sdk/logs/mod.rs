//! The log bridge: `log` records and `tracing` events to the OpenTelemetry
//! logger provider, with the active trace and span ids.
//!
//! [`setup_logging_bridge`](crate::setup::setup_logging_bridge) connects the two logging facades of the Rust
//! ecosystem to the logger provider of a [`TelemetryHandle`], which exists
//! only when `logs_enabled` is set on a rank that exports; anywhere else the
//! call installs nothing and bridges nothing.
//!
//! * **`log`**: a process-wide [`LogBridgeLogger`] is installed with
//!   `log::set_logger` on the first call (if no other logger holds the slot;
//!   see [`InstallStatus::Occupied`]).
//! * **`tracing`**: add a [`LogBridgeLayer`] to your own subscriber, or ask
//!   for a global subscriber that holds only the layer
//!   ([`LogBridgeOptions::with_global_tracing_subscriber`]).
//! * **Trace and span ids** come from the current OpenTelemetry `Context`:
//!   inside a lens span (`span_cm!`, `managed_span!`, `#[trace_fn]`) or a
//!   `tracing-opentelemetry` span (which activates its context on enter),
//!   a record carries that span's ids; outside any span it carries none.
//!   Each record also gets its severity, its target (the OTLP scope name),
//!   its fields as attributes and the time it happened.
//! * **Filters**: a minimum [`Level`] and module-path target prefixes
//!   (bridge `trainer` and everything below it, not the world). Records of
//!   the OpenTelemetry crates and of the exporter's network stack are never
//!   bridged, so exporting can never feed itself.
//! * **Idempotent**: the logger and layers read one shared configuration;
//!   every call replaces it, so calling twice never duplicates a record, and
//!   two bridge layers in one subscriber forward each event once.
//!
//! ```
//! use lens::logs::setup_logging_bridge;
//! use lens::{logs::Level, logs::LogBridgeOptions};
//! # let handle = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
//! let bridge = setup_logging_bridge(
//!     &handle,
//!     LogBridgeOptions::new().with_level(Level::Info).with_target("trainer"),
//! )?;
//! // with telemetry disabled (the default configuration) nothing is bridged
//! assert!(!bridge.is_active());
//! log::info!(target: "trainer::loop", "step done");
//! # Ok::<(), lens::logs::LogBridgeError>(())
//! ```

mod facades;
mod options;
mod stamp;
mod state;

#[cfg(feature = "tracing")]
pub(crate) use facades::{
    forward_tracing_event, forwarder_below, tracing_event_taker, ForwardsTracingEvents,
    FORWARDS_TRACING_EVENTS,
};
pub use facades::{LogBridgeLayer, LogBridgeLogger};
pub use options::{Level, LogBridgeError, LogBridgeOptions};
use stamp::StampingProvider;
pub(crate) use state::deactivate;
use state::{Active, ACTIVE, LEVEL_OFF, MIN_LEVEL, SETUP};

use opentelemetry_appender_log::OpenTelemetryLogBridge;
use opentelemetry_appender_tracing::layer::OpenTelemetryTracingBridge;
use opentelemetry_sdk::logs::SdkLoggerProvider;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tracing_subscriber::layer::SubscriberExt as _;

/// The `log` crate lens bridges (0.4), re-exported so that a program can use
/// the same version without its own dependency.
///
/// ```
/// lens::logs::log::info!(target: "trainer", "hello");
/// ```
pub use log;

/// What happened to a process-wide hook (the `log` logger, the global
/// `tracing` subscriber) during [`setup_logging_bridge`](crate::setup::setup_logging_bridge).
///
/// ```
/// use lens::logs::InstallStatus;
/// assert!(InstallStatus::Installed.is_bridging());
/// assert!(InstallStatus::Reused.is_bridging());
/// assert!(!InstallStatus::Occupied.is_bridging());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstallStatus {
    /// This call installed it.
    Installed,
    /// An earlier call installed it; it now follows this call's options.
    Reused,
    /// Not asked for, or the bridge is inactive (logs disabled or this rank
    /// does not export).
    NotRequested,
    /// Another logger / subscriber already holds the process-wide slot, so
    /// the records it receives are not bridged (nothing was changed). Chain a
    /// [`LogBridgeLogger`] into your logger, or add a [`LogBridgeLayer`] to
    /// your subscriber.
    Occupied,
}

impl InstallStatus {
    /// Whether the hook is in place and forwards to this bridge.
    ///
    /// ```
    /// assert!(!lens::logs::InstallStatus::NotRequested.is_bridging());
    /// ```
    pub fn is_bridging(self) -> bool {
        matches!(self, InstallStatus::Installed | InstallStatus::Reused)
    }
}

/// The result of [`setup_logging_bridge`](crate::setup::setup_logging_bridge). Dropping it changes nothing: the
/// bridge stays in place until the next call replaces it.
///
/// ```
/// use lens::{logs::InstallStatus, logs::LogBridgeOptions};
/// use lens::logs::setup_logging_bridge;
/// # let handle = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
/// let bridge = setup_logging_bridge(&handle, LogBridgeOptions::new())?;
/// if bridge.log_status() == InstallStatus::Occupied {
///     eprintln!("another `log` logger is installed; log records are not bridged");
/// }
/// # Ok::<(), lens::logs::LogBridgeError>(())
/// ```
#[derive(Debug, Clone)]
pub struct LogBridge {
    active: bool,
    log: InstallStatus,
    tracing_subscriber: InstallStatus,
}

impl LogBridge {
    /// Whether records are sent to a logger provider (false when logs are
    /// disabled or this rank does not export).
    ///
    /// ```
    /// # let handle = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// let bridge = lens::logs::setup_logging_bridge(&handle, Default::default()).unwrap();
    /// assert!(!bridge.is_active());
    /// ```
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// What happened to the `log` crate's logger.
    ///
    /// ```
    /// use lens::logs::InstallStatus;
    /// # let handle = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// let bridge = lens::logs::setup_logging_bridge(&handle, Default::default()).unwrap();
    /// assert_eq!(bridge.log_status(), InstallStatus::NotRequested); // inactive bridge
    /// ```
    pub fn log_status(&self) -> InstallStatus {
        self.log
    }

    /// What happened to the global `tracing` subscriber.
    ///
    /// ```
    /// use lens::logs::InstallStatus;
    /// # let handle = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// let bridge = lens::logs::setup_logging_bridge(&handle, Default::default()).unwrap();
    /// assert_eq!(bridge.tracing_subscriber_status(), InstallStatus::NotRequested);
    /// ```
    pub fn tracing_subscriber_status(&self) -> InstallStatus {
        self.tracing_subscriber
    }

    /// A layer for your own `tracing` subscriber (the same as
    /// [`LogBridgeLayer::new`]).
    ///
    /// ```
    /// use lens::tracing::tracing_subscriber::layer::SubscriberExt as _;
    /// # let handle = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// let bridge = lens::logs::setup_logging_bridge(&handle, Default::default()).unwrap();
    /// let subscriber = lens::tracing::tracing_subscriber::registry().with(bridge.layer());
    /// # drop(subscriber);
    /// ```
    pub fn layer(&self) -> LogBridgeLayer {
        LogBridgeLayer::new()
    }
}

static LOG_INSTALLED: AtomicBool = AtomicBool::new(false);
static TRACING_INSTALLED: AtomicBool = AtomicBool::new(false);
static LOGGER: LogBridgeLogger = LogBridgeLogger;

/// [`setup_logging_bridge`](crate::setup::setup_logging_bridge) for a logger provider of your own (a custom
/// exporter, an in-memory exporter in tests). Same rules: each call
/// replaces the previous configuration.
///
/// ```
/// use lens::{logs::setup_logging_bridge_with_provider, logs::LogBridgeOptions};
/// use lens::{otel_sdk::logs::InMemoryLogExporter, otel_sdk::logs::SdkLoggerProvider};
/// let exporter = InMemoryLogExporter::default();
/// let provider = SdkLoggerProvider::builder()
///     .with_simple_exporter(exporter.clone())
///     .build();
/// let bridge = setup_logging_bridge_with_provider(
///     &provider,
///     LogBridgeOptions::new().with_target("trainer"),
/// )?;
/// assert!(bridge.log_status().is_bridging());
/// lens::logs::log::info!(target: "trainer", "kept");
/// lens::logs::log::info!(target: "elsewhere", "dropped");
/// let logs = exporter.get_emitted_logs().unwrap();
/// assert_eq!(logs.len(), 1);
/// # Ok::<(), lens::logs::LogBridgeError>(())
/// ```
pub fn setup_logging_bridge_with_provider(
    provider: &SdkLoggerProvider,
    options: LogBridgeOptions,
) -> Result<LogBridge, LogBridgeError> {
    options.validate()?;
    install(provider, &options)
}

fn install(
    provider: &SdkLoggerProvider,
    options: &LogBridgeOptions,
) -> Result<LogBridge, LogBridgeError> {
    let _setup = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    let active = Arc::new(Active {
        targets: options.targets.clone().into_boxed_slice(),
        log_on: options.log,
        tracing_on: options.tracing,
        log: OpenTelemetryLogBridge::new(&StampingProvider(provider.clone())),
        tracing: OpenTelemetryTracingBridge::new(&StampingProvider(provider.clone())),
    });
    *ACTIVE.write().unwrap_or_else(|e| e.into_inner()) = Some(active);
    MIN_LEVEL.store(options.level as u8, Ordering::Relaxed);

    let log = if options.log {
        if LOG_INSTALLED.load(Ordering::Acquire) {
            InstallStatus::Reused
        } else if log::set_logger(&LOGGER).is_ok() {
            LOG_INSTALLED.store(true, Ordering::Release);
            InstallStatus::Installed
        } else {
            InstallStatus::Occupied
        }
    } else {
        InstallStatus::NotRequested
    };
    if LOG_INSTALLED.load(Ordering::Acquire) {
        log::set_max_level(if options.log {
            options.level.to_log_filter()
        } else {
            log::LevelFilter::Off
        });
    }

    let tracing_subscriber = if options.global_tracing_subscriber {
        if TRACING_INSTALLED.load(Ordering::Acquire) {
            InstallStatus::Reused
        } else {
            let subscriber = tracing_subscriber::registry().with(LogBridgeLayer::new());
            if tracing::subscriber::set_global_default(subscriber).is_ok() {
                TRACING_INSTALLED.store(true, Ordering::Release);
                InstallStatus::Installed
            } else {
                InstallStatus::Occupied
            }
        }
    } else {
        InstallStatus::NotRequested
    };
    Ok(LogBridge {
        active: true,
        log,
        tracing_subscriber,
    })
}

/// The bridge of a handle that has no logger provider (logs disabled, or a
/// rank that does not export): whatever an earlier call configured is
/// switched off, and nothing is bridged.
pub(crate) fn disabled_bridge(options: &LogBridgeOptions) -> Result<LogBridge, LogBridgeError> {
    options.validate()?;
    let _setup = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    MIN_LEVEL.store(LEVEL_OFF, Ordering::Relaxed);
    *ACTIVE.write().unwrap_or_else(|e| e.into_inner()) = None;
    if LOG_INSTALLED.load(Ordering::Acquire) {
        log::set_max_level(log::LevelFilter::Off);
    }
    Ok(LogBridge {
        active: false,
        log: InstallStatus::NotRequested,
        tracing_subscriber: InstallStatus::NotRequested,
    })
}

#[cfg(test)]
mod tests {
    use super::options::target_accepted;
    use super::*;
    use crate::api::targets::target_matches;

    #[test]
    fn module_path_targets() {
        let t = |p: &str, t: &str| target_matches(p, t);
        assert!(t("trainer", "trainer"));
        assert!(t("trainer", "trainer::loop"));
        assert!(t("trainer", "trainer::loop::inner"));
        assert!(!t("trainer", "trainers"));
        assert!(!t("trainer", "trainer_x"));
        assert!(!t("trainer", "my::trainer"));
        assert!(t("trainer::", "trainer::loop"));
        assert!(t("trainer::loop", "trainer::loop"));
        assert!(!t("trainer::loop", "trainer"));
    }

    #[test]
    fn internal_targets_are_never_bridged() {
        let all: Vec<String> = Vec::new();
        for t in [
            "opentelemetry",
            "opentelemetry_sdk",
            "opentelemetry-otlp",
            "opentelemetry_sdk::logs",
            "hyper::proto",
            "hyper_util::client",
            "h2::codec",
            "tonic::transport",
            "tower::buffer",
            "reqwest::connect",
        ] {
            assert!(!target_accepted(&all, t), "{t}");
            assert!(!target_accepted(&[t.to_owned()], t), "{t} even when named");
        }
        for t in ["h2o", "hyperparams", "towers::x", "my_app", "tonics"] {
            assert!(target_accepted(&all, t), "{t}");
        }
    }

    #[test]
    fn levels_order_and_parse() {
        assert!(Level::Trace < Level::Debug && Level::Warn < Level::Error);
        for l in [
            Level::Trace,
            Level::Debug,
            Level::Info,
            Level::Warn,
            Level::Error,
        ] {
            assert_eq!(l.as_str().parse::<Level>().unwrap(), l);
            assert_eq!(l.to_string().to_uppercase().parse::<Level>().unwrap(), l);
            assert_eq!(Level::from_log(l.to_log_filter().to_level().unwrap()), l);
        }
        assert_eq!(" warning ".parse::<Level>().unwrap(), Level::Warn);
        let e = "verbose".parse::<Level>().unwrap_err();
        assert!(e.to_string().contains("verbose"), "{e}");
        assert_eq!(Level::from_tracing(&tracing::Level::ERROR), Level::Error);
        assert_eq!(Level::from_tracing(&tracing::Level::TRACE), Level::Trace);
    }

    #[test]
    fn targets_are_validated() {
        for bad in ["", "  ", "::", "trainer loop"] {
            let e = LogBridgeOptions::new()
                .with_target(bad)
                .validate()
                .unwrap_err();
            assert_eq!(e, LogBridgeError::InvalidTarget(bad.to_owned()));
            assert!(e.to_string().contains("module path"));
        }
        LogBridgeOptions::new()
            .with_targets(["trainer", "trainer::", "a::b"])
            .validate()
            .unwrap();
    }
}
