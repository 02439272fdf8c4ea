//! `setup_telemetry` and its builder: validate everything on every rank,
//! then install what this rank needs.

use super::error::SetupError;
use super::handle::{next_generation, take_over, teardown_globals, TelemetryHandle, LIVE_HANDLES};
use super::signal;
use crate::api::groups::{set_enabled_span_groups, SpanGroupSet};
use crate::config::otel::{env, CodeSettings, OtlpProtocol};
use crate::config::plan::{Plan, PlanError};
use crate::config::strategy::StrategyFn;
use crate::config::LensConfig;
use crate::host::resource::{self};
use crate::sdk::pipeline::{batch_processor, Extras, ProcessorFactory, ReaderFactory};
use opentelemetry::KeyValue;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{Instrument, PeriodicReader, Stream};
use opentelemetry_sdk::trace::{Sampler, SpanExporter, SpanProcessor};
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Sets telemetry up with options beyond the configuration.
///
/// # Precedence
///
/// A setting given here wins over its environment variable, which wins
/// over the default: **code over environment over default**.
///
/// | method | overrides |
/// |---|---|
/// | [`with_endpoint`](Self::with_endpoint) | `OTEL_EXPORTER_OTLP_ENDPOINT` and `OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT` |
/// | [`with_otlp_protocol`](Self::with_otlp_protocol) | `OTEL_EXPORTER_OTLP_PROTOCOL` and `OTEL_EXPORTER_OTLP_<SIGNAL>_PROTOCOL` |
/// | [`with_header`](Self::with_header) | the same header names in `OTEL_EXPORTER_OTLP_HEADERS` and `OTEL_EXPORTER_OTLP_<SIGNAL>_HEADERS` |
/// | [`with_export_timeout`](Self::with_export_timeout) | `OTEL_BSP_EXPORT_TIMEOUT` and `OTEL_EXPORTER_OTLP_[<SIGNAL>_]TIMEOUT` |
/// | [`with_sampler`](Self::with_sampler) | `OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG` |
///
/// [`with_span_processor`](Self::with_span_processor),
/// [`with_metric_reader`](Self::with_metric_reader) and
/// [`with_view`](Self::with_view) add to what the configuration sets up.
/// A value given here is checked as its variable is, with the same error
/// (naming the method instead of the variable), when
/// [`install`](Self::install) runs.
///
/// ```
/// use lens::LensConfig;
/// use lens::TelemetryBuilder;
/// let handle = TelemetryBuilder::new(LensConfig::default(), 0, 1)
///     .with_resource_attribute("team", "pretrain")
///     .install()
///     .unwrap();
/// assert!(!handle.is_exporting()); // disabled by default
/// ```
#[must_use = "call `.install()`"]
pub struct TelemetryBuilder {
    pub(super) config: LensConfig,
    pub(super) rank: u32,
    pub(super) world_size: u32,
    pub(super) resource_attributes: Vec<KeyValue>,
    pub(super) redact_keys: Vec<String>,
    pub(super) span_processor: Option<ProcessorFactory>,
    pub(super) metric_reader: Option<ReaderFactory>,
    pub(super) strategy: Option<StrategyFn>,
    pub(super) allow_reinit: bool,
    pub(super) k8s_dir: Option<PathBuf>,
    pub(super) code: CodeSettings,
    pub(super) extra: Extras,
}

impl fmt::Debug for TelemetryBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelemetryBuilder")
            .field("config", &self.config)
            .field("rank", &self.rank)
            .field("world_size", &self.world_size)
            .field("resource_attributes", &self.resource_attributes)
            .field("custom_span_exporter", &self.span_processor.is_some())
            .field("custom_metric_reader", &self.metric_reader.is_some())
            .field("custom_strategy", &self.strategy.is_some())
            .field("allow_reinit", &self.allow_reinit)
            .field("code", &self.code)
            .field("span_processors", &self.extra.span_processors.len())
            .field("metric_readers", &self.extra.metric_readers.len())
            .field("views", &self.extra.views.len())
            .finish()
    }
}

/// Sets telemetry up for `rank` of `world_size` from `config`. See
/// [`TelemetryBuilder`] for more options.
///
/// * disabled: nothing is started, no group is enabled;
/// * enabled, this rank exports: providers, exporters and the groups of the spec;
/// * enabled, this rank does not export: nothing is started (no thread, no
///   socket); with the `file` or `perfetto` exporter (and
///   `NEMO_LENS_PROFILE`, on by default) the groups of the spec are enabled
///   and each step's phases are appended, on the calling thread, to the
///   rank's small `.profile.jsonl` file; otherwise no group is enabled.
///
/// The whole configuration is validated first, on every rank.
///
/// ```
/// let cfg = lens::LensConfig::default();
/// let handle = lens::setup_telemetry(cfg, 0, 1).unwrap();
/// assert!(handle.shutdown(std::time::Duration::from_secs(1)).is_clean());
/// ```
pub fn setup_telemetry(
    config: LensConfig,
    rank: u32,
    world_size: u32,
) -> Result<TelemetryHandle, SetupError> {
    TelemetryBuilder::new(config, rank, world_size).install()
}

impl TelemetryBuilder {
    /// Starts from a configuration for `rank` of `world_size`.
    ///
    /// ```
    /// let b = lens::TelemetryBuilder::new(lens::LensConfig::default(), 0, 1);
    /// # let _ = b;
    /// ```
    pub fn new(config: LensConfig, rank: u32, world_size: u32) -> Self {
        TelemetryBuilder {
            config,
            rank,
            world_size: world_size.max(1),
            resource_attributes: Vec::new(),
            redact_keys: Vec::new(),
            span_processor: None,
            metric_reader: None,
            strategy: None,
            allow_reinit: false,
            k8s_dir: None,
            code: CodeSettings::default(),
            extra: Extras::default(),
        }
    }

    /// Sends OTLP telemetry to `endpoint`, over `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// and the per-signal `OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT`. As with
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`, it is the base URL: over HTTP,
    /// `/v1/traces`, `/v1/metrics` and `/v1/logs` are appended. Checked
    /// as the variable is (an `http://` or `https://` URL).
    ///
    /// ```
    /// let b = lens::TelemetryBuilder::new(Default::default(), 0, 1)
    ///     .with_endpoint("http://collector.internal:4317");
    /// # let _ = b;
    /// let mut cfg = lens::LensConfig::default();
    /// cfg.enabled = true;
    /// let e = lens::TelemetryBuilder::new(cfg, 0, 1)
    ///     .with_endpoint("collector:4317")
    ///     .install()
    ///     .unwrap_err();
    /// assert!(e.to_string().contains("TelemetryBuilder::with_endpoint"));
    /// ```
    pub fn with_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.code.endpoint = Some(endpoint.into());
        self
    }

    /// Sends the header `name: value` with every OTLP export (gRPC
    /// metadata, or an HTTP header), over the same name in
    /// `OTEL_EXPORTER_OTLP_HEADERS` and the per-signal
    /// `OTEL_EXPORTER_OTLP_<SIGNAL>_HEADERS`; the variables' other headers
    /// are still sent. Call it once per header. The name is a token (gRPC's
    /// binary `-bin` metadata is not taken), the value printable ASCII; a
    /// bad one fails [`install`](Self::install) with an error naming this
    /// method, which does not print the value.
    ///
    /// ```
    /// let b = lens::TelemetryBuilder::new(Default::default(), 0, 1)
    ///     .with_endpoint("https://otlp.example.com")
    ///     .with_header("authorization", "Bearer t0ken")
    ///     .with_header("x-team", "pretrain");
    /// # let _ = b;
    /// let mut cfg = lens::LensConfig::default();
    /// cfg.enabled = true;
    /// let e = lens::TelemetryBuilder::new(cfg, 0, 1)
    ///     .with_header("bad name", "secret")
    ///     .install()
    ///     .unwrap_err();
    /// assert!(e.to_string().contains("TelemetryBuilder::with_header"));
    /// assert!(!e.to_string().contains("secret"));
    /// ```
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.code.headers.push((name.into(), value.into()));
        self
    }

    /// Uses `protocol` for every OTLP signal, over
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` and the per-signal
    /// `OTEL_EXPORTER_OTLP_<SIGNAL>_PROTOCOL`.
    ///
    /// ```
    /// use lens::OtlpProtocol;
    /// let b = lens::TelemetryBuilder::new(Default::default(), 0, 1)
    ///     .with_otlp_protocol(OtlpProtocol::HttpProtobuf)
    ///     .with_endpoint("http://localhost:4318");
    /// # let _ = b;
    /// ```
    pub fn with_otlp_protocol(mut self, protocol: OtlpProtocol) -> Self {
        self.code.protocol = Some(protocol);
        self
    }

    /// Gives one export at most `timeout`, over `OTEL_BSP_EXPORT_TIMEOUT`
    /// (the span processor's) and `OTEL_EXPORTER_OTLP_[<SIGNAL>_]TIMEOUT`
    /// (the OTLP exporters'). Checked as those variables are: at most a
    /// day; zero means the default.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = lens::TelemetryBuilder::new(Default::default(), 0, 1)
    ///     .with_export_timeout(Duration::from_secs(5));
    /// # let _ = b;
    /// ```
    pub fn with_export_timeout(mut self, timeout: Duration) -> Self {
        self.code.export_timeout = Some(timeout);
        self
    }

    /// Samples spans with `sampler`, over `OTEL_TRACES_SAMPLER` and
    /// `OTEL_TRACES_SAMPLER_ARG`. With `NEMO_LENS_SAMPLER_ENABLED` (the
    /// rank sampler), it decides for the ranks that rank sampling keeps.
    ///
    /// ```
    /// use lens::otel_sdk::trace::Sampler;
    /// let b = lens::TelemetryBuilder::new(Default::default(), 0, 1)
    ///     .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(0.1))));
    /// # let _ = b;
    /// ```
    pub fn with_sampler(mut self, sampler: Sampler) -> Self {
        self.code.sampler = Some(sampler);
        self
    }

    /// Adds `processor` to the tracer provider, after lens's own (which
    /// exports): it sees every span lens records. Spans then take the
    /// OpenTelemetry SDK's path, as with `NEMO_LENS_SPAN_PATH=sdk` (lens's
    /// own recorder has no place for other processors).
    ///
    /// ```
    /// use lens::otel_sdk::trace::{InMemorySpanExporter, SimpleSpanProcessor};
    /// let seen = InMemorySpanExporter::default();
    /// let b = lens::TelemetryBuilder::new(Default::default(), 0, 1)
    ///     .with_span_processor(SimpleSpanProcessor::new(seen.clone()));
    /// # let _ = b;
    /// ```
    pub fn with_span_processor<P: SpanProcessor + 'static>(mut self, processor: P) -> Self {
        self.extra
            .span_processors
            .push(Box::new(move |b| b.with_span_processor(processor)));
        self
    }

    /// Adds `reader` to the meter provider, beside lens's own (which
    /// exports at `OTEL_METRIC_EXPORT_INTERVAL`): a second periodic reader,
    /// with its own exporter and interval, gets every instrument too.
    ///
    /// ```
    /// use lens::otel_sdk::metrics::{InMemoryMetricExporter, PeriodicReader};
    /// let reader = PeriodicReader::builder(InMemoryMetricExporter::default()).build();
    /// let b = lens::TelemetryBuilder::new(Default::default(), 0, 1).with_metric_reader(reader);
    /// # let _ = b;
    /// ```
    pub fn with_metric_reader<E: PushMetricExporter>(mut self, reader: PeriodicReader<E>) -> Self {
        self.extra
            .metric_readers
            .push(Box::new(move |b| b.with_reader(reader)));
        self
    }

    /// Adds a metric view: `view` returns the stream an instrument is
    /// exported as (renamed, re-described, another aggregation, dropped
    /// with a cardinality limit of 0), or `None` to leave it alone. Views
    /// apply in the order added, to every reader.
    ///
    /// ```
    /// use lens::otel_sdk::metrics::{Instrument, Stream};
    /// let b = lens::TelemetryBuilder::new(Default::default(), 0, 1).with_view(|i: &Instrument| {
    ///     (i.name() == "lens.step.duration")
    ///         .then(|| Stream::builder().with_name("step_seconds").build().ok())
    ///         .flatten()
    /// });
    /// # let _ = b;
    /// ```
    pub fn with_view<V>(mut self, view: V) -> Self
    where
        V: Fn(&Instrument) -> Option<Stream> + Send + Sync + 'static,
    {
        self.extra.views.push(Arc::new(view));
        self
    }

    /// Adds a resource attribute; caller attributes override detected ones.
    ///
    /// ```
    /// let b = lens::TelemetryBuilder::new(Default::default(), 0, 1)
    ///     .with_resource_attribute("team", "pretrain");
    /// # let _ = b;
    /// ```
    pub fn with_resource_attribute(
        mut self,
        key: &'static str,
        value: impl Into<opentelemetry::Value>,
    ) -> Self {
        self.resource_attributes.push(KeyValue::new(key, value));
        self
    }

    /// Exports spans to `exporter` (through a batch processor) instead of the
    /// configured exporter.
    ///
    /// ```
    /// use lens::otel_sdk::trace::InMemorySpanExporter;
    /// let mut cfg = lens::LensConfig::default();
    /// cfg.enabled = true;
    /// let exporter = InMemorySpanExporter::default();
    /// let handle = lens::TelemetryBuilder::new(cfg, 0, 1)
    ///     .with_span_exporter(exporter.clone())
    ///     .allow_reinit(true)
    ///     .install()
    ///     .unwrap();
    /// drop(lens::span_cm!("x"));
    /// assert!(handle.force_flush().is_clean());
    /// assert_eq!(exporter.get_finished_spans().unwrap().len(), 1);
    /// ```
    pub fn with_span_exporter<E: SpanExporter + 'static>(mut self, exporter: E) -> Self {
        self.span_processor = Some(Box::new(move |counters, batch, redactor| {
            batch_processor(exporter, counters, batch, redactor)
        }));
        self
    }

    /// Exports metrics to `exporter` (through a periodic reader at the
    /// configured interval) instead of the configured exporter.
    ///
    /// ```
    /// use lens::otel_sdk::metrics::InMemoryMetricExporter;
    /// let b = lens::TelemetryBuilder::new(Default::default(), 0, 1)
    ///     .with_metric_exporter(InMemoryMetricExporter::default());
    /// # let _ = b;
    /// ```
    pub fn with_metric_exporter<E: PushMetricExporter>(mut self, exporter: E) -> Self {
        self.metric_reader = Some(Box::new(move |b, interval| {
            b.with_reader(
                PeriodicReader::builder(exporter)
                    .with_interval(interval)
                    .build(),
            )
        }));
        self
    }

    /// Decides export with `decide` instead of the configured strategy name.
    ///
    /// ```
    /// let b = lens::TelemetryBuilder::new(Default::default(), 3, 8)
    ///     .with_export_strategy(|_cfg, rank, _world| rank % 4 == 3);
    /// # let _ = b;
    /// ```
    pub fn with_export_strategy(
        mut self,
        decide: impl Fn(&LensConfig, u32, u32) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.strategy = Some(Arc::new(decide));
        self
    }

    /// Adds keys whose string values are redacted before export, on top of
    /// the built-in rule and `NEMO_LENS_REDACT_KEYS` (see
    /// [`crate::api::attr::is_redacted_key`]): a key matches an attribute key
    /// equal to it or made of whole dot-separated segments of it (`email`
    /// matches `user.email`).
    ///
    /// ```
    /// let b = lens::TelemetryBuilder::new(Default::default(), 0, 1)
    ///     .redact_keys(["email", "user.ssn"]);
    /// # let _ = b;
    /// ```
    pub fn redact_keys<I, S>(mut self, keys: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.redact_keys.extend(keys.into_iter().map(Into::into));
        self
    }

    /// Allows replacing an existing enabled setup (for tests).
    ///
    /// ```
    /// let b = lens::TelemetryBuilder::new(Default::default(), 0, 1).allow_reinit(true);
    /// # let _ = b;
    /// ```
    pub fn allow_reinit(mut self, allow: bool) -> Self {
        self.allow_reinit = allow;
        self
    }

    /// Flushes on SIGTERM / SIGINT before the process dies (also
    /// `NEMO_LENS_FLUSH_ON_SIGNAL=1`).
    ///
    /// ```
    /// let b = lens::TelemetryBuilder::new(Default::default(), 0, 1).flush_on_signal(true);
    /// # let _ = b;
    /// ```
    pub fn flush_on_signal(mut self, on: bool) -> Self {
        self.config.flush_on_signal = on;
        self
    }

    /// Registers GPU instruments read through NVML (also
    /// `NEMO_LENS_GPU_METRICS=1`).
    ///
    /// ```
    /// let b = lens::TelemetryBuilder::new(Default::default(), 0, 1).gpu_metrics(true);
    /// # let _ = b;
    /// ```
    pub fn gpu_metrics(mut self, on: bool) -> Self {
        self.config.gpu_metrics = on;
        self
    }

    /// Reads Kubernetes service-account files from `dir` (for tests).
    ///
    /// ```
    /// let b = lens::TelemetryBuilder::new(Default::default(), 0, 1)
    ///     .with_k8s_service_account_dir("/tmp/sa");
    /// # let _ = b;
    /// ```
    pub fn with_k8s_service_account_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.k8s_dir = Some(dir.into());
        self
    }

    /// The setup a forked child makes from its parent's recipe: the
    /// parent's configuration and placement, always exporting (the parent
    /// did), allowed over the parent's live handle.
    pub(crate) fn for_forked_child(r: &crate::sdk::fork::Recipe) -> Self {
        let mut b = TelemetryBuilder::new(r.config.clone(), r.rank, r.world_size)
            .allow_reinit(true)
            .with_export_strategy(|_, _, _| true);
        b.resource_attributes = r.resource_attributes.clone();
        b.k8s_dir = r.k8s_dir.clone();
        b
    }

    /// Validates everything, then installs what this rank needs.
    ///
    /// ```
    /// let handle = lens::TelemetryBuilder::new(Default::default(), 0, 1).install().unwrap();
    /// assert!(!handle.is_exporting());
    /// ```
    pub fn install(self) -> Result<TelemetryHandle, SetupError> {
        let placement = (
            self.rank,
            self.world_size,
            crate::config::strategy::local_rank_with(crate::vars::var).unwrap_or(0),
        );
        let root = crate::sdk::profile::gather::root(
            &self.config,
            self.strategy.as_ref(),
            self.world_size,
        );
        let mut handle = self.install_inner()?;
        handle.placement = placement;
        handle.gather_root = root;
        Ok(handle)
    }

    fn install_inner(mut self) -> Result<TelemetryHandle, SetupError> {
        // 1. validate everything, on every rank, before anything is installed
        let extra = std::mem::take(&mut self.redact_keys);
        self.config.redact_keys.extend(extra);
        let plan = Plan::new(
            std::mem::take(&mut self.config),
            self.strategy.take(),
            &self.code,
        )
        .map_err(|e| match e {
            PlanError::Config(e) => SetupError::Config(e),
            PlanError::Strategy(e) => SetupError::Strategy(e),
        })?;
        let p = plan.otel.propagators;
        crate::api::propagation::install_global(p.trace_context, p.baggage);
        crate::api::span::install_panic_hook();
        let shared_run_id = crate::host::launcher::job_run_id(plan.config.run_id.as_deref(), &env);
        let run_id = shared_run_id
            .clone()
            .unwrap_or_else(resource::random_run_id);
        if !plan.config.enabled {
            // a disabled setup leaves a live pipeline alone
            if LIVE_HANDLES.load(Ordering::Acquire) == 0 {
                set_enabled_span_groups(&SpanGroupSet::none());
            }
            return Ok(TelemetryHandle::inactive(false, 0, run_id));
        }
        // 2. the double-init guard: holds while any enabled handle is live
        let allow = self.allow_reinit;
        if LIVE_HANDLES
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n == 0 || allow).then_some(n + 1)
            })
            .is_err()
        {
            return Err(SetupError::AlreadyInitialized);
        }
        let generation = next_generation();
        crate::sdk::fork::install_handler();
        if crate::sdk::fork::in_child() {
            // a child forked from a live pipeline sets lens up again: the
            // new pipeline is its own
            crate::sdk::fork::leave_child();
        }
        if !(plan.decide)(&plan.config, self.rank, self.world_size) {
            // this rank exports nothing: it keeps a per-step profile (file
            // exporters, `NEMO_LENS_PROFILE`) or records nothing; either
            // way it owns the process state
            let profiling = self.open_profile(&plan.config, &run_id);
            if let Some(previous) = take_over(generation) {
                signal::clear_live(previous);
                teardown_globals(false);
            }
            if let Some(p) = profiling {
                return Ok(self.install_profile(&plan, generation, run_id, p));
            }
            set_enabled_span_groups(&SpanGroupSet::none());
            let h = TelemetryHandle::inactive(true, generation, run_id);
            h.holds_install.store(true, Ordering::Relaxed);
            return Ok(h);
        }
        if self.world_size > 1 && shared_run_id.is_none() {
            crate::diag::warn(format_args!(
                "no run id shared by the job's ranks (NEMO_LENS_RUN_ID, SLURM_JOB_ID, \
                 TORCHELASTIC_RUN_ID, OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE): rank {} uses \
                 its own random id {run_id}",
                self.rank
            ));
        }
        // what a forked child sets lens up again from: not with a custom
        // processor or reader, which cannot be made twice
        let recipe = (self.span_processor.is_none() && self.metric_reader.is_none()).then(|| {
            let mut config = plan.config.clone();
            config.run_id = Some(run_id.clone());
            config.quiet = true;
            crate::sdk::fork::Recipe {
                config,
                rank: self.rank,
                world_size: self.world_size,
                resource_attributes: self.resource_attributes.clone(),
                k8s_dir: self.k8s_dir.clone(),
            }
        });
        match self.install_exporting(plan, generation, run_id) {
            Ok(h) => {
                crate::sdk::fork::set_recipe(recipe);
                crate::api::span::set_fork_respawn(TelemetryBuilder::respawn_after_fork);
                Ok(h)
            }
            Err(e) => {
                LIVE_HANDLES.fetch_sub(1, Ordering::AcqRel);
                Err(e)
            }
        }
    }
}
