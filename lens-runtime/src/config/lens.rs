//! `LensConfig` and its reading from the environment.

use super::error::{invalid, ConfigError};
use crate::api::groups::SpanGroupFamily;
use std::fmt;
use std::str::FromStr;

/// The default environment prefix.
pub(crate) const ENV_PREFIX: &str = "NEMO_LENS_";

const BOOL_CHOICES: &str = "1, 0, true, false, yes, no, on, off (any case)";

/// Where spans, metrics and logs go.
///
/// ```
/// use lens::ExporterKind;
/// assert_eq!("FILE".parse::<ExporterKind>().unwrap(), ExporterKind::File);
/// assert!("jaeger".parse::<ExporterKind>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ExporterKind {
    /// OTLP to a collector (`OTEL_EXPORTER_OTLP_*` variables).
    #[default]
    Otlp,
    /// One compact JSON object per record on stdout.
    Console,
    /// OTLP JSON lines appended to a file (`NEMO_LENS_FILE_PATH`).
    File,
    /// Spans as a native Perfetto trace, `<run>-rank<N>.pftrace`, rotated
    /// by size (`NEMO_LENS_PERFETTO_MAX_BYTES`); metrics and log records go
    /// to the OTLP JSON lines file beside it.
    Perfetto,
}

impl ExporterKind {
    /// Every accepted name.
    pub const CHOICES: &'static str = "otlp, console, file, perfetto";

    /// The name as written in configuration.
    ///
    /// ```
    /// assert_eq!(lens::ExporterKind::Console.as_str(), "console");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            ExporterKind::Otlp => "otlp",
            ExporterKind::Console => "console",
            ExporterKind::File => "file",
            ExporterKind::Perfetto => "perfetto",
        }
    }
}

impl FromStr for ExporterKind {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s.trim().to_ascii_lowercase().as_str() {
            "otlp" => Ok(ExporterKind::Otlp),
            "console" => Ok(ExporterKind::Console),
            "file" => Ok(ExporterKind::File),
            "perfetto" => Ok(ExporterKind::Perfetto),
            _ => Err(()),
        }
    }
}

impl fmt::Display for ExporterKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who builds lens's spans under setup (`NEMO_LENS_SPAN_PATH`).
///
/// ```
/// use lens::SpanPath;
/// assert_eq!("SDK".parse::<SpanPath>().unwrap(), SpanPath::Sdk);
/// assert_eq!(SpanPath::default(), SpanPath::Lens);
/// assert!("fast".parse::<SpanPath>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SpanPath {
    /// Lens's own span recorder (`lens`, the default): records in
    /// per-thread lists, built into spans on the export thread.
    #[default]
    Lens,
    /// The OpenTelemetry SDK's tracer (`sdk`).
    Sdk,
}

impl SpanPath {
    /// Every accepted name.
    pub const CHOICES: &'static str = "lens, sdk";

    /// The name as written in configuration.
    ///
    /// ```
    /// assert_eq!(lens::SpanPath::Sdk.as_str(), "sdk");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            SpanPath::Lens => "lens",
            SpanPath::Sdk => "sdk",
        }
    }
}

impl FromStr for SpanPath {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s.trim().to_ascii_lowercase().as_str() {
            "lens" => Ok(SpanPath::Lens),
            "sdk" => Ok(SpanPath::Sdk),
            _ => Err(()),
        }
    }
}

/// How a span of lens's own path is current in OpenTelemetry
/// (`NEMO_LENS_OTEL_CONTEXT`).
///
/// ```
/// use lens::OtelContext;
/// assert_eq!(" ids ".parse::<OtelContext>().unwrap(), OtelContext::Ids);
/// assert_eq!(OtelContext::default(), OtelContext::Full);
/// assert!("none".parse::<OtelContext>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OtelContext {
    /// A small forwarding span (`full`, the default): raw OpenTelemetry
    /// code can set attributes, events and status on it through
    /// `get_active_span`.
    #[default]
    Full,
    /// Its ids only (`ids`): parenting and propagation work as with
    /// `full`; what raw OpenTelemetry code sets through `get_active_span`
    /// is dropped.
    Ids,
}

impl OtelContext {
    /// Every accepted name.
    pub const CHOICES: &'static str = "full, ids";

    /// The name as written in configuration.
    ///
    /// ```
    /// assert_eq!(lens::OtelContext::Ids.as_str(), "ids");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            OtelContext::Full => "full",
            OtelContext::Ids => "ids",
        }
    }
}

impl FromStr for OtelContext {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s.trim().to_ascii_lowercase().as_str() {
            "full" => Ok(OtelContext::Full),
            "ids" => Ok(OtelContext::Ids),
            _ => Err(()),
        }
    }
}

/// Parses `value` of `variable` as one of `T`'s names (`choices`), or a
/// strict error naming the variable, the value and the choices.
pub(crate) fn parse_choice<T: FromStr>(
    variable: &str,
    value: &str,
    choices: &str,
) -> Result<T, ConfigError> {
    value
        .parse()
        .map_err(|_| invalid(variable, value, &format!("one of: {choices}")))
}

/// The default service name, as the Python library's.
pub(crate) const DEFAULT_SERVICE_NAME: &str = "nemo";

/// The default of [`LensConfig::perfetto_max_bytes`]: 256 MiB.
pub(crate) const PERFETTO_DEFAULT_MAX_BYTES: u64 = 256 * 1024 * 1024;
/// The smallest accepted [`LensConfig::perfetto_max_bytes`]: 64 KiB.
pub(crate) const PERFETTO_MIN_MAX_BYTES: u64 = 64 * 1024;

/// Parses a boolean the way every `NEMO_LENS_*` switch is parsed.
pub(crate) fn parse_bool(variable: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(invalid(variable, value, BOOL_CHOICES)),
    }
}

/// Configuration of lens, mirroring the Python library's `NemoLensConfig`.
/// Build it with [`LensConfig::from_env`] (or a prefixed variant), or start
/// from [`Default`] and set fields; [`LensConfig::validate`] checks it all.
///
/// ```
/// use lens::LensConfig;
/// let mut cfg = LensConfig::default();
/// cfg.enabled = true;
/// cfg.span_groups = "per_step".into();
/// cfg.validate().unwrap();
/// cfg.export_sample_rate = 1.5;
/// assert!(cfg.validate().unwrap_err().to_string().contains("export_sample_rate"));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LensConfig {
    /// Master switch (`NEMO_LENS_ENABLED`, default false).
    pub enabled: bool,
    /// `service.name` (`OTEL_SERVICE_NAME`, default `"nemo"`).
    pub service_name: String,
    /// Which ranks export (`NEMO_LENS_EXPORT_STRATEGY`, default `single_rank`).
    pub export_strategy: String,
    /// The rank `single_rank` exports from; -1 = last (`NEMO_LENS_EXPORT_RANK`).
    pub export_rank: i64,
    /// Fraction of ranks kept by `sampled`, in [0, 1] (`NEMO_LENS_EXPORT_SAMPLE_RATE`).
    pub export_sample_rate: f64,
    /// Use the rank-aware sampler (`NEMO_LENS_SAMPLER_ENABLED`, default false).
    pub sampler_enabled: bool,
    /// Export traces (`NEMO_LENS_TRACES_ENABLED`, default true).
    pub traces_enabled: bool,
    /// Export metrics (`NEMO_LENS_METRICS_ENABLED`, default true).
    pub metrics_enabled: bool,
    /// Export logs (`NEMO_LENS_LOGS_ENABLED`, default false).
    pub logs_enabled: bool,
    /// Span-group spec (`NEMO_LENS_SPAN_GROUPS`, default `"default"`).
    pub span_groups: String,
    /// Exporter (`NEMO_LENS_EXPORTER`, default otlp).
    pub exporter: ExporterKind,
    /// Run id (`NEMO_LENS_RUN_ID`; setup falls back to `SLURM_JOB_ID`, then random).
    pub run_id: Option<String>,
    /// User id (`NEMO_LENS_USER_ID`).
    pub user: Option<String>,
    /// W&B entity (`WANDB_ENTITY`).
    pub wandb_entity: Option<String>,
    /// W&B project (`WANDB_PROJECT`).
    pub wandb_project: Option<String>,
    /// Path of the `file` exporter's OTLP JSON lines (`NEMO_LENS_FILE_PATH`;
    /// `{rank}` is replaced by the rank). Default:
    /// `lens-telemetry/<run_id>-rank<rank>.otlp.jsonl` under the working directory.
    pub file_path: Option<String>,
    /// With the `perfetto` exporter, the size after which a trace file is
    /// closed and the next one started (`NEMO_LENS_PERFETTO_MAX_BYTES`;
    /// default 256 MiB, at least 64 KiB). The trace files sit beside the
    /// JSON lines file: `lens-telemetry/<run_id>-rank<rank>.pftrace`, then
    /// `.1.pftrace`, `.2.pftrace`, …
    pub perfetto_max_bytes: u64,
    /// Leave out the one line setup writes to stderr on an exporting rank
    /// (run id, rank, span groups, destination) (`NEMO_LENS_QUIET`).
    pub quiet: bool,
    /// Flush telemetry on SIGTERM / SIGINT before the process dies
    /// (`NEMO_LENS_FLUSH_ON_SIGNAL`, default false).
    pub flush_on_signal: bool,
    /// Register GPU instruments read through NVML (`NEMO_LENS_GPU_METRICS`,
    /// default false).
    pub gpu_metrics: bool,
    /// Give the histograms the Python library shares (`rl.*`, `gym.*`
    /// durations, `gen_ai.server.request.duration`,
    /// `gen_ai.client.token.usage`) finer bucket boundaries
    /// ([`crate::fine_bucket_boundaries`]) through a view
    /// (`NEMO_LENS_FINE_BUCKETS`, default false: the SDK's default
    /// boundaries, the Python library's, so both languages' points sum into
    /// one series).
    pub fine_buckets: bool,
    /// On a rank that does not export, with the `file` or `perfetto`
    /// exporter, keep a compact per-step phase profile (each step's direct
    /// children: name, offset, duration) and append it to
    /// `<run_id>-rank<rank>.profile.jsonl` beside the rank's would-be OTLP
    /// file, so `lens report` sees every rank (`NEMO_LENS_PROFILE`, default
    /// true). No thread and no connection either way.
    pub profile: bool,
    /// Families the span-group spec resolves against (the base family is
    /// always included).
    pub span_group_families: Vec<&'static SpanGroupFamily>,
    /// Extra attribute keys whose string values are redacted, on top of the
    /// built-in rule (`NEMO_LENS_REDACT_KEYS`, comma-separated, blank parts
    /// ignored; default none). A key matches an attribute key equal to it or
    /// to a run of its dot-separated segments, ASCII case-insensitive
    /// (`email` redacts `user.email`); see
    /// `is_redacted_key_with`. A key
    /// may not contain whitespace, `=` or `,`.
    ///
    /// ```
    /// use lens::LensConfig;
    /// let cfg = LensConfig::from_lookup(&["NEMO_LENS_"], &[], |v| {
    ///     (v == "NEMO_LENS_REDACT_KEYS").then(|| " email, ,user.ssn ".to_owned())
    /// }).unwrap();
    /// assert_eq!(cfg.redact_keys, ["email", "user.ssn"]);
    /// let err = LensConfig::from_lookup(&["NEMO_LENS_"], &[], |v| {
    ///     (v == "NEMO_LENS_REDACT_KEYS").then(|| "email,api key".to_owned())
    /// }).unwrap_err();
    /// assert!(err.to_string().contains("NEMO_LENS_REDACT_KEYS"));
    /// ```
    pub redact_keys: Vec<String>,
    /// Who builds spans under setup: lens's own recorder or the
    /// OpenTelemetry SDK's tracer (`NEMO_LENS_SPAN_PATH`). `None` (the
    /// default): setup reads `NEMO_LENS_SPAN_PATH`, else
    /// [`SpanPath::Lens`]. A span processor added in code
    /// (`TelemetryBuilder::with_span_processor`) takes the SDK's path
    /// whatever this says.
    ///
    /// ```
    /// use lens::{LensConfig, SpanPath};
    /// let cfg = LensConfig::from_lookup(&["NEMO_LENS_"], &[], |v| {
    ///     (v == "NEMO_LENS_SPAN_PATH").then(|| "sdk".to_owned())
    /// }).unwrap();
    /// assert_eq!(cfg.span_path, Some(SpanPath::Sdk));
    /// let err = LensConfig::from_lookup(&["NEMO_LENS_"], &[], |v| {
    ///     (v == "NEMO_LENS_SPAN_PATH").then(|| "fast".to_owned())
    /// }).unwrap_err();
    /// assert!(err.to_string().contains("NEMO_LENS_SPAN_PATH"));
    /// ```
    pub span_path: Option<SpanPath>,
    /// How a span of lens's own path is current in OpenTelemetry
    /// (`NEMO_LENS_OTEL_CONTEXT`). `None` (the default): setup reads
    /// `NEMO_LENS_OTEL_CONTEXT`, else [`OtelContext::Full`].
    ///
    /// ```
    /// use lens::{LensConfig, OtelContext};
    /// let mut cfg = LensConfig::default();
    /// cfg.otel_context = Some(OtelContext::Ids);
    /// cfg.validate().unwrap();
    /// ```
    pub otel_context: Option<OtelContext>,
}

impl Default for LensConfig {
    fn default() -> Self {
        LensConfig {
            enabled: false,
            service_name: DEFAULT_SERVICE_NAME.to_owned(),
            export_strategy: "single_rank".to_owned(),
            export_rank: -1,
            export_sample_rate: 1.0,
            sampler_enabled: false,
            traces_enabled: true,
            metrics_enabled: true,
            logs_enabled: false,
            span_groups: "default".to_owned(),
            exporter: ExporterKind::Otlp,
            run_id: None,
            user: None,
            wandb_entity: None,
            wandb_project: None,
            file_path: None,
            perfetto_max_bytes: PERFETTO_DEFAULT_MAX_BYTES,
            quiet: false,
            flush_on_signal: false,
            gpu_metrics: false,
            fine_buckets: false,
            profile: true,
            span_group_families: Vec::new(),
            redact_keys: Vec::new(),
            span_path: None,
            otel_context: None,
        }
    }
}

#[cfg(test)]
mod examples {
    //! Examples of crate-private items, kept as unit tests.

    #[test]
    fn parse_bool() {
        use crate::config::lens::parse_bool;
        assert_eq!(parse_bool("X", "On"), Ok(true));
        assert_eq!(parse_bool("X", "0"), Ok(false));
        assert!(parse_bool("NEMO_LENS_ENABLED", "maybe")
            .unwrap_err()
            .to_string()
            .contains("NEMO_LENS_ENABLED"));
    }
}
