//! The handle a setup returns: flush, shutdown (also on drop), and the
//! process-wide state a pipeline owns while it is live.

use super::signal;
use crate::api::groups::{set_enabled_span_groups, SpanGroupSet};
use crate::api::span;
use crate::config::otel::DEFAULT_FLUSH_TIMEOUT;
use crate::engine::open;
use crate::sdk::export::SpanCounters;
use crate::sdk::pipeline::Pipeline;
use crate::sdk::profile::Profiling;
use crate::sdk::report::{LossCause, ShutdownReport, SignalReport};
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
    /// A rank that does not export: its per-step profile, when it keeps one.
    profile: Mutex<Option<Profiling>>,
    profile_path: Option<PathBuf>,
    counters: Option<Arc<SpanCounters>>,
    generation: u64,
    /// The process that made the handle (a forked child has a copy).
    owner_pid: u32,
    enabled: bool,
    exporting: bool,
    file_path: Option<PathBuf>,
    run_id: String,
    /// Where this process sits in its job: (rank, world size, local rank).
    pub(super) placement: (u32, u32, u32),
    pub(super) holds_install: AtomicBool,
    /// The rank [`gather_profiles`](Self::gather_profiles) brings the
    /// profiles to (the lowest exporting rank), when one exports.
    pub(super) gather_root: Option<u32>,
}

impl fmt::Debug for TelemetryHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelemetryHandle")
            .field("enabled", &self.enabled)
            .field("exporting", &self.exporting)
            .field("file_path", &self.file_path)
            .field("profile_path", &self.profile_path)
            .field("run_id", &self.run_id)
            .field("rank", &self.placement.0)
            .field("world_size", &self.placement.1)
            .field("local_rank", &self.placement.2)
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
            profile: Mutex::new(None),
            profile_path: None,
            generation,
            owner_pid: std::process::id(),
            enabled: true,
            exporting: true,
            placement: (0, 1, 0),
            holds_install: AtomicBool::new(true),
            gather_root: None,
        }
    }

    pub(super) fn inactive(enabled: bool, generation: u64, run_id: String) -> Self {
        TelemetryHandle {
            run_id,
            pipeline: Mutex::new(None),
            profile: Mutex::new(None),
            profile_path: None,
            counters: None,
            generation,
            owner_pid: std::process::id(),
            enabled,
            exporting: false,
            file_path: None,
            placement: (0, 1, 0),
            holds_install: AtomicBool::new(false),
            gather_root: None,
        }
    }

    /// A rank that does not export and keeps a per-step profile.
    pub(super) fn profiling(profiling: Profiling, generation: u64, run_id: String) -> Self {
        let mut h = Self::inactive(true, generation, run_id);
        h.profile_path = profiling.path.clone();
        h.profile = Mutex::new(Some(profiling));
        h.holds_install = AtomicBool::new(true);
        h
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

    /// This process's rank in the job: the rank given to
    /// [`TelemetryBuilder::new`](super::builder::TelemetryBuilder::new), or,
    /// through [`setup_telemetry_from_env`](super::from_env::setup_telemetry_from_env),
    /// the launcher's (`NEMO_LENS_RANK`, torchrun's `RANK`, Open MPI, MPICH,
    /// SLURM; none: 0). Set on every handle, enabled or not.
    ///
    /// ```
    /// let handle = lens::setup_telemetry(lens::LensConfig::default(), 3, 8).unwrap();
    /// assert_eq!((handle.rank(), handle.world_size()), (3, 8));
    /// // from the launcher (torchrun, mpirun, srun), with no code
    /// let handle = lens::setup_telemetry_from_env().unwrap();
    /// assert!(handle.rank() < handle.world_size());
    /// ```
    pub fn rank(&self) -> u32 {
        self.placement.0
    }

    /// The number of ranks in the job (at least 1), from the same source as
    /// [`rank`](Self::rank): `NEMO_LENS_WORLD_SIZE`, torchrun's
    /// `WORLD_SIZE`, `OMPI_COMM_WORLD_SIZE`, `PMI_SIZE`, `SLURM_NTASKS`;
    /// none: 1.
    ///
    /// ```
    /// let handle = lens::setup_telemetry(lens::LensConfig::default(), 0, 4).unwrap();
    /// assert_eq!(handle.world_size(), 4);
    /// let handle = lens::setup_telemetry(lens::LensConfig::default(), 0, 0).unwrap();
    /// assert_eq!(handle.world_size(), 1); // a world has at least one rank
    /// ```
    pub fn world_size(&self) -> u32 {
        self.placement.1
    }

    /// This process's rank within its node: the first of `LOCAL_RANK`
    /// (torchrun), `OMPI_COMM_WORLD_LOCAL_RANK` (Open MPI), `SLURM_LOCALID`,
    /// `MPI_LOCALRANKID` (MPICH) that is set; none or not a number: 0. The
    /// same rule as the `first_rank_per_node` strategy and the
    /// `nv.dl.local_rank` resource attribute; use it to pick this rank's GPU.
    ///
    /// ```
    /// let handle = lens::setup_telemetry_from_env().unwrap();
    /// let device = format!("cuda:{}", handle.local_rank());
    /// # drop(device);
    /// ```
    pub fn local_rank(&self) -> u32 {
        self.placement.2
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

    /// The per-step phase profile file of a rank that does not export
    /// (`<…>.profile.jsonl` beside the rank's would-be OTLP JSON lines file),
    /// when it keeps one: the `file` or `perfetto` exporter and
    /// `NEMO_LENS_PROFILE` on (the default).
    ///
    /// ```
    /// let h = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// assert!(h.profile_path().is_none());
    /// ```
    pub fn profile_path(&self) -> Option<&Path> {
        self.profile_path.as_deref()
    }

    /// Brings the per-step profiles that ranks which do not export hold in
    /// memory (any exporter but `file` and `perfetto`) to the lowest
    /// exporting rank, which exports them with its spans (as `lens.profile`
    /// carrier spans that `lens report` reads back), so that a collector's
    /// output names a slow rank under `single_rank` or `sampled` too.
    ///
    /// **A collective: every rank of `comm` calls it**, the same number of
    /// times (e.g. every 100 steps, and once more before
    /// [`shutdown`](Self::shutdown)); a rank with nothing to send (it
    /// exports, writes its profile to a file, or keeps none) takes part with
    /// nothing. `comm`'s ranks are the job's ranks as lens numbers them.
    /// Each rank holds at most 256 KiB of lines between two calls (the
    /// oldest dropped, and reported as lost at shutdown). No thread and no
    /// connection of lens's: the bytes go over `comm`. Returns the lines
    /// this call moved: on the exporting rank those it received and
    /// handed to its exporter, on the others those it sent; an error of
    /// `comm`, or a root outside it, is an error (never a panic).
    ///
    /// ```
    /// use lens::propagation::LocalCollective;
    /// let h = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// let comm = &LocalCollective::group(1)[0];
    /// assert_eq!(h.gather_profiles(comm).unwrap(), 0); // telemetry is off
    /// ```
    pub fn gather_profiles(
        &self,
        comm: &dyn crate::api::propagation::Collective,
    ) -> Result<u64, crate::api::propagation::CollectiveError> {
        let profile = self
            .profile
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|p| p.profile.clone());
        let pipeline = self.pipeline();
        let moved = crate::sdk::profile::gather::gather(
            comm,
            self.gather_root,
            profile.as_deref(),
            pipeline.as_deref(),
        )?;
        Ok(if self.exporting {
            moved.exported
        } else {
            moved.sent
        })
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
    /// assert!(h.force_flush().is_clean());
    /// ```
    pub fn force_flush(&self) -> ShutdownReport {
        self.force_flush_within(DEFAULT_FLUSH_TIMEOUT)
    }

    /// Exports everything recorded so far, waiting at most `timeout`; the
    /// report tells what this flush lost and why, per signal (a signal
    /// still exporting at the deadline is marked `timed_out`). Prints
    /// nothing: the caller has the report.
    ///
    /// ```
    /// let h = lens::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// let report = h.force_flush_within(std::time::Duration::from_secs(2));
    /// assert!(report.is_clean(), "{report}");
    /// ```
    pub fn force_flush_within(&self, timeout: Duration) -> ShutdownReport {
        if std::process::id() != self.owner_pid {
            // a forked child's copy: its own pipeline, if it set one up
            return TelemetryHandle::flush_child_pipeline(timeout);
        }
        self.pipeline()
            .map(|p| p.flush(timeout))
            .unwrap_or_default()
    }

    /// Ends spans that are still open (innermost first, marked
    /// `nemo.span.truncated`), flushes and shuts down traces, metrics and
    /// logs, and reports what was exported and what was lost, per signal.
    /// Returns within `timeout` (plus a few milliseconds): a signal whose
    /// exporter has not finished by then is marked `timed_out` and left to
    /// finish in the background. Idempotent (a second call reports
    /// nothing). In a forked child it shuts down the pipeline the child
    /// set up from its parent's configuration on its first span (see
    /// `docs/PARITY.md`, fork), and returns at once when there is none.
    ///
    /// Lost telemetry never fails the job: when something was lost, one
    /// line on stderr names the signal, the count and the cause (refused,
    /// timed out, queue full, disk full), and the report says the same.
    /// The pattern to copy ends `main` with a plain call:
    ///
    /// ```
    /// fn main() -> Result<(), Box<dyn std::error::Error>> {
    ///     let telemetry = lens::setup_telemetry_from_env()?; // misuse is an error
    ///     // ... the job ...
    ///     telemetry.shutdown(std::time::Duration::from_secs(10)); // a loss is a warning
    ///     Ok(())
    /// }
    /// # main().unwrap();
    /// ```
    pub fn shutdown(&self, timeout: Duration) -> ShutdownReport {
        let taken = self
            .pipeline
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let profiling = self
            .profile
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if !self.holds_install.swap(false, Ordering::AcqRel) {
            return ShutdownReport::default();
        }
        LIVE_HANDLES.fetch_sub(1, Ordering::AcqRel);
        if std::process::id() != self.owner_pid {
            // a forked child's copy of its parent's handle: the exporter
            // threads do not exist here, nothing to flush, and waiting for
            // them would stall
            std::mem::forget(taken);
            std::mem::forget(profiling);
            let _ = LIVE_GENERATION.compare_exchange(
                self.generation,
                0,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
            let dropped = crate::sdk::fork::dropped_in_child();
            if let Some(own) = TelemetryHandle::take_child_pipeline() {
                // the pipeline the child set up from its parent's recipe
                let mut report = own.shutdown(timeout);
                report.traces.lost += dropped;
                if dropped > 0 {
                    report.traces.cause.get_or_insert(LossCause::ForkedChild);
                }
                return report;
            }
            let report = ShutdownReport {
                traces: SignalReport {
                    lost: dropped,
                    cause: (dropped > 0).then_some(LossCause::ForkedChild),
                    ..Default::default()
                },
                ..Default::default()
            };
            if dropped > 0 {
                crate::diag::warn(format_args!("shutdown: {report}"));
            }
            return report;
        }
        let live = LIVE_GENERATION
            .compare_exchange(self.generation, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if live {
            // the signal hook keeps flushing this pipeline until its
            // shutdown is over (a SIGTERM now waits for it, within its
            // deadline, before the process dies)
            teardown_globals(taken.is_some() || profiling.is_some());
        }
        if let Some(profiling) = profiling {
            // open spans were ended above (their lines are written): what
            // is left is to count
            let report = profiling.shutdown(timeout);
            if live {
                signal::clear_live(self.generation);
            }
            drop(profiling);
            if !report.is_clean() {
                crate::diag::warn(format_args!("warning: {report}"));
            }
            signal::wait_for_pending_death();
            return report;
        }
        let Some(pipeline) = taken else {
            if live {
                signal::clear_live(self.generation);
            }
            return ShutdownReport::default();
        };
        let report = pipeline.shutdown(timeout);
        if live {
            signal::clear_live(self.generation);
        }
        // the export threads hold the last references when a deadline
        // passed; otherwise this frees the providers now
        drop(pipeline);
        if !report.is_clean() {
            crate::diag::warn(format_args!("warning: {report}"));
        }
        // a SIGTERM that arrived during this shutdown kills the process
        // once its flush is done: do not return (and let `main` exit 0)
        // before that
        signal::wait_for_pending_death();
        report
    }
}

impl Drop for TelemetryHandle {
    fn drop(&mut self) {
        // a loss was already reported on stderr by `shutdown`
        self.shutdown(DROP_SHUTDOWN_TIMEOUT);
    }
}
