//! Shared by the benches: a span exporter that drops everything, the provider
//! both lens and the raw-SDK variants record into, and the peer set-ups.

#![allow(dead_code)] // each bench uses a different subset

pub(crate) mod variants;

use lens::otel::trace::TracerProvider as _;
use lens::otel_sdk::error::OTelSdkResult;
use lens::otel_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, SpanData, SpanExporter,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Batch queue size. Large enough that the exporter thread, which only has
/// to drop the spans, never lets it fill between two wake-ups (a full queue
/// drops the span on the *calling* thread and skews the numbers); every run
/// checks and prints the drop count.
pub(crate) const MAX_QUEUE_SIZE: usize = 1 << 16;
/// The queue the benches' side-by-side runs give every variant, lens's and
/// the raw SDK's alike (`OTEL_BSP_MAX_QUEUE_SIZE`, lens's upper limit for
/// it): at least the spans of a run, so a queue that fills cannot be what
/// separates two variants; each run still reports its drops.
pub(crate) const NO_DROP_QUEUE: usize = 1 << 20;

/// The raw SDK variants' batch queue: `OTEL_BSP_MAX_QUEUE_SIZE` when set
/// (as lens reads it), else [`MAX_QUEUE_SIZE`].
pub(crate) fn queue_size() -> usize {
    std::env::var("OTEL_BSP_MAX_QUEUE_SIZE")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(MAX_QUEUE_SIZE)
}

/// Spans per export call (the SDK default); the producer wakes the exporter
/// thread each time this many are queued.
pub(crate) const MAX_EXPORT_BATCH_SIZE: usize = 512;

/// No timer-driven exports: the exporter thread wakes only when a batch is
/// full or on an explicit flush, so the calling thread's work does not
/// depend on wall-clock time (callgrind runs far slower than real time).
pub(crate) const SCHEDULED_DELAY: Duration = Duration::from_secs(3600);

/// A [`SpanExporter`] that drops every batch, counting the spans it saw.
#[derive(Debug, Clone, Default)]
pub(crate) struct DiscardExporter {
    received: Arc<AtomicU64>,
}

impl DiscardExporter {
    /// Spans exported (and dropped) so far.
    pub(crate) fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }
}

impl SpanExporter for DiscardExporter {
    fn export(
        &self,
        batch: Vec<SpanData>,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        self.received
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        drop(batch);
        std::future::ready(Ok(()))
    }
}

/// A provider with a [`BatchSpanProcessor`] into a [`DiscardExporter`]
/// (queue: [`queue_size`]).
pub(crate) fn discard_provider() -> (SdkTracerProvider, DiscardExporter) {
    let exporter = DiscardExporter::default();
    let config = BatchConfigBuilder::default()
        .with_max_queue_size(queue_size())
        .with_max_export_batch_size(MAX_EXPORT_BATCH_SIZE)
        .with_scheduled_delay(SCHEDULED_DELAY)
        .build();
    let processor = BatchSpanProcessor::builder(exporter.clone())
        .with_batch_config(config)
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .build();
    (provider, exporter)
}

/// The instrumentation scope lens uses (name and version).
pub(crate) fn lens_scope() -> lens::otel::InstrumentationScope {
    lens::otel::InstrumentationScope::builder(lens::SCOPE_NAME)
        .with_version(env!("CARGO_PKG_VERSION"))
        .build()
}

/// A raw SDK tracer from `provider`, with the same instrumentation scope
/// lens uses, so both variants take the same SDK paths.
pub(crate) fn raw_tracer(provider: &SdkTracerProvider) -> SdkTracer {
    provider.tracer_with_scope(lens_scope())
}

/// Installs `provider` for lens and enables every span group.
pub(crate) fn lens_on(provider: &SdkTracerProvider) {
    lens::set_tracer_provider(provider);
    lens::set_enabled_span_groups(&lens::SpanGroupSet::resolve("all", &[]).unwrap());
}

/// The production path: `TelemetryBuilder::install` with the discarding
/// exporter (traces only, every group on). Compared with [`lens_on`] this
/// adds what setup installs around each span: open-span tracking (for
/// truncation at shutdown), the ended/exported counters, the fork-safe id
/// generator and the configured sampler. Its batch processor uses lens's
/// defaults (queue 65 536, export batch 2 048, unless `OTEL_BSP_*` say
/// otherwise).
pub(crate) fn lens_setup(exporter: DiscardExporter) -> lens::TelemetryHandle {
    let mut cfg = lens::LensConfig::default();
    cfg.enabled = true;
    cfg.metrics_enabled = false;
    cfg.span_groups = "all".to_owned();
    lens::TelemetryBuilder::new(cfg, 0, 1)
        .with_span_exporter(exporter)
        .allow_reinit(true)
        .install()
        .expect("lens telemetry setup")
}

/// Switches every lens span group off (the provider stays installed).
pub(crate) fn lens_off() {
    lens::set_enabled_span_groups(&lens::SpanGroupSet::none());
}

/// Installs a global `tracing` subscriber that keeps INFO and above, so a
/// `level = "trace"` span is disabled while a subscriber is live (the usual
/// production set-up; the same fast path as no subscriber at all).
pub(crate) fn tracing_info_only() {
    use tracing_subscriber::layer::SubscriberExt as _;
    let subscriber =
        tracing_subscriber::registry().with(tracing_subscriber::filter::LevelFilter::INFO);
    // A second call (e.g. two benches in one process) keeps the first one.
    let _ = tracing::subscriber::set_global_default(subscriber);
}

/// Flushes `provider` and returns how many of `produced` spans the batch
/// processor dropped (queue full) instead of exporting.
pub(crate) fn dropped_after_flush(
    provider: &SdkTracerProvider,
    exporter: &DiscardExporter,
    produced: u64,
) -> u64 {
    let _ = provider.force_flush();
    produced.saturating_sub(exporter.received())
}

/// CPU seconds of the calling thread.
pub(crate) fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
