//! The processors a pipeline builds on its exporters: lens's batch span
//! processor (which redacts; then counting), the SDK's batch log processor
//! (redaction, counting), and the count of spans that ended.

use crate::config::otel::{BatchSettings, LogBatch};
use crate::engine::record::SpanSink;
use crate::engine::recorder::Recorder;
use crate::sdk::export::batch::BatchProcessor;
use crate::sdk::export::log_count::{CountEmitted, CountExported, LogCounters};
use crate::sdk::export::{Counting, SpanCounters};
use crate::sdk::redact::{RedactLogs, Redactor};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::logs::LogExporter;
use opentelemetry_sdk::trace::{ShouldSample, SpanData, SpanExporter, SpanLimits, SpanProcessor};
use opentelemetry_sdk::Resource;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The batch processor over `exporter`: redaction before export (by the
/// processor), then counting of what was exported.
pub(crate) fn batch_processor<E: SpanExporter + 'static>(
    exporter: E,
    counters: Arc<SpanCounters>,
    batch: BatchSettings,
    redactor: Redactor,
) -> BatchProcessor {
    BatchProcessor::new(
        Counting::new(exporter, counters.clone()),
        batch,
        counters,
        redactor,
    )
}

/// The SDK's batch log processor over `exporter`, with redaction at the last
/// point before export.
pub(crate) fn log_processor<E: LogExporter + 'static>(
    exporter: E,
    config: &LogBatch,
    redactor: &Redactor,
    counters: &Arc<LogCounters>,
) -> CountEmitted<opentelemetry_sdk::logs::BatchLogProcessor> {
    let mut b = opentelemetry_sdk::logs::BatchConfigBuilder::default()
        .with_max_queue_size(config.max_queue_size)
        .with_max_export_batch_size(config.max_export_batch_size);
    if let Some(d) = config.scheduled_delay {
        b = b.with_scheduled_delay(d);
    }
    let exporter = CountExported::new(RedactLogs::new(exporter, redactor.clone()), counters);
    CountEmitted::new(
        opentelemetry_sdk::logs::BatchLogProcessor::builder(exporter)
            .with_batch_config(b.build())
            .build(),
        counters,
    )
}

/// Lens's own span path over `processor`: the recorder (the provider's
/// sampler, `default_sampling` if that decides as `parentbased_always_on`,
/// fork-safe ids, lens's scope, the plan's span `limits`, current in
/// OpenTelemetry as ids only with `ids_only`), its sink and the
/// collector's interval (a quarter of the batch delay, 5–250 ms).
pub(crate) fn own_recorder(
    sampler: Box<dyn ShouldSample>,
    default_sampling: bool,
    ids_only: bool,
    limits: SpanLimits,
    processor: BatchProcessor,
    batch: &BatchSettings,
) -> (Recorder, Arc<dyn SpanSink>, Duration) {
    let sink: Arc<dyn SpanSink> = Arc::new(RecorderSink {
        processor: processor.clone(),
    });
    // the recorder draws its ids from the fork-safe source: its fork
    // handler is registered
    crate::engine::recorder::ids::install_fork_handler();
    let rec = Recorder {
        sampler,
        default_sampling,
        ids_only,
        settings: crate::engine::record::RecordSettings::new(
            crate::api::span::SCOPE_NAME,
            Some(env!("CARGO_PKG_VERSION")),
        )
        .with_limits(limits)
        .with_sink(&sink),
    };
    let interval =
        (batch.scheduled_delay / 4).clamp(Duration::from_millis(5), Duration::from_millis(250));
    (rec, sink, interval)
}

/// Where lens's own span path (`NEMO_LENS_SPAN_PATH=lens`) hands its
/// finished records: queued in the batch processor, which builds them into
/// spans on its exporter thread (redaction, export, counting as for the
/// SDK's spans).
#[derive(Debug)]
pub(crate) struct RecorderSink {
    pub(crate) processor: BatchProcessor,
}

impl SpanSink for RecorderSink {
    fn submit(&self, batches: Vec<crate::engine::record::FinishedBatch>) {
        use crate::engine::recorder::may_mix_pipelines;
        use crate::engine::to_span_data as build;
        // another pipeline's records go to it now, before this queue
        // (and unsampled ones nowhere); with one pipeline ever, every
        // record is this sink's, and the records are not read here (the
        // exporter thread reads them once, to build them: read here too,
        // they would cross one more CPU's cache). Every record is sampled:
        // the samplers lens builds (the SDK's, rank-aware over them) sample
        // or drop, never record only (the export thread would drop such a
        // record, uncounted, all the same)
        let mine = match may_mix_pipelines() {
            true => build::sort_out(batches, build::address(self)),
            false => batches,
        };
        if !mine.is_empty() {
            self.processor.on_end_records(mine);
        }
    }
}

/// Counts spans that ended (offered to the batch processor).
#[derive(Debug)]
pub(crate) struct CountEnded<P> {
    pub(crate) inner: P,
    pub(crate) counters: Arc<SpanCounters>,
}

impl<P: SpanProcessor> SpanProcessor for CountEnded<P> {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.inner.on_start(span, cx);
    }
    fn on_end(&self, span: SpanData) {
        self.counters.ended.fetch_add(1, Ordering::Relaxed);
        self.inner.on_end(span);
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }
    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
