//! The handle a setup returns: flush, shutdown (also on drop), and the
//! process-wide state a pipeline owns while it is live.

use super::signal;
use crate::api::groups::{set_enabled_span_groups, SpanGroupSet};
use crate::api::span::{self, open};
use crate::config::otel::DEFAULT_FLUSH_TIMEOUT;
use crate::sdk::export::SpanCounters;
use crate::sdk::pipeline::Pipeline;
use opentelemetry_sdk::logs::SdkLoggerProvider;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Time `Drop` gives the shutdown.
pub(crate) const DROP_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
/// The reason recorded on spans ended by shutdown.
pub(crate) const TRUNCATED_REASON: &str = "still open at telemetry shutdown";

/// Handles of enabled setups that are still live (the double-init guard).
pub(super) static LIVE_HANDLES: AtomicUsize = AtomicUsize::new(0);
/// The generation whose pipeline owns the process-wide state (span groups,
/// tracer slot, global providers, open-span tracking); 0 when none.
static LIVE_GENERATION: AtomicU64 = AtomicU64::new(0);
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

/// A fresh generation for a setup that passed the double-init guard.
pub(super) fn next_generation() -> u64 {
    NEXT_GENERATION.fetch_add(1, Ordering::Relaxed)
}

/// Why a shutdown was not clean.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownError {
    /// One message per failed step.
    pub errors: Vec<String>,
}

impl fmt::Display for ShutdownError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "telemetry shutdown: {}", self.errors.join("; "))
    }
}

impl std::error::Error for ShutdownError {}

/// Makes `generation` the owner of the process-wide state; returns the
/// generation it replaces (re-init), if any.
pub(super) fn take_over(generation: u64) -> Option<u64> {
    match LIVE_GENERATION.swap(generation, Ordering::AcqRel) {
        0 => None,
        g => Some(g),
    }
}

/// Releases the process-wide state of a pipeline: span groups off, open
/// spans ended (only when the pipeline is shut down, not replaced), the lens
/// tracer and the global providers reset, the log bridge and the signal
/// hook detached from it.
pub(super) fn teardown_globals(truncate_open_spans: bool) {
    crate::sdk::fork::set_armed(false);
    set_enabled_span_groups(&SpanGroupSet::none());
    if truncate_open_spans {
        open::truncate_all(TRUNCATED_REASON);
    }
    open::set_tracking(false);
    #[cfg(feature = "logs")]
    crate::sdk::logs::deactivate();
    span::clear_tracer_provider();
    opentelemetry::global::set_tracer_provider(
        opentelemetry::trace::noop::NoopTracerProvider::new(),
    );
    opentelemetry::global::set_meter_provider(
        opentelemetry::metrics::noop::NoopMeterProvider::new(),
    );
}

/// The result of setup: owns the providers of an exporting rank. Shutdown is
/// idempotent and also runs on drop, flushing traces, metrics and logs.
///
/// A handle tears down only what its own setup installed: after a re-init
/// (`allow_reinit`), dropping the older handle shuts its own providers down
/// and leaves the newer pipeline's span groups, tracer and open spans alone.
/// No lens lock is held while the SDK or an exporter runs, so every
/// accessor returns at once, also from a metric callback during a flush.
#[must_use = "dropping the handle shuts telemetry down; keep it for the whole job"]
pub struct TelemetryHandle {
    pipeline: Mutex<Option<Arc<Pipeline>>>,
    counters: Option<Arc<SpanCounters>>,
    generation: u64,
    /// The process that made the handle (a forked child has a copy).
    owner_pid: u32,
    enabled: bool,
    exporting: bool,
    file_path: Option<PathBuf>,
    run_id: String,
    pub(super) holds_install: AtomicBool,
}

impl fmt::Debug for TelemetryHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelemetryHandle")
            .field("enabled", &self.enabled)
            .field("exporting", &self.exporting)
            .field("file_path", &self.file_path)
            .field("run_id", &self.run_id)
            .finish()
    }
}

impl TelemetryHandle {
    pub(super) fn exporting(pipeline: Arc<Pipeline>, generation: u64, run_id: String) -> Self {
        TelemetryHandle {
            run_id,
            counters: Some(pipeline.counters.clone()),
            file_path: pipeline.file_path.clone(),
            pipeline: Mutex::new(Some(pipeline)),
            generation,
            owner_pid: std::process::id(),
            enabled: true,
            exporting: true,
            holds_install: AtomicBool::new(true),
        }
    }

    pub(super) fn inactive(enabled: bool, generation: u64, run_id: String) -> Self {
        TelemetryHandle {
            run_id,
            pipeline: Mutex::new(None),
            counters: None,
            generation,
            owner_pid: std::process::id(),
            enabled,
            exporting: false,
            file_path: None,
            holds_install: AtomicBool::new(false),
        }
    }

    /// The run id every rank of this job shares: `NEMO_LENS_RUN_ID`, else
    /// the launcher's job id (SLURM job and step, `TORCHELASTIC_RUN_ID`, the
    /// Open MPI job id, the PMIx namespace), else a random id. It names the
    /// files and is the `nemo.run.id` resource attribute.
    ///
    /// ```
    /// let mut cfg = lens::LensConfig::default();
    /// cfg.run_id = Some("exp-42".into());
    /// let handle = lens::setup_telemetry(cfg, 0, 1).unwrap();
    /// assert_eq!(handle.run_id(), "exp-42");
    /// ```
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Whether this rank exports telemetry.
    ///
    /// ```
    /// let h = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// assert!(!h.is_exporting());
    /// ```
    pub fn is_exporting(&self) -> bool {
        self.exporting
    }

    /// Whether telemetry is enabled in the configuration.
    ///
    /// ```
    /// let h = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// assert!(!h.is_enabled());
    /// ```
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The OTLP JSON lines file, with the `file` exporter.
    ///
    /// ```
    /// let h = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// assert!(h.file_path().is_none());
    /// ```
    pub fn file_path(&self) -> Option<&Path> {
        self.file_path.as_deref()
    }

    /// A tracer of the installed provider (a no-op tracer when not exporting).
    ///
    /// ```
    /// let h = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// use lens::otel::trace::Tracer;
    /// h.tracer().in_span("raw", |_| {});
    /// ```
    pub fn tracer(&self) -> opentelemetry::global::BoxedTracer {
        crate::api::scope::tracer("")
    }

    /// A meter of the installed provider (a no-op meter when not exporting).
    ///
    /// ```
    /// let h = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// h.meter().u64_counter("requests").build().add(1, &[]);
    /// ```
    pub fn meter(&self) -> opentelemetry::metrics::Meter {
        crate::api::scope::meter("")
    }

    /// The logger provider, when logs are enabled on an exporting rank.
    ///
    /// ```
    /// let h = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// assert!(h.logger_provider().is_none());
    /// ```
    pub fn logger_provider(&self) -> Option<SdkLoggerProvider> {
        self.pipeline().and_then(|p| p.logger_provider.clone())
    }

    /// Spans that were lost so far: dropped because the queue was full (or
    /// ended after shutdown), or refused by the exporter. Spans waiting in
    /// the queue are not counted. Never blocks.
    ///
    /// ```
    /// let h = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// assert_eq!(h.dropped_spans(), 0);
    /// ```
    pub fn dropped_spans(&self) -> u64 {
        self.counters.as_ref().map_or(0, |c| {
            c.dropped.load(Ordering::Relaxed) + c.failed.load(Ordering::Relaxed)
        })
    }

    fn pipeline(&self) -> Option<Arc<Pipeline>> {
        self.pipeline
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Exports everything recorded so far, without shutting down; returns
    /// within `DEFAULT_FLUSH_TIMEOUT` (see
    /// [`force_flush_within`](Self::force_flush_within)).
    ///
    /// ```
    /// let h = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// h.force_flush().unwrap();
    /// ```
    pub fn force_flush(&self) -> Result<(), ShutdownError> {
        self.force_flush_within(DEFAULT_FLUSH_TIMEOUT)
    }

    /// Exports everything recorded so far, waiting at most `timeout`; the
    /// error names each signal that did not finish in time.
    ///
    /// ```
    /// let h = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// h.force_flush_within(std::time::Duration::from_secs(2)).unwrap();
    /// ```
    pub fn force_flush_within(&self, timeout: Duration) -> Result<(), ShutdownError> {
        if crate::sdk::fork::in_child() {
            return Ok(());
        }
        let errors = self
            .pipeline()
            .map(|p| p.flush(timeout))
            .unwrap_or_default();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ShutdownError { errors })
        }
    }

    /// Ends spans that are still open (innermost first, marked
    /// `nemo.span.truncated`), flushes and shuts down traces, metrics and
    /// logs, and reports spans that could not be exported. Returns within
    /// `timeout` (plus a few milliseconds): a signal whose exporter has not
    /// finished by then is named in the error and left to finish in the
    /// background. Idempotent. In a forked child it returns at once.
    ///
    /// ```
    /// let h = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// h.shutdown(std::time::Duration::from_secs(1)).unwrap();
    /// h.shutdown(std::time::Duration::from_secs(1)).unwrap(); // idempotent
    /// ```
    pub fn shutdown(&self, timeout: Duration) -> Result<(), ShutdownError> {
        let taken = self
            .pipeline
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if !self.holds_install.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        LIVE_HANDLES.fetch_sub(1, Ordering::AcqRel);
        if std::process::id() != self.owner_pid {
            // a forked child's copy of its parent's handle: the exporter
            // threads do not exist here, nothing to flush, and waiting for
            // them would stall
            std::mem::forget(taken);
            let _ = LIVE_GENERATION.compare_exchange(
                self.generation,
                0,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
            let dropped = crate::sdk::fork::dropped_in_child();
            if dropped == 0 {
                return Ok(());
            }
            let e = format!(
                "{dropped} spans recorded in this forked child were dropped (lens is inert in a child forked while a pipeline is live; set lens up again in the child to record there)"
            );
            crate::diag::warn(format_args!("shutdown: {e}"));
            return Err(ShutdownError { errors: vec![e] });
        }
        let live = LIVE_GENERATION
            .compare_exchange(self.generation, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if live {
            // the signal hook keeps flushing this pipeline until its
            // shutdown is over (a SIGTERM now waits for it, within its
            // deadline, before the process dies)
            teardown_globals(taken.is_some());
        }
        let Some(pipeline) = taken else {
            if live {
                signal::clear_live(self.generation);
            }
            return Ok(());
        };
        let mut errors = pipeline.shutdown(timeout);
        if live {
            signal::clear_live(self.generation);
        }
        let c = &pipeline.counters;
        let ended = c.ended.load(Ordering::Relaxed);
        // a batch whose export ends after a shutdown gave up on it is
        // counted twice (lost when given up, then by its outcome)
        let lost =
            (c.dropped.load(Ordering::Relaxed) + c.failed.load(Ordering::Relaxed)).min(ended);
        let unwritten = pipeline.sink.as_ref().map_or(0, |s| s.dropped_records())
            + pipeline
                .perfetto
                .as_ref()
                .map_or(0, |p| p.dropped_records());
        if unwritten > 0 {
            errors.push(format!(
                "{unwritten} records could not be written to the telemetry file (disk full or file-size limit?)"
            ));
        } else if lost > 0 {
            errors.push(format!(
                "{lost} of {ended} spans may not have been exported (queue full, exporter unreachable or too slow for the deadline; raise OTEL_BSP_MAX_QUEUE_SIZE or check the collector)"
            ));
        }
        let (lost_logs, emitted_logs) = pipeline.lost_logs();
        if lost_logs > 0 {
            errors.push(format!(
                "{lost_logs} of {emitted_logs} log records were not exported (the log queue was full or the exporter failed; raise OTEL_BLRP_MAX_QUEUE_SIZE or check the collector)"
            ));
        }
        // the export threads hold the last references when a deadline
        // passed; otherwise this frees the providers now
        drop(pipeline);
        for e in &errors {
            crate::diag::warn(format_args!("shutdown: {e}"));
        }
        // a SIGTERM that arrived during this shutdown kills the process
        // once its flush is done: do not return (and let `main` exit 0)
        // before that
        signal::wait_for_pending_death();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ShutdownError { errors })
        }
    }
}

impl Drop for TelemetryHandle {
    fn drop(&mut self) {
        // errors were already reported on stderr by `shutdown`
        let _ = self.shutdown(DROP_SHUTDOWN_TIMEOUT);
    }
}
