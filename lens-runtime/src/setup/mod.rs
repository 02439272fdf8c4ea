//! `setup_telemetry`: validates the whole configuration on every rank, then
//! installs providers only on ranks that export, and returns a handle that
//! flushes and shuts everything down (also on drop).

use crate::api::groups::{set_enabled_span_groups, SpanGroupSet};
use crate::api::span::{self, open};
use crate::config::strategy::{self, StrategyError, StrategyFn};
mod signal;

use crate::config::{ConfigError, ExporterKind, LensConfig};
use crate::host::resource::{self, Detect};
use crate::sdk::export::batch::{BatchProcessor, BatchSettings};
use crate::sdk::export::{
    self, console, file, Counting, ExportRuntime, OtlpProtocol, SpanCounters,
};
use crate::sdk::ids::ForkSafeIdGenerator;
use crate::sdk::redact::{RedactLogs, RedactSpans, RedactingMeterProvider, Redactor};
use crate::sdk::sampler::{sampler_from_lookup, RankAwareSampler};
use opentelemetry::KeyValue;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::logs::SdkLoggerProvider;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{MeterProviderBuilder, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter, SpanProcessor};
use opentelemetry_sdk::Resource;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Default span queue: large enough for a per-layer `all` preset burst
/// (the SDK's 2048 drops spans in ordinary bursts). `OTEL_BSP_MAX_QUEUE_SIZE`
/// overrides it.
pub const DEFAULT_MAX_QUEUE_SIZE: usize = 65_536;
/// Default export batch (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE` overrides).
pub const DEFAULT_MAX_EXPORT_BATCH_SIZE: usize = 2_048;
/// Default metric export interval (`OTEL_METRIC_EXPORT_INTERVAL`, ms, overrides).
pub const DEFAULT_METRIC_EXPORT_INTERVAL: Duration = Duration::from_secs(10);
/// Time `Drop` gives the shutdown.
pub const DROP_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
/// Deadline of [`TelemetryHandle::force_flush`].
pub const DEFAULT_FLUSH_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `OTEL_BSP_EXPORT_TIMEOUT` (the OpenTelemetry default, 30 s).
pub const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest accepted `OTEL_BSP_MAX_QUEUE_SIZE` (queue memory grows with
/// use; this bounds what a runaway producer can make lens hold).
pub const MAX_QUEUE_SIZE_LIMIT: usize = 1 << 24;
/// The shortest `OTEL_BSP_SCHEDULE_DELAY` (smaller values, 0 included, are
/// raised to it: a zero delay would spin the export thread).
pub const MIN_SCHEDULE_DELAY: Duration = Duration::from_millis(1);
/// The largest accepted `OTEL_BLRP_MAX_QUEUE_SIZE`: the SDK's batch log
/// processor reserves its whole queue up front.
pub const MAX_LOG_QUEUE_SIZE_LIMIT: usize = 1 << 16;
/// The longest accepted `OTEL_EXPORTER_OTLP_*HEADERS` value (the `http`
/// crate panics past 32,768 headers).
pub const MAX_HEADERS_LEN: usize = 64 * 1024;
/// The reason recorded on spans ended by shutdown.
pub const TRUNCATED_REASON: &str = "still open at telemetry shutdown";

/// Handles of enabled setups that are still live (the double-init guard).
static LIVE_HANDLES: AtomicUsize = AtomicUsize::new(0);
/// The generation whose pipeline owns the process-wide state (span groups,
/// tracer slot, global providers, open-span tracking); 0 when none.
static LIVE_GENERATION: AtomicU64 = AtomicU64::new(0);
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

/// Why setup failed. Nothing was installed.
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

type ProcessorFactory =
    Box<dyn FnOnce(Arc<SpanCounters>, BatchSettings, Redactor) -> BatchProcessor + Send>;
type ReaderFactory = Box<dyn FnOnce(MeterProviderBuilder, Duration) -> MeterProviderBuilder + Send>;

/// Sets telemetry up with options beyond the configuration.
///
/// ```
/// use lens_runtime::config::LensConfig;
/// use lens_runtime::setup::TelemetryBuilder;
/// let handle = TelemetryBuilder::new(LensConfig::default(), 0, 1)
///     .with_resource_attribute("team", "pretrain")
///     .install()
///     .unwrap();
/// assert!(!handle.is_exporting()); // disabled by default
/// ```
#[must_use = "call `.install()`"]
pub struct TelemetryBuilder {
    config: LensConfig,
    rank: u32,
    world_size: u32,
    resource_attributes: Vec<KeyValue>,
    redact_keys: Vec<String>,
    span_processor: Option<ProcessorFactory>,
    metric_reader: Option<ReaderFactory>,
    strategy: Option<StrategyFn>,
    allow_reinit: bool,
    k8s_dir: Option<PathBuf>,
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
            .finish()
    }
}

/// Sets telemetry up for `rank` of `world_size` from `config`. See
/// [`TelemetryBuilder`] for more options.
///
/// * disabled: nothing is started, no group is enabled;
/// * enabled, this rank exports: providers, exporters and the groups of the spec;
/// * enabled, this rank does not export: nothing is started (no thread, no
///   socket), no group is enabled.
///
/// The whole configuration is validated first, on every rank.
///
/// ```
/// let cfg = lens_runtime::config::LensConfig::default();
/// let handle = lens_runtime::setup::setup_telemetry(cfg, 0, 1).unwrap();
/// handle.shutdown(std::time::Duration::from_secs(1)).unwrap();
/// ```
pub fn setup_telemetry(
    config: LensConfig,
    rank: u32,
    world_size: u32,
) -> Result<TelemetryHandle, SetupError> {
    TelemetryBuilder::new(config, rank, world_size).install()
}

fn env(var: &str) -> Option<String> {
    std::env::var_os(var)
        .map(|v| v.to_string_lossy().into_owned())
        .filter(|v| !v.trim().is_empty())
}

fn env_number<T: std::str::FromStr>(var: &str, expected: &str) -> Result<Option<T>, ConfigError> {
    match env(var) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| ConfigError::InvalidValue {
                variable: var.to_owned(),
                value: v,
                expected: expected.to_owned(),
            }),
    }
}

/// Everything read from standard `OTEL_*` variables (and the few
/// `NEMO_LENS_*` ones setup alone uses), validated up front.
struct OtelEnv {
    protocols: [OtlpProtocol; 3],
    batch: BatchSettings,
    log_batch: LogBatch,
    export_timeout: Duration,
    metric_interval: Duration,
    signal_flush_timeout: Duration,
}

fn invalid(variable: &str, value: String, expected: &str) -> ConfigError {
    ConfigError::InvalidValue {
        variable: variable.to_owned(),
        value,
        expected: expected.to_owned(),
    }
}

/// A count in `1..=max`.
fn env_count(var: &str, max: usize) -> Result<Option<usize>, ConfigError> {
    let expected = format!("a positive integer at most {max}");
    match env_number::<u64>(var, &expected)? {
        None => Ok(None),
        Some(n) if n >= 1 && n <= max as u64 => Ok(Some(n as usize)),
        Some(n) => Err(invalid(var, n.to_string(), &expected)),
    }
}

/// Milliseconds, at most a day.
fn env_millis(var: &str) -> Result<Option<Duration>, ConfigError> {
    const DAY_MS: u64 = 86_400_000;
    let expected = "a duration in milliseconds (0 to 86400000)";
    match env_number::<u64>(var, expected)? {
        None => Ok(None),
        Some(ms) if ms <= DAY_MS => Ok(Some(Duration::from_millis(ms))),
        Some(ms) => Err(invalid(var, ms.to_string(), expected)),
    }
}

impl OtelEnv {
    fn read(config: &LensConfig) -> Result<Self, ConfigError> {
        let protocols = [
            OtlpProtocol::for_signal("TRACES", env)?,
            OtlpProtocol::for_signal("METRICS", env)?,
            OtlpProtocol::for_signal("LOGS", env)?,
        ];
        let queue = env_count("OTEL_BSP_MAX_QUEUE_SIZE", MAX_QUEUE_SIZE_LIMIT)?
            .unwrap_or(DEFAULT_MAX_QUEUE_SIZE);
        let batch_size = env_count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", MAX_QUEUE_SIZE_LIMIT)?
            .unwrap_or(DEFAULT_MAX_EXPORT_BATCH_SIZE)
            .min(queue);
        let scheduled_delay = env_millis("OTEL_BSP_SCHEDULE_DELAY")?
            .unwrap_or(Duration::from_millis(5_000))
            .max(MIN_SCHEDULE_DELAY);
        let log_queue =
            env_count("OTEL_BLRP_MAX_QUEUE_SIZE", MAX_LOG_QUEUE_SIZE_LIMIT)?.unwrap_or(2_048);
        let log_batch_size =
            env_count("OTEL_BLRP_MAX_EXPORT_BATCH_SIZE", MAX_LOG_QUEUE_SIZE_LIMIT)?
                .unwrap_or(512)
                .min(log_queue);
        let log_batch = LogBatch {
            max_queue_size: log_queue,
            max_export_batch_size: log_batch_size,
            scheduled_delay: env_millis("OTEL_BLRP_SCHEDULE_DELAY")?
                .map(|d| d.max(MIN_SCHEDULE_DELAY)),
        };
        env_millis("OTEL_BLRP_EXPORT_TIMEOUT")?;
        for var in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
            "OTEL_EXPORTER_OTLP_LOGS_HEADERS",
        ] {
            if let Some(v) = env(var).filter(|v| v.len() > MAX_HEADERS_LEN) {
                let shown: String = v.chars().take(40).collect();
                return Err(invalid(
                    var,
                    format!("{shown}… ({} bytes)", v.len()),
                    &format!("at most {MAX_HEADERS_LEN} bytes of key=value pairs"),
                ));
            }
        }
        let export_timeout = env_millis("OTEL_BSP_EXPORT_TIMEOUT")?
            .filter(|d| !d.is_zero())
            .unwrap_or(DEFAULT_EXPORT_TIMEOUT);
        let metric_interval = env_millis("OTEL_METRIC_EXPORT_INTERVAL")?
            .filter(|d| !d.is_zero())
            .unwrap_or(DEFAULT_METRIC_EXPORT_INTERVAL);
        for var in [
            "OTEL_EXPORTER_OTLP_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT",
            "OTEL_EXPORTER_OTLP_LOGS_TIMEOUT",
        ] {
            env_millis(var)?;
        }
        for var in [
            "OTEL_EXPORTER_OTLP_COMPRESSION",
            "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
            "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION",
            "OTEL_EXPORTER_OTLP_LOGS_COMPRESSION",
        ] {
            if let Some(v) = env(var) {
                if !matches!(v.trim().to_ascii_lowercase().as_str(), "gzip" | "none") {
                    return Err(invalid(var, v, "one of: gzip, none"));
                }
            }
        }
        let signal_flush_timeout = match env("NEMO_LENS_SIGNAL_FLUSH_TIMEOUT") {
            None => crate::setup::signal::DEFAULT_SIGNAL_FLUSH_TIMEOUT,
            Some(v) => {
                let expected = "a number of seconds in [0, 3600], e.g. 10 or 2.5";
                match v.trim().parse::<f64>() {
                    Ok(secs) if (0.0..=3600.0).contains(&secs) => Duration::from_secs_f64(secs),
                    _ => return Err(invalid("NEMO_LENS_SIGNAL_FLUSH_TIMEOUT", v, expected)),
                }
            }
        };
        if config.sampler_enabled {
            sampler_from_lookup(env)?;
        }
        Ok(OtelEnv {
            protocols,
            batch: BatchSettings {
                max_queue_size: queue,
                max_export_batch_size: batch_size,
                scheduled_delay,
                flush_timeout: DEFAULT_FLUSH_TIMEOUT,
            },
            log_batch,
            export_timeout,
            metric_interval,
            signal_flush_timeout,
        })
    }
}

impl TelemetryBuilder {
    /// Starts from a configuration for `rank` of `world_size`.
    ///
    /// ```
    /// let b = lens_runtime::setup::TelemetryBuilder::new(lens_runtime::config::LensConfig::default(), 0, 1);
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
        }
    }

    /// Adds a resource attribute; caller attributes override detected ones.
    ///
    /// ```
    /// let b = lens_runtime::setup::TelemetryBuilder::new(Default::default(), 0, 1)
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
    /// use lens_runtime::otel_sdk::trace::InMemorySpanExporter;
    /// let mut cfg = lens_runtime::config::LensConfig::default();
    /// cfg.enabled = true;
    /// let exporter = InMemorySpanExporter::default();
    /// let handle = lens_runtime::setup::TelemetryBuilder::new(cfg, 0, 1)
    ///     .with_span_exporter(exporter.clone())
    ///     .allow_reinit(true)
    ///     .install()
    ///     .unwrap();
    /// drop(lens_runtime::span::start_span("x", Vec::new()));
    /// handle.force_flush().unwrap();
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
    /// use lens_runtime::otel_sdk::metrics::InMemoryMetricExporter;
    /// let b = lens_runtime::setup::TelemetryBuilder::new(Default::default(), 0, 1)
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
    /// let b = lens_runtime::setup::TelemetryBuilder::new(Default::default(), 3, 8)
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
    /// let b = lens_runtime::setup::TelemetryBuilder::new(Default::default(), 0, 1)
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
    /// let b = lens_runtime::setup::TelemetryBuilder::new(Default::default(), 0, 1).allow_reinit(true);
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
    /// let b = lens_runtime::setup::TelemetryBuilder::new(Default::default(), 0, 1).flush_on_signal(true);
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
    /// let b = lens_runtime::setup::TelemetryBuilder::new(Default::default(), 0, 1).gpu_metrics(true);
    /// # let _ = b;
    /// ```
    pub fn gpu_metrics(mut self, on: bool) -> Self {
        self.config.gpu_metrics = on;
        self
    }

    /// Reads Kubernetes service-account files from `dir` (for tests).
    ///
    /// ```
    /// let b = lens_runtime::setup::TelemetryBuilder::new(Default::default(), 0, 1)
    ///     .with_k8s_service_account_dir("/tmp/sa");
    /// # let _ = b;
    /// ```
    pub fn with_k8s_service_account_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.k8s_dir = Some(dir.into());
        self
    }

    /// Validates everything, then installs what this rank needs.
    ///
    /// ```
    /// let handle = lens_runtime::setup::TelemetryBuilder::new(Default::default(), 0, 1).install().unwrap();
    /// assert!(!handle.is_exporting());
    /// ```
    pub fn install(mut self) -> Result<TelemetryHandle, SetupError> {
        // 1. validate everything, on every rank, before anything is installed
        let extra = std::mem::take(&mut self.redact_keys);
        self.config.redact_keys.extend(extra);
        self.config
            .validate()
            .or_else(|e| match (&e, &self.strategy) {
                // a custom strategy replaces the named one
                (ConfigError::InvalidValue { variable, .. }, Some(_))
                    if variable == "export_strategy" =>
                {
                    Ok(())
                }
                _ => Err(e),
            })?;
        let groups = self.config.resolve_span_groups()?;
        let otel_env = OtelEnv::read(&self.config)?;
        let decide: StrategyFn = match &self.strategy {
            Some(f) => f.clone(),
            None => {
                strategy::should_export(&self.config, 0, 1).map_err(SetupError::Strategy)?;
                Arc::new(|c, r, w| strategy::should_export(c, r, w).unwrap_or(false))
            }
        };
        crate::api::propagation::install_global();
        crate::api::span::install_panic_hook();
        if !self.config.enabled {
            // a disabled setup leaves a live pipeline alone
            if LIVE_HANDLES.load(Ordering::Acquire) == 0 {
                set_enabled_span_groups(&SpanGroupSet::none());
            }
            return Ok(TelemetryHandle::inactive(false, 0));
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
        let generation = NEXT_GENERATION.fetch_add(1, Ordering::Relaxed);
        crate::sdk::fork::install_handler();
        if !decide(&self.config, self.rank, self.world_size) {
            // this rank records nothing: it owns the (empty) process state
            if let Some(previous) = take_over(generation) {
                teardown_globals(previous, false);
            }
            set_enabled_span_groups(&SpanGroupSet::none());
            let h = TelemetryHandle::inactive(true, generation);
            h.holds_install.store(true, Ordering::Relaxed);
            return Ok(h);
        }
        match self.install_exporting(groups, otel_env, generation) {
            Ok(h) => Ok(h),
            Err(e) => {
                LIVE_HANDLES.fetch_sub(1, Ordering::AcqRel);
                Err(e)
            }
        }
    }

    fn install_exporting(
        self,
        groups: SpanGroupSet,
        otel_env: OtelEnv,
        generation: u64,
    ) -> Result<TelemetryHandle, SetupError> {
        let cfg = &self.config;
        let detect = Detect {
            lookup: &env,
            k8s_service_account_dir: self
                .k8s_dir
                .clone()
                .unwrap_or_else(|| resource::K8S_SERVICE_ACCOUNT_DIR.into()),
            use_nvml: true,
        };
        let run_id = resource::resolve_run_id(cfg, &env);
        let attrs = resource::resource_attributes(
            cfg,
            &run_id,
            self.rank,
            self.world_size,
            &self.resource_attributes,
            &detect,
        );
        let redactor = Redactor::new(&cfg.redact_keys);
        let mut attrs = attrs;
        redactor.redact_attributes(&mut attrs);
        let res = Resource::builder_empty().with_attributes(attrs).build();

        let needs_otlp = cfg.exporter == ExporterKind::Otlp
            && ((cfg.traces_enabled && self.span_processor.is_none())
                || (cfg.metrics_enabled && self.metric_reader.is_none())
                || cfg.logs_enabled);
        let runtime = if needs_otlp {
            Some(ExportRuntime::new().map_err(|e| {
                SetupError::Exporter(format!("cannot start the export runtime: {e}"))
            })?)
        } else {
            None
        };
        // One exporter factory per configured backend, so each signal's
        // branch is one call.
        enum Backend {
            File(Arc<file::Sink>),
            Console,
            Otlp(tokio::runtime::Handle),
        }
        let file_path =
            (cfg.exporter == ExporterKind::File).then(|| file_path(cfg, &run_id, self.rank));
        let backend = match (&file_path, &runtime) {
            (Some(p), _) => Backend::File(file::Sink::file(p).map_err(|e| {
                let from = if cfg.file_path.is_some() {
                    "NEMO_LENS_FILE_PATH"
                } else {
                    "the default path, named after the run id (NEMO_LENS_RUN_ID, else SLURM_JOB_ID)"
                };
                let shown: String = p.display().to_string().chars().take(120).collect();
                SetupError::Exporter(format!("cannot open {shown} (from {from}): {e}"))
            })?),
            (None, Some(rt)) => Backend::Otlp(rt.handle()),
            (None, None) => Backend::Console,
        };
        let counters = Arc::new(SpanCounters::default());

        let tracer_provider = if cfg.traces_enabled {
            let processor = match self.span_processor {
                Some(f) => f(counters.clone(), otel_env.batch, redactor.clone()),
                None => match &backend {
                    Backend::File(sink) => batch_processor(
                        file::JsonLines::new(sink.clone(), false),
                        counters.clone(),
                        otel_env.batch,
                        redactor.clone(),
                    ),
                    Backend::Console => batch_processor(
                        console::console(),
                        counters.clone(),
                        otel_env.batch,
                        redactor.clone(),
                    ),
                    Backend::Otlp(h) => {
                        let e = export::otlp_spans(otel_env.protocols[0], h)
                            .map_err(SetupError::Exporter)?
                            .with_timeout(otel_env.export_timeout);
                        batch_processor(e, counters.clone(), otel_env.batch, redactor.clone())
                    }
                },
            };
            let mut b = SdkTracerProvider::builder()
                .with_resource(res.clone())
                .with_id_generator(ForkSafeIdGenerator::new())
                .with_span_processor(CountEnded {
                    inner: processor,
                    counters: counters.clone(),
                });
            if cfg.sampler_enabled {
                let inner = sampler_from_lookup(env)?;
                b = b.with_sampler(RankAwareSampler::new(
                    self.rank,
                    cfg.export_sample_rate,
                    inner,
                ));
            } else if env("OTEL_TRACES_SAMPLER").is_some() {
                b = b.with_sampler(sampler_from_lookup(env)?);
            }
            Some(b.build())
        } else {
            None
        };

        let meter_provider = if cfg.metrics_enabled {
            let b = SdkMeterProvider::builder().with_resource(res.clone());
            let reader = |e| {
                PeriodicReader::builder(e)
                    .with_interval(otel_env.metric_interval)
                    .build()
            };
            let b = match self.metric_reader {
                Some(f) => f(b, otel_env.metric_interval),
                None => match &backend {
                    Backend::File(sink) => {
                        b.with_reader(reader(file::JsonLines::new(sink.clone(), false)))
                    }
                    Backend::Console => b.with_reader(reader(console::console())),
                    Backend::Otlp(h) => b.with_reader(
                        PeriodicReader::builder(
                            export::otlp_metrics(otel_env.protocols[1], h)
                                .map_err(SetupError::Exporter)?,
                        )
                        .with_interval(otel_env.metric_interval)
                        .build(),
                    ),
                },
            };
            Some(b.build())
        } else {
            None
        };

        let logger_provider = if cfg.logs_enabled {
            let b = SdkLoggerProvider::builder().with_resource(res.clone());
            let (cfg, r) = (&otel_env.log_batch, &redactor);
            let b = match &backend {
                Backend::File(sink) => b.with_log_processor(log_processor(
                    file::JsonLines::new(sink.clone(), false),
                    cfg,
                    r,
                )),
                Backend::Console => b.with_log_processor(log_processor(console::console(), cfg, r)),
                Backend::Otlp(h) => b.with_log_processor(log_processor(
                    export::otlp_logs(otel_env.protocols[2], h).map_err(SetupError::Exporter)?,
                    cfg,
                    r,
                )),
            };
            Some(b.build())
        } else {
            None
        };

        // install: from here on nothing fails
        let pipeline = Arc::new(Pipeline {
            tracer_provider,
            meter_provider,
            logger_provider,
            counters: counters.clone(),
            sink: match &backend {
                Backend::File(sink) => Some(sink.clone()),
                _ => None,
            },
            _runtime: runtime,
        });
        if let Some(previous) = take_over(generation) {
            teardown_globals(previous, false);
        }
        if let Some(tp) = &pipeline.tracer_provider {
            span::set_tracer_provider(tp);
            open::set_tracking(true);
        }
        if let Some(mp) = &pipeline.meter_provider {
            // metric attributes are redacted where they are recorded (the
            // SDK's aggregated data cannot be edited before export)
            opentelemetry::global::set_meter_provider(RedactingMeterProvider::new(
                mp.clone(),
                redactor.clone(),
            ));
            if cfg.gpu_metrics {
                use opentelemetry::metrics::MeterProvider as _;
                crate::sdk::gpu::register_gpu_metrics(&mp.meter(span::SCOPE_NAME));
            }
        }
        set_enabled_span_groups(&groups);
        if cfg.flush_on_signal {
            let weak = Arc::downgrade(&pipeline);
            crate::setup::signal::set_live(
                generation,
                otel_env.signal_flush_timeout,
                Box::new(move |truncate, timeout| match weak.upgrade() {
                    Some(p) => {
                        if truncate {
                            open::truncate_all(crate::setup::signal::SIGNAL_REASON);
                        }
                        p.flush(timeout)
                    }
                    None => Vec::new(),
                }),
            );
        }
        Ok(TelemetryHandle {
            counters: Some(counters),
            pipeline: Mutex::new(Some(pipeline)),
            generation,
            enabled: true,
            exporting: true,
            file_path,
            holds_install: AtomicBool::new(true),
        })
    }
}

/// Makes `generation` the owner of the process-wide state; returns the
/// generation it replaces (re-init), if any.
fn take_over(generation: u64) -> Option<u64> {
    match LIVE_GENERATION.swap(generation, Ordering::AcqRel) {
        0 => None,
        g => Some(g),
    }
}

/// Releases the process-wide state of a pipeline: span groups off, open
/// spans ended (only when the pipeline is shut down, not replaced), the lens
/// tracer and the global providers reset, the log bridge and the signal
/// hook detached from it.
fn teardown_globals(generation: u64, truncate_open_spans: bool) {
    crate::setup::signal::clear_live(generation);
    set_enabled_span_groups(&SpanGroupSet::none());
    if truncate_open_spans {
        open::truncate_all(TRUNCATED_REASON);
    }
    open::set_tracking(false);
    crate::sdk::logs::deactivate();
    span::clear_tracer_provider();
    opentelemetry::global::set_tracer_provider(
        opentelemetry::trace::noop::NoopTracerProvider::new(),
    );
    opentelemetry::global::set_meter_provider(
        opentelemetry::metrics::noop::NoopMeterProvider::new(),
    );
}

fn file_path(cfg: &LensConfig, run_id: &str, rank: u32) -> PathBuf {
    match &cfg.file_path {
        Some(p) => PathBuf::from(p.replace("{rank}", &rank.to_string())),
        None => Path::new("lens-telemetry").join(format!("{run_id}-rank{rank}.otlp.jsonl")),
    }
}

/// The SDK's batch log processor over `exporter`, with redaction at the last
/// point before export.
fn log_processor<E: opentelemetry_sdk::logs::LogExporter + 'static>(
    exporter: E,
    config: &LogBatch,
    redactor: &Redactor,
) -> opentelemetry_sdk::logs::BatchLogProcessor {
    let mut b = opentelemetry_sdk::logs::BatchConfigBuilder::default()
        .with_max_queue_size(config.max_queue_size)
        .with_max_export_batch_size(config.max_export_batch_size);
    if let Some(d) = config.scheduled_delay {
        b = b.with_scheduled_delay(d);
    }
    opentelemetry_sdk::logs::BatchLogProcessor::builder(RedactLogs::new(exporter, redactor.clone()))
        .with_batch_config(b.build())
        .build()
}

/// `OTEL_BLRP_*`, validated.
#[derive(Debug, Clone, Copy)]
struct LogBatch {
    max_queue_size: usize,
    max_export_batch_size: usize,
    scheduled_delay: Option<Duration>,
}

/// The batch processor over `exporter`: redaction at the last point before
/// export, then counting of what was exported.
fn batch_processor<E: SpanExporter + 'static>(
    exporter: E,
    counters: Arc<SpanCounters>,
    batch: BatchSettings,
    redactor: Redactor,
) -> BatchProcessor {
    BatchProcessor::new(
        RedactSpans::new(Counting::new(exporter, counters.clone()), redactor),
        batch,
        counters,
    )
}

/// Counts spans that ended (offered to the batch processor).
#[derive(Debug)]
struct CountEnded<P> {
    inner: P,
    counters: Arc<SpanCounters>,
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

/// The providers of one exporting setup.
struct Pipeline {
    tracer_provider: Option<SdkTracerProvider>,
    meter_provider: Option<SdkMeterProvider>,
    logger_provider: Option<SdkLoggerProvider>,
    counters: Arc<SpanCounters>,
    /// The telemetry file, with the `file` exporter.
    sink: Option<Arc<file::Sink>>,
    _runtime: Option<ExportRuntime>,
}

type Task = (&'static str, Box<dyn FnOnce() -> OTelSdkResult + Send>);

/// Runs each task on a thread of its own and waits for all of them, at most
/// `timeout` in all. A task still running then is reported by name and left
/// to finish on its own: the caller is never held past the deadline.
fn run_within(tasks: Vec<Task>, timeout: Duration, what: &str) -> Vec<String> {
    let deadline = Instant::now() + timeout;
    let (tx, rx) = std::sync::mpsc::channel();
    let mut waiting = Vec::new();
    for (name, task) in tasks {
        let tx = tx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("lens-{what}"))
            .spawn(move || {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(task))
                    .unwrap_or_else(|_| {
                        Err(opentelemetry_sdk::error::OTelSdkError::InternalFailure(
                            "panicked".into(),
                        ))
                    });
                let _ = tx.send((name, r));
            });
        match spawned {
            Ok(_) => waiting.push(name),
            Err(e) => return vec![format!("{name}: cannot start the {what} thread: {e}")],
        }
    }
    drop(tx);
    let mut errors = Vec::new();
    while !waiting.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((name, r)) => {
                waiting.retain(|n| *n != name);
                if let Err(e) = r {
                    errors.push(format!("{name}: {e}"));
                }
            }
            Err(_) => break,
        }
    }
    for name in waiting {
        errors.push(format!(
            "{name}: {what} did not finish within {timeout:?} (the exporter or collector is not answering)"
        ));
    }
    errors
}

impl Pipeline {
    /// Flushes every signal, within `timeout` in all.
    fn flush(&self, timeout: Duration) -> Vec<String> {
        let mut tasks: Vec<Task> = Vec::new();
        if let Some(tp) = self.tracer_provider.clone() {
            tasks.push(("traces", Box::new(move || tp.force_flush())));
        }
        if let Some(mp) = self.meter_provider.clone() {
            tasks.push(("metrics", Box::new(move || mp.force_flush())));
        }
        if let Some(lp) = self.logger_provider.clone() {
            tasks.push(("logs", Box::new(move || lp.force_flush())));
        }
        run_within(tasks, timeout, "flush")
    }

    /// Shuts every signal down, within `timeout` in all.
    fn shutdown(&self, timeout: Duration) -> Vec<String> {
        let mut tasks: Vec<Task> = Vec::new();
        if let Some(tp) = self.tracer_provider.clone() {
            tasks.push((
                "traces",
                Box::new(move || tp.shutdown_with_timeout(timeout)),
            ));
        }
        if let Some(mp) = self.meter_provider.clone() {
            tasks.push((
                "metrics",
                Box::new(move || mp.shutdown_with_timeout(timeout)),
            ));
        }
        if let Some(lp) = self.logger_provider.clone() {
            tasks.push(("logs", Box::new(move || lp.shutdown_with_timeout(timeout))));
        }
        run_within(tasks, timeout, "shutdown")
    }
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
    enabled: bool,
    exporting: bool,
    file_path: Option<PathBuf>,
    holds_install: AtomicBool,
}

impl fmt::Debug for TelemetryHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelemetryHandle")
            .field("enabled", &self.enabled)
            .field("exporting", &self.exporting)
            .field("file_path", &self.file_path)
            .finish()
    }
}

impl TelemetryHandle {
    fn inactive(enabled: bool, generation: u64) -> Self {
        TelemetryHandle {
            pipeline: Mutex::new(None),
            counters: None,
            generation,
            enabled,
            exporting: false,
            file_path: None,
            holds_install: AtomicBool::new(false),
        }
    }

    /// Whether this rank exports telemetry.
    ///
    /// ```
    /// let h = lens_runtime::setup::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// assert!(!h.is_exporting());
    /// ```
    pub fn is_exporting(&self) -> bool {
        self.exporting
    }

    /// Whether telemetry is enabled in the configuration.
    ///
    /// ```
    /// let h = lens_runtime::setup::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// assert!(!h.is_enabled());
    /// ```
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The OTLP JSON lines file, with the `file` exporter.
    ///
    /// ```
    /// let h = lens_runtime::setup::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// assert!(h.file_path().is_none());
    /// ```
    pub fn file_path(&self) -> Option<&Path> {
        self.file_path.as_deref()
    }

    /// A tracer of the installed provider (a no-op tracer when not exporting).
    ///
    /// ```
    /// let h = lens_runtime::setup::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// use lens_runtime::otel::trace::Tracer;
    /// h.tracer().in_span("raw", |_| {});
    /// ```
    pub fn tracer(&self) -> opentelemetry::global::BoxedTracer {
        opentelemetry::global::tracer(span::SCOPE_NAME)
    }

    /// A meter of the installed provider (a no-op meter when not exporting).
    ///
    /// ```
    /// let h = lens_runtime::setup::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// h.meter().u64_counter("requests").build().add(1, &[]);
    /// ```
    pub fn meter(&self) -> opentelemetry::metrics::Meter {
        opentelemetry::global::meter(span::SCOPE_NAME)
    }

    /// The logger provider, when logs are enabled on an exporting rank.
    ///
    /// ```
    /// let h = lens_runtime::setup::setup_telemetry(Default::default(), 0, 1).unwrap();
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
    /// let h = lens_runtime::setup::setup_telemetry(Default::default(), 0, 1).unwrap();
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
    /// within [`DEFAULT_FLUSH_TIMEOUT`] (see
    /// [`force_flush_within`](Self::force_flush_within)).
    ///
    /// ```
    /// let h = lens_runtime::setup::setup_telemetry(Default::default(), 0, 1).unwrap();
    /// h.force_flush().unwrap();
    /// ```
    pub fn force_flush(&self) -> Result<(), ShutdownError> {
        self.force_flush_within(DEFAULT_FLUSH_TIMEOUT)
    }

    /// Exports everything recorded so far, waiting at most `timeout`; the
    /// error names each signal that did not finish in time.
    ///
    /// ```
    /// let h = lens_runtime::setup::setup_telemetry(Default::default(), 0, 1).unwrap();
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
    /// let h = lens_runtime::setup::setup_telemetry(Default::default(), 0, 1).unwrap();
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
        if crate::sdk::fork::in_child() {
            // the parent's exporter threads do not exist here: nothing to
            // flush, and waiting for them would stall
            std::mem::forget(taken);
            return Ok(());
        }
        let live = LIVE_GENERATION
            .compare_exchange(self.generation, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if live {
            teardown_globals(self.generation, taken.is_some());
        }
        let Some(pipeline) = taken else {
            return Ok(());
        };
        let mut errors = pipeline.shutdown(timeout);
        let c = &pipeline.counters;
        let lost = c.dropped.load(Ordering::Relaxed) + c.failed.load(Ordering::Relaxed);
        let ended = c.ended.load(Ordering::Relaxed);
        let unwritten = pipeline.sink.as_ref().map_or(0, |s| s.dropped_records());
        if unwritten > 0 {
            errors.push(format!(
                "{unwritten} records could not be written to the telemetry file (disk full or file-size limit?)"
            ));
        } else if lost > 0 {
            errors.push(format!(
                "{lost} of {ended} spans were not exported (queue full or exporter unreachable; raise OTEL_BSP_MAX_QUEUE_SIZE or check the collector)"
            ));
        }
        // the export threads hold the last references when a deadline
        // passed; otherwise this frees the providers now
        drop(pipeline);
        for e in &errors {
            crate::diag::warn(format_args!("shutdown: {e}"));
        }
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
