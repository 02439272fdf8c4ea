//! The standard `OTEL_*` settings lens applies itself (batch processors,
//! export timeouts, OTLP protocols and headers, metric interval) and the
//! signal-flush deadline, read and validated once, before anything is
//! installed.

pub(crate) use super::check::{
    check_endpoint, check_header, check_timeout, CODE_ENDPOINT, CODE_EXPORT_TIMEOUT,
};
use super::check::{in_a_day, invalid, MILLIS_EXPECTED};
use super::lens::{parse_choice, OtelContext, SpanPath};
use super::ConfigError;
use opentelemetry_sdk::trace::{Sampler, SpanLimits};
use std::time::Duration;

/// Default span queue: large enough for a per-layer `all` preset burst
/// (the SDK's 2048 drops spans in ordinary bursts). `OTEL_BSP_MAX_QUEUE_SIZE`
/// overrides it.
pub(crate) const DEFAULT_MAX_QUEUE_SIZE: usize = 65_536;
/// Default span queue of the exporters that write local files (`file`,
/// `perfetto`): the largest accepted, so a burst of 1M spans made faster
/// than the file is written waits in memory instead of being dropped. The
/// queue grows with use and shrinks back once drained; it holds at most
/// this many records of at most two 176-byte slots each (~180 MiB for
/// one-slot records, 352 MiB at worst), only while a burst outruns the
/// disk. `OTEL_BSP_MAX_QUEUE_SIZE` overrides it.
pub(crate) const LOCAL_FILE_MAX_QUEUE_SIZE: usize = MAX_QUEUE_SIZE_LIMIT;
/// Default export batch (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE` overrides).
pub(crate) const DEFAULT_MAX_EXPORT_BATCH_SIZE: usize = 2_048;
/// Default metric export interval (`OTEL_METRIC_EXPORT_INTERVAL`, ms, overrides).
pub(crate) const DEFAULT_METRIC_EXPORT_INTERVAL: Duration = Duration::from_secs(10);
/// Deadline of [`TelemetryHandle::force_flush`].
pub(crate) const DEFAULT_FLUSH_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `OTEL_BSP_EXPORT_TIMEOUT` (the OpenTelemetry default, 30 s).
pub(crate) const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest accepted `OTEL_BSP_MAX_QUEUE_SIZE` (queue memory grows with
/// use; this bounds what a runaway producer can make lens hold).
pub(crate) const MAX_QUEUE_SIZE_LIMIT: usize = 1 << 20;
/// The shortest `OTEL_BSP_SCHEDULE_DELAY` (smaller values, 0 included, are
/// raised to it: a zero delay would spin the export thread).
pub(crate) const MIN_SCHEDULE_DELAY: Duration = Duration::from_millis(1);
/// The largest accepted `OTEL_BLRP_MAX_QUEUE_SIZE`: the SDK's batch log
/// processor reserves its whole queue up front.
pub(crate) const MAX_LOG_QUEUE_SIZE_LIMIT: usize = 1 << 16;
/// The longest accepted `OTEL_EXPORTER_OTLP_*HEADERS` value (the `http`
/// crate panics past 32,768 headers).
pub(crate) const MAX_HEADERS_LEN: usize = 64 * 1024;
/// Default of `NEMO_LENS_SIGNAL_FLUSH_TIMEOUT`.
pub(crate) const DEFAULT_SIGNAL_FLUSH_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) use crate::vars::var as env;

pub(crate) fn env_number<T: std::str::FromStr>(
    var: &str,
    expected: &str,
) -> Result<Option<T>, ConfigError> {
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

/// The settings given in code (`TelemetryBuilder`), each over its
/// `OTEL_*` variable: code over environment over default.
#[derive(Debug, Default, Clone)]
pub(crate) struct CodeSettings {
    /// `with_endpoint`, over `OTEL_EXPORTER_OTLP_[<SIGNAL>_]ENDPOINT`.
    pub(crate) endpoint: Option<String>,
    /// `with_otlp_protocol`, over `OTEL_EXPORTER_OTLP_[<SIGNAL>_]PROTOCOL`.
    pub(crate) protocol: Option<OtlpProtocol>,
    /// `with_export_timeout`, over `OTEL_BSP_EXPORT_TIMEOUT` and
    /// `OTEL_EXPORTER_OTLP_[<SIGNAL>_]TIMEOUT`.
    pub(crate) export_timeout: Option<Duration>,
    /// `with_sampler`, over `OTEL_TRACES_SAMPLER(_ARG)`.
    pub(crate) sampler: Option<Sampler>,
    /// `LensConfig::span_path`, over `NEMO_LENS_SPAN_PATH`.
    pub(crate) span_path: Option<SpanPath>,
    /// `LensConfig::otel_context`, over `NEMO_LENS_OTEL_CONTEXT`.
    pub(crate) otel_context: Option<OtelContext>,
    /// `with_header`, over the same keys of
    /// `OTEL_EXPORTER_OTLP_[<SIGNAL>_]HEADERS`, in the order given.
    pub(crate) headers: Vec<(String, String)>,
}

/// Everything read from standard `OTEL_*` variables (and the few
/// `NEMO_LENS_*` ones setup alone uses) and the settings given in code,
/// validated up front.
pub(crate) struct OtelEnv {
    pub(crate) protocols: [OtlpProtocol; 3],
    pub(crate) batch: BatchSettings,
    /// Whether `OTEL_BSP_MAX_QUEUE_SIZE` was set (else the exporters of
    /// local files get [`LOCAL_FILE_MAX_QUEUE_SIZE`]).
    pub(crate) queue_size_set: bool,
    pub(crate) log_batch: LogBatch,
    pub(crate) export_timeout: Duration,
    /// The OTLP exporters' own timeout, when given in code (else theirs:
    /// `OTEL_EXPORTER_OTLP_[<SIGNAL>_]TIMEOUT`, else 10 s).
    #[cfg_attr(
        not(any(feature = "otlp-grpc", feature = "otlp-http")),
        allow(dead_code) // read by the OTLP exporters only
    )]
    pub(crate) otlp_timeout: Option<Duration>,
    /// The OTLP endpoint given in code, over every endpoint variable.
    pub(crate) endpoint: Option<String>,
    /// The headers given in code, over the same keys of the header
    /// variables (`TelemetryBuilder::with_header`).
    #[cfg_attr(
        not(any(feature = "otlp-grpc", feature = "otlp-http")),
        allow(dead_code) // read by the OTLP exporters only
    )]
    pub(crate) headers: Vec<(String, String)>,
    /// The sampler: in code, else `OTEL_TRACES_SAMPLER(_ARG)`; `None`:
    /// none named (the SDK's default, parent-based always-on).
    pub(crate) sampler: Option<Sampler>,
    /// Whether the sampler is known to be the default,
    /// `parentbased_always_on` (lens's own span path then decides without
    /// calling it).
    pub(crate) default_sampler: bool,
    pub(crate) metric_interval: Duration,
    pub(crate) signal_flush_timeout: Duration,
    /// `OTEL_PROPAGATORS`: which of W3C TraceContext and Baggage the global
    /// propagator carries.
    pub(crate) propagators: Propagators,
    /// Who builds spans: the configuration's `span_path`, else
    /// `NEMO_LENS_SPAN_PATH`, else lens's own recorder.
    pub(crate) span_path: SpanPath,
    /// How a span of lens's path is current in OpenTelemetry: the
    /// configuration's `otel_context`, else `NEMO_LENS_OTEL_CONTEXT`, else
    /// `full`.
    pub(crate) otel_context: OtelContext,
    /// `OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT`, `OTEL_SPAN_EVENT_COUNT_LIMIT`,
    /// `OTEL_SPAN_LINK_COUNT_LIMIT` over the SDK's defaults (128 each), for
    /// both span paths.
    pub(crate) span_limits: SpanLimits,
}

/// What a span count limit may be.
const COUNT_LIMIT_EXPECTED: &str = "a whole number from 0 to 4294967295";

/// The span limits: each `OTEL_SPAN_*_COUNT_LIMIT` (read through `lookup`)
/// over the SDK's default; a value that is not a `u32` is an error naming
/// the variable.
pub(crate) fn span_limits(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<SpanLimits, ConfigError> {
    let mut limits = SpanLimits::default();
    for (var, limit) in [
        (
            "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT",
            &mut limits.max_attributes_per_span,
        ),
        (
            "OTEL_SPAN_EVENT_COUNT_LIMIT",
            &mut limits.max_events_per_span,
        ),
        ("OTEL_SPAN_LINK_COUNT_LIMIT", &mut limits.max_links_per_span),
    ] {
        if let Some(v) = lookup(var).filter(|v| !v.trim().is_empty()) {
            *limit = v
                .trim()
                .parse()
                .map_err(|_| invalid(var, v.clone(), COUNT_LIMIT_EXPECTED))?;
        }
    }
    Ok(limits)
}

/// `NEMO_LENS_SPAN_PATH` and `NEMO_LENS_OTEL_CONTEXT` (read through
/// `lookup`) under `code`'s choices: a choice in code is taken and its
/// variable not read; unset or blank, the defaults; another value than the
/// choices is an error naming the variable.
pub(crate) fn span_path_and_context(
    code: &CodeSettings,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<(SpanPath, OtelContext), ConfigError> {
    fn choice<T: std::str::FromStr + Default>(
        var: &str,
        lookup: &impl Fn(&str) -> Option<String>,
        choices: &str,
    ) -> Result<T, ConfigError> {
        match lookup(var).filter(|v| !v.trim().is_empty()) {
            Some(v) => parse_choice(var, &v, choices),
            None => Ok(T::default()),
        }
    }
    let path = match code.span_path {
        Some(p) => p,
        None => choice("NEMO_LENS_SPAN_PATH", &lookup, SpanPath::CHOICES)?,
    };
    let context = match code.otel_context {
        Some(c) => c,
        None => choice("NEMO_LENS_OTEL_CONTEXT", &lookup, OtelContext::CHOICES)?,
    };
    Ok((path, context))
}

/// The global propagator's parts (`OTEL_PROPAGATORS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Propagators {
    pub(crate) trace_context: bool,
    pub(crate) baggage: bool,
}

impl Propagators {
    /// Accepted values, comma-separated.
    pub(crate) const CHOICES: &'static str =
        "a comma-separated list of tracecontext, baggage, none (b3, jaeger, xray and ottrace are not built in)";

    /// `OTEL_PROPAGATORS` (`lookup`); unset or blank: both, the default.
    pub(crate) fn parse(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let var = "OTEL_PROPAGATORS";
        let Some(raw) = lookup(var).filter(|v| !v.trim().is_empty()) else {
            return Ok(Propagators {
                trace_context: true,
                baggage: true,
            });
        };
        let mut p = Propagators {
            trace_context: false,
            baggage: false,
        };
        for item in raw.split(',').map(|s| s.trim().to_ascii_lowercase()) {
            match item.as_str() {
                "tracecontext" => p.trace_context = true,
                "baggage" => p.baggage = true,
                "none" | "" => {}
                _ => return Err(invalid(var, raw.clone(), Self::CHOICES)),
            }
        }
        Ok(p)
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
    match env_number::<u64>(var, MILLIS_EXPECTED)? {
        None => Ok(None),
        Some(ms) => in_a_day(var, ms),
    }
}

impl OtelEnv {
    /// The batch settings of an exporter that writes a local file: the
    /// queue is [`LOCAL_FILE_MAX_QUEUE_SIZE`] unless
    /// `OTEL_BSP_MAX_QUEUE_SIZE` says otherwise (a local write never waits
    /// on a network, so a larger queue only holds a burst a little longer).
    pub(crate) fn local_file_batch(&self) -> BatchSettings {
        match self.queue_size_set {
            true => self.batch,
            false => BatchSettings {
                max_queue_size: LOCAL_FILE_MAX_QUEUE_SIZE,
                ..self.batch
            },
        }
    }

    /// Reads and checks the variables, then puts `code` over them (checked
    /// as the variables are, with the same errors).
    pub(crate) fn read(code: &CodeSettings) -> Result<Self, ConfigError> {
        let mut protocols = [
            OtlpProtocol::for_signal("TRACES", env)?,
            OtlpProtocol::for_signal("METRICS", env)?,
            OtlpProtocol::for_signal("LOGS", env)?,
        ];
        if let Some(p) = code.protocol {
            protocols = [p; 3];
        }
        for signal in ["", "TRACES_", "METRICS_", "LOGS_"] {
            let var = format!("OTEL_EXPORTER_OTLP_{signal}ENDPOINT");
            if let Some(v) = env(&var).filter(|v| !v.trim().is_empty()) {
                check_endpoint(&var, &v)?;
            }
        }
        if let Some(e) = &code.endpoint {
            check_endpoint(CODE_ENDPOINT, e)?;
        }
        for (name, value) in &code.headers {
            check_header(name, value)?;
        }
        // one parse of `OTEL_TRACES_SAMPLER(_ARG)`, whoever reads it
        let (sampler, default_sampler) = match &code.sampler {
            Some(s) => (Some(s.clone()), false),
            None => (
                match env("OTEL_TRACES_SAMPLER") {
                    Some(_) => Some(sampler_from_lookup(env)?),
                    None => None,
                },
                names_default_sampler(&env),
            ),
        };
        let queue_set = env_count("OTEL_BSP_MAX_QUEUE_SIZE", MAX_QUEUE_SIZE_LIMIT)?;
        let queue = queue_set.unwrap_or(DEFAULT_MAX_QUEUE_SIZE);
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
        let mut export_timeout = env_millis("OTEL_BSP_EXPORT_TIMEOUT")?
            .filter(|d| !d.is_zero())
            .unwrap_or(DEFAULT_EXPORT_TIMEOUT);
        let otlp_timeout = match code.export_timeout {
            Some(t) => check_timeout(CODE_EXPORT_TIMEOUT, t)?,
            None => None,
        };
        if let Some(t) = otlp_timeout {
            export_timeout = t;
        }
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
            None => DEFAULT_SIGNAL_FLUSH_TIMEOUT,
            Some(v) => {
                let expected = "a number of seconds in [0, 3600], e.g. 10 or 2.5";
                match v.trim().parse::<f64>() {
                    Ok(secs) if (0.0..=3600.0).contains(&secs) => Duration::from_secs_f64(secs),
                    _ => return Err(invalid("NEMO_LENS_SIGNAL_FLUSH_TIMEOUT", v, expected)),
                }
            }
        };
        let (span_path, otel_context) = span_path_and_context(code, env)?;
        Ok(OtelEnv {
            protocols,
            batch: BatchSettings {
                max_queue_size: queue,
                max_export_batch_size: batch_size,
                scheduled_delay,
                flush_timeout: DEFAULT_FLUSH_TIMEOUT,
            },
            queue_size_set: queue_set.is_some(),
            log_batch,
            export_timeout,
            otlp_timeout,
            endpoint: code.endpoint.as_ref().map(|e| e.trim().to_owned()),
            headers: code.headers.clone(),
            sampler,
            default_sampler,
            metric_interval,
            signal_flush_timeout,
            propagators: Propagators::parse(env)?,
            span_path,
            otel_context,
            span_limits: span_limits(env)?,
        })
    }
}

/// `OTEL_BLRP_*`, validated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogBatch {
    pub(crate) max_queue_size: usize,
    pub(crate) max_export_batch_size: usize,
    pub(crate) scheduled_delay: Option<Duration>,
}

/// Queue and batch settings (from `OTEL_BSP_*`, validated by the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchSettings {
    /// Spans held at most; more are dropped and counted.
    pub(crate) max_queue_size: usize,
    /// Spans per export call at most.
    pub(crate) max_export_batch_size: usize,
    /// Longest wait before a partial batch is exported.
    pub(crate) scheduled_delay: Duration,
    /// Default deadline of `force_flush` (the SDK calls it without one).
    pub(crate) flush_timeout: Duration,
}

/// An OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// `grpc` (the default).
    Grpc,
    /// `http/protobuf`.
    HttpProtobuf,
    /// `http/json`.
    HttpJson,
}

impl OtlpProtocol {
    /// Accepted spellings.
    pub const CHOICES: &'static str = "grpc, http/protobuf, http/json";

    fn parse(variable: &str, value: &str) -> Result<Self, ConfigError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "grpc" => Ok(OtlpProtocol::Grpc),
            "http/protobuf" => Ok(OtlpProtocol::HttpProtobuf),
            "http/json" => Ok(OtlpProtocol::HttpJson),
            _ => Err(ConfigError::InvalidValue {
                variable: variable.to_owned(),
                value: value.to_owned(),
                expected: format!("one of: {}", Self::CHOICES),
            }),
        }
    }

    /// The protocol for one signal (`TRACES`, `METRICS`, `LOGS`):
    /// `OTEL_EXPORTER_OTLP_<SIGNAL>_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`,
    /// else gRPC.
    ///
    /// ```
    /// use lens::OtlpProtocol;
    /// let p = OtlpProtocol::for_signal("TRACES", |k| (k == "OTEL_EXPORTER_OTLP_PROTOCOL").then(|| "http/json".into())).unwrap();
    /// assert_eq!(p, OtlpProtocol::HttpJson);
    /// assert!(OtlpProtocol::for_signal("LOGS", |_| Some("udp".into())).is_err());
    /// ```
    pub fn for_signal(
        signal: &str,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let specific = format!("OTEL_EXPORTER_OTLP_{signal}_PROTOCOL");
        for var in [specific.as_str(), "OTEL_EXPORTER_OTLP_PROTOCOL"] {
            if let Some(v) = lookup(var).filter(|v| !v.trim().is_empty()) {
                return Self::parse(var, &v);
            }
        }
        Ok(OtlpProtocol::Grpc)
    }
}

/// Whether `OTEL_TRACES_SAMPLER` (read through `lookup`) names the default,
/// `parentbased_always_on` (or is unset).
pub(crate) fn names_default_sampler(lookup: &impl Fn(&str) -> Option<String>) -> bool {
    sampler_name(lookup).is_none()
}

/// The sampler `OTEL_TRACES_SAMPLER` names, lowercased; `None` for the
/// default (unset, empty or `parentbased_always_on`).
fn sampler_name(lookup: &impl Fn(&str) -> Option<String>) -> Option<String> {
    lookup("OTEL_TRACES_SAMPLER")
        .map(|v| v.trim().to_ascii_lowercase())
        .filter(|n| !n.is_empty() && n != "parentbased_always_on")
}

/// The sampler named by `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`
/// (`always_on`, `always_off`, `traceidratio`, `parentbased_always_on`,
/// `parentbased_always_off`, `parentbased_traceidratio`), read through
/// `lookup`; unset: `parentbased_always_on`. Unknown names and bad ratios are
/// errors naming the variable.
pub(crate) fn sampler_from_lookup(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Sampler, ConfigError> {
    let name = sampler_name(&lookup);
    let ratio = || -> Result<f64, ConfigError> {
        match lookup("OTEL_TRACES_SAMPLER_ARG") {
            None => Ok(1.0),
            Some(v) => match v.trim().parse::<f64>() {
                Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
                _ => Err(ConfigError::InvalidValue {
                    variable: "OTEL_TRACES_SAMPLER_ARG".into(),
                    value: v,
                    expected: "a ratio in [0, 1]".into(),
                }),
            },
        }
    };
    Ok(match name.as_deref() {
        None => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
        Some("always_on") => Sampler::AlwaysOn,
        Some("always_off") => Sampler::AlwaysOff,
        Some("traceidratio") => Sampler::TraceIdRatioBased(ratio()?),
        Some("parentbased_always_off") => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
        Some("parentbased_traceidratio") => {
            Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio()?)))
        }
        Some(other) => {
            return Err(ConfigError::InvalidValue {
                variable: "OTEL_TRACES_SAMPLER".into(),
                value: other.to_owned(),
                expected: "one of: always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio".into(),
            })
        }
    })
}
