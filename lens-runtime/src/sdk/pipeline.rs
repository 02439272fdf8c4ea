//! The pipeline of one exporting setup: the backend (file, console or OTLP)
//! chosen once, the tracer, meter and logger providers built on it, and
//! flush / shutdown with one deadline for all signals.

use crate::api::span::SCOPE_NAME;
use crate::config::otel::{BatchSettings, OtelEnv};
use crate::config::{ExporterKind, LensConfig, OtelContext, SpanPath};
use crate::engine::record::SpanSink;
use crate::engine::recorder::Recorder;
use crate::sdk::deadline::{spawn_all, trouble_of, wait_all, Task, Troubles};
use crate::sdk::export::{self, batch::BatchProcessor, console, file, log_count::LogCounters};
use crate::sdk::export::{perfetto::PerfettoExporter, perfetto::PerfettoFiles};
use crate::sdk::export::{CountMetricExports, ExportRuntime, MetricCounters, SpanCounters};
use crate::sdk::ids::ForkSafeIdGenerator;
pub(crate) use crate::sdk::processors::batch_processor;

mod losses;
use crate::sdk::processors::{log_processor, own_recorder, CountEnded};
use crate::sdk::redact::Redactor;
use crate::sdk::report::ShutdownReport;
use crate::sdk::sampler::RankAwareSampler;
use opentelemetry_sdk::logs::SdkLoggerProvider;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{
    Instrument, MeterProviderBuilder, PeriodicReader, SdkMeterProvider, Stream,
};
use opentelemetry_sdk::trace::{
    Sampler, SdkTracerProvider, ShouldSample, SpanProcessor, TracerProviderBuilder,
};
use opentelemetry_sdk::Resource;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The opt-in view of `NEMO_LENS_FINE_BUCKETS`: the finer boundaries of
/// [`crate::fine_bucket_boundaries`] for the histograms the Python
/// library shares; every other instrument as it is.
fn fine_bucket_view(
    i: &opentelemetry_sdk::metrics::Instrument,
) -> Option<opentelemetry_sdk::metrics::Stream> {
    let bounds = crate::fine_bucket_boundaries(i.name())?;
    opentelemetry_sdk::metrics::Stream::builder()
        .with_aggregation(
            opentelemetry_sdk::metrics::Aggregation::ExplicitBucketHistogram {
                boundaries: bounds.to_vec(),
                record_min_max: true,
            },
        )
        .build()
        .ok()
}

/// Builds the span processor of a custom exporter (`with_span_exporter`).
pub(crate) type ProcessorFactory =
    Box<dyn FnOnce(Arc<SpanCounters>, BatchSettings, Redactor) -> BatchProcessor + Send>;
/// Adds the metric reader of a custom exporter (`with_metric_exporter`).
pub(crate) type ReaderFactory =
    Box<dyn FnOnce(MeterProviderBuilder, Duration) -> MeterProviderBuilder + Send>;

pub(crate) use crate::sdk::export::BuildError;

/// Where every signal goes; decided once per setup.
enum Backend {
    File(Arc<file::Sink>),
    Console,
    Otlp(tokio::runtime::Handle),
}

/// What a pipeline is built from.
pub(crate) struct Inputs<'a> {
    pub(crate) config: &'a LensConfig,
    pub(crate) otel: &'a OtelEnv,
    pub(crate) rank: u32,
    pub(crate) run_id: &'a str,
    pub(crate) resource: Resource,
    pub(crate) redactor: &'a Redactor,
    pub(crate) span_processor: Option<ProcessorFactory>,
    pub(crate) metric_reader: Option<ReaderFactory>,
    /// Span processors, metric readers and views added in code.
    pub(crate) extra: Extras,
}

/// Adds one span processor given in code to the tracer provider.
pub(crate) type AddSpanProcessor =
    Box<dyn FnOnce(TracerProviderBuilder) -> TracerProviderBuilder + Send>;
/// A metric view given in code.
pub(crate) type View = Arc<dyn Fn(&Instrument) -> Option<Stream> + Send + Sync>;

/// What the builder adds beside lens's own exporters.
#[derive(Default)]
pub(crate) struct Extras {
    /// `with_span_processor`, in order, after lens's processor.
    pub(crate) span_processors: Vec<AddSpanProcessor>,
    /// `with_metric_reader`, beside lens's reader.
    pub(crate) metric_readers: Vec<ReaderFactoryExtra>,
    /// `with_view`, in order.
    pub(crate) views: Vec<View>,
}

/// Adds one metric reader given in code to the meter provider.
pub(crate) type ReaderFactoryExtra =
    Box<dyn FnOnce(MeterProviderBuilder) -> MeterProviderBuilder + Send>;

/// The providers of one exporting setup.
pub(crate) struct Pipeline {
    pub(crate) tracer_provider: Option<SdkTracerProvider>,
    pub(crate) meter_provider: Option<SdkMeterProvider>,
    pub(crate) logger_provider: Option<SdkLoggerProvider>,
    pub(crate) counters: Arc<SpanCounters>,
    /// The telemetry file, with the `file` exporter (and, with `perfetto`,
    /// the file of metrics and log records).
    pub(crate) sink: Option<Arc<file::Sink>>,
    /// The trace files, with the `perfetto` exporter.
    pub(crate) perfetto: Option<Arc<PerfettoFiles>>,
    /// Where spans go, in words (a path, `stdout`, an endpoint).
    pub(crate) destination: String,
    pub(crate) file_path: Option<PathBuf>,
    /// A handle to the span processor: flushed with the caller's deadline,
    /// on the caller's thread.
    spans: Option<BatchProcessor>,
    /// Lens's own span path (`NEMO_LENS_SPAN_PATH=lens`), for setup to
    /// install after the tracer: the recorder, its sink and the collector's
    /// interval.
    pub(crate) recorder: Option<(Recorder, Arc<dyn SpanSink>, Duration)>,
    /// The sink of lens's own span path while it may hold spans.
    span_sink: Option<Arc<dyn SpanSink>>,
    /// Log records emitted and exported (the SDK's log queue drops silently).
    log_counters: Arc<LogCounters>,
    /// Metric exports begun and succeeded.
    metric_counters: Arc<MetricCounters>,
    /// Where traces, metrics and logs go, in words.
    destinations: [String; 3],
    /// The OTLP exporters' own timeout of one export.
    export_timeout: Duration,
    /// Set while a flush or shutdown thread of metrics / logs runs: a new
    /// call does not start another (a hung collector must not pile up
    /// threads).
    busy: [Arc<AtomicBool>; 2],
    _runtime: Option<ExportRuntime>,
}

impl Pipeline {
    /// Builds the providers of every enabled signal on one backend.
    pub(crate) fn build(inp: Inputs<'_>) -> Result<Pipeline, BuildError> {
        let cfg = inp.config;
        let otel = inp.otel;
        let needs_otlp = cfg.exporter == ExporterKind::Otlp
            && ((cfg.traces_enabled && inp.span_processor.is_none())
                || (cfg.metrics_enabled && inp.metric_reader.is_none())
                || cfg.logs_enabled);
        let runtime =
            if needs_otlp {
                Some(ExportRuntime::new().map_err(|e| {
                    BuildError::caused("cannot start the export runtime".to_owned(), e)
                })?)
            } else {
                None
            };
        let cannot_open = |p: &Path, e: std::io::Error| {
            let from = if cfg.file_path.is_some() {
                "NEMO_LENS_FILE_PATH"
            } else {
                "the default path, named after the run id (NEMO_LENS_RUN_ID, else SLURM_JOB_ID)"
            };
            let shown: String = p.display().to_string().chars().take(120).collect();
            BuildError::caused(format!("cannot open {shown} (from {from})"), e)
        };
        // `perfetto`: spans into the trace files, metrics and log records
        // into the JSON lines file beside them (opened only when needed)
        let perfetto_spans = cfg.exporter == ExporterKind::Perfetto
            && cfg.traces_enabled
            && inp.span_processor.is_none();
        let perfetto = if perfetto_spans {
            let stem =
                crate::sdk::export::perfetto::stem(&file::path_for(cfg, inp.run_id, inp.rank));
            let first = crate::sdk::export::perfetto::rotated(&stem, 0);
            Some(
                PerfettoFiles::open(stem, cfg.perfetto_max_bytes)
                    .map_err(|e| cannot_open(&first, e))?,
            )
        } else {
            None
        };
        let wants_file = match cfg.exporter {
            ExporterKind::File => true,
            ExporterKind::Perfetto => cfg.metrics_enabled || cfg.logs_enabled,
            _ => false,
        };
        let file_path = wants_file.then(|| file::path_for(cfg, inp.run_id, inp.rank));
        let backend = match (&file_path, &runtime) {
            (Some(p), _) => Backend::File(file::Sink::file(p).map_err(|e| cannot_open(p, e))?),
            (None, Some(rt)) => Backend::Otlp(rt.handle()),
            (None, None) => Backend::Console,
        };
        let counters = Arc::new(SpanCounters::default());
        let mut destinations = match &backend {
            Backend::File(_) => {
                let p = file_path
                    .as_ref()
                    .map_or_else(String::new, |p| p.display().to_string());
                [p.clone(), p.clone(), p]
            }
            Backend::Console => [
                "stdout".to_owned(),
                "stdout".to_owned(),
                "stdout".to_owned(),
            ],
            Backend::Otlp(_) => export::otlp_destinations(otel),
        };
        if let Some(files) = &perfetto {
            destinations[0] = files.path().display().to_string();
        }
        if inp.span_processor.is_some() {
            destinations[0] = "the custom span exporter".to_owned();
        }
        if inp.metric_reader.is_some() {
            destinations[1] = "the custom metric reader".to_owned();
        }
        let destination = destinations[0].clone();
        let _ = counters.destination.set(destination.clone());
        let res = inp.resource;
        let redactor = inp.redactor;

        let mut spans = None;
        let mut recorder = None;
        let tracer_provider = if cfg.traces_enabled {
            let batch = otel.batch;
            let processor = match inp.span_processor {
                Some(f) => f(counters.clone(), batch, redactor.clone()),
                None => {
                    let (c, r) = (counters.clone(), redactor.clone());
                    match (&perfetto, &backend) {
                        (Some(files), _) => {
                            let host = res
                                .get(&opentelemetry::Key::from_static_str("host.name"))
                                .map(|v| v.to_string())
                                .unwrap_or_else(|| "?".to_owned());
                            let e =
                                PerfettoExporter::new(files.clone(), inp.run_id, inp.rank, &host);
                            batch_processor(e, c, otel.local_file_batch(), r)
                        }
                        (None, Backend::File(sink)) => {
                            let e = file::JsonLines::new(sink.clone(), false);
                            batch_processor(e, c, otel.local_file_batch(), r)
                        }
                        (None, Backend::Console) => {
                            batch_processor(console::console(), c, batch, r)
                        }
                        (None, Backend::Otlp(h)) => {
                            let e = export::otlp_spans(otel, h)?.with_timeout(otel.export_timeout);
                            batch_processor(e, c, batch, r)
                        }
                    }
                }
            };
            spans = Some(processor.clone());
            // a span processor given in code sees spans only on the SDK's
            // path (lens's own recorder bypasses the provider's processors)
            let own_path = otel.span_path == SpanPath::Lens && inp.extra.span_processors.is_empty();
            let own_processor = processor.clone();
            // the SDK's default, which the provider uses when none is set
            let mut rec_sampler: Box<dyn ShouldSample> =
                Box::new(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)));
            // whether the recorder may decide as `parentbased_always_on`
            // without calling the sampler
            let mut default_sampling = otel.default_sampler;
            // the plan's span limits and sampler, over what the SDK's
            // default config read from the environment itself
            let mut b = SdkTracerProvider::builder()
                .with_resource(res.clone())
                .with_span_limits(otel.span_limits)
                .with_sampler(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)))
                .with_id_generator(ForkSafeIdGenerator::new())
                .with_span_processor(CountEnded {
                    inner: processor,
                    counters: counters.clone(),
                });
            if cfg.sampler_enabled {
                let inner = otel
                    .sampler
                    .clone()
                    .unwrap_or(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)));
                let s = RankAwareSampler::new(inp.rank, cfg.export_sample_rate, inner);
                default_sampling &= s.keeps_rank();
                rec_sampler = Box::new(s.clone());
                b = b.with_sampler(s);
            } else if let Some(s) = otel.sampler.clone() {
                rec_sampler = Box::new(s.clone());
                b = b.with_sampler(s);
            }
            for add in inp.extra.span_processors {
                b = add(b);
            }
            if own_path {
                recorder = Some(own_recorder(
                    rec_sampler,
                    default_sampling,
                    otel.otel_context == OtelContext::Ids,
                    otel.span_limits,
                    own_processor,
                    &batch,
                ));
            }
            Some(b.build())
        } else {
            None
        };

        let metric_counters = Arc::new(MetricCounters::default());
        let meter_provider = if cfg.metrics_enabled {
            let mut b = SdkMeterProvider::builder().with_resource(res.clone());
            if cfg.fine_buckets {
                b = b.with_view(fine_bucket_view);
            }
            let interval = otel.metric_interval;
            let mc = &metric_counters;
            fn reader<E: PushMetricExporter>(
                e: E,
                interval: Duration,
                c: &Arc<MetricCounters>,
            ) -> PeriodicReader<CountMetricExports<E>> {
                PeriodicReader::builder(CountMetricExports::new(e, c))
                    .with_interval(interval)
                    .build()
            }
            let mut b = b;
            for add in inp.extra.metric_readers {
                b = add(b);
            }
            for view in inp.extra.views {
                b = b.with_view(move |i: &Instrument| view(i));
            }
            let b = match inp.metric_reader {
                Some(f) => f(b, interval),
                None => match &backend {
                    Backend::File(sink) => b.with_reader(reader(
                        file::JsonLines::new(sink.clone(), false),
                        interval,
                        mc,
                    )),
                    Backend::Console => b.with_reader(reader(console::console(), interval, mc)),
                    Backend::Otlp(h) => {
                        b.with_reader(reader(export::otlp_metrics(otel, h)?, interval, mc))
                    }
                },
            };
            Some(b.build())
        } else {
            None
        };

        let log_counters = Arc::new(LogCounters::default());
        let logger_provider = if cfg.logs_enabled {
            let b = SdkLoggerProvider::builder().with_resource(res);
            let (lb, r, c) = (&otel.log_batch, redactor, &log_counters);
            let b = match &backend {
                Backend::File(sink) => b.with_log_processor(log_processor(
                    file::JsonLines::new(sink.clone(), false),
                    lb,
                    r,
                    c,
                )),
                Backend::Console => {
                    b.with_log_processor(log_processor(console::console(), lb, r, c))
                }
                Backend::Otlp(h) => {
                    b.with_log_processor(log_processor(export::otlp_logs(otel, h)?, lb, r, c))
                }
            };
            Some(b.build())
        } else {
            None
        };

        Ok(Pipeline {
            tracer_provider,
            meter_provider,
            logger_provider,
            counters,
            sink: match backend {
                Backend::File(sink) => Some(sink),
                _ => None,
            },
            file_path: perfetto.as_ref().map(|p| p.path()).or(file_path),
            perfetto,
            destination,
            span_sink: recorder.as_ref().map(|r| r.1.clone()),
            recorder,
            spans,
            log_counters,
            metric_counters,
            destinations,
            export_timeout: otel.export_timeout,
            busy: Default::default(),
            _runtime: runtime,
        })
    }

    /// Hands a finished span straight to the span processor (no sampler):
    /// the profile lines the exporting rank gathered
    /// (`sdk::profile::gather`). `false` without traces.
    pub(crate) fn export_span(&self, span: opentelemetry_sdk::trace::SpanData) -> bool {
        let Some(p) = &self.spans else {
            return false;
        };
        self.counters
            .ended
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        p.on_end(span);
        true
    }

    /// A meter of this pipeline's meter provider (for lens's own
    /// instruments, e.g. GPU metrics).
    pub(crate) fn meter(&self) -> Option<opentelemetry::metrics::Meter> {
        use opentelemetry::metrics::MeterProvider as _;
        self.meter_provider.as_ref().map(|mp| mp.meter(SCOPE_NAME))
    }

    /// The metric and log providers' flush (or shutdown) as tasks for
    /// helper threads: the SDK's own calls take no deadline.
    fn sdk_tasks(&self, shutdown: bool, timeout: Duration) -> Vec<Task> {
        let mut tasks: Vec<Task> = Vec::new();
        if let Some(mp) = self.meter_provider.clone() {
            tasks.push((
                "metrics",
                self.busy[0].clone(),
                Box::new(move || match shutdown {
                    true => mp.shutdown_with_timeout(timeout),
                    false => mp.force_flush(),
                }),
            ));
        }
        if let Some(lp) = self.logger_provider.clone() {
            tasks.push((
                "logs",
                self.busy[1].clone(),
                Box::new(move || match shutdown {
                    true => lp.shutdown_with_timeout(timeout),
                    false => lp.force_flush(),
                }),
            ));
        }
        tasks
    }

    /// Flushes every signal, within `timeout` in all; reports what this
    /// flush lost.
    pub(crate) fn flush(&self, timeout: Duration) -> ShutdownReport {
        let deadline = Instant::now() + timeout;
        let before = self.tally();
        let waiting = spawn_all(self.sdk_tasks(false, timeout), "flush");
        let mut troubles = Troubles::new();
        if self.span_sink.is_some() {
            crate::engine::recorder::drain(deadline);
        }
        if let Some(p) = &self.spans {
            if let Err(e) = p.flush_within(timeout) {
                troubles.push(("traces", trouble_of(e)));
            }
        }
        troubles.extend(wait_all(waiting, deadline));
        let logs_lost = self.log_counters.newly_lost(before.logs_emitted);
        self.report(&before, &troubles, timeout, logs_lost)
    }

    /// Shuts every signal down, within `timeout` in all; reports what the
    /// pipeline lost over its whole life.
    pub(crate) fn shutdown(&self, timeout: Duration) -> ShutdownReport {
        let deadline = Instant::now() + timeout;
        // the report names a failure met now; no warning of its own
        self.counters
            .reported
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let waiting = spawn_all(self.sdk_tasks(true, timeout), "shutdown");
        let mut troubles = Troubles::new();
        // lens's own processor meets the deadline by itself: no thread.
        // Then the provider is marked shut down (the processor, finished or
        // given up on, answers at once).
        if let Some(sink) = &self.span_sink {
            crate::engine::recorder::drain(deadline);
            crate::engine::recorder::release_sink(sink);
        }
        if let Some(p) = &self.spans {
            if let Err(e) = p.shutdown_with_timeout(timeout) {
                troubles.push(("traces", trouble_of(e)));
            }
        }
        if let Some(tp) = &self.tracer_provider {
            let _ = tp.shutdown_with_timeout(Duration::ZERO);
        }
        troubles.extend(wait_all(waiting, deadline));
        let c = &self.log_counters;
        let logs_lost = c.emitted().saturating_sub(c.exported());
        self.report(&Default::default(), &troubles, timeout, logs_lost)
    }
}
