//! `LensConfig`: the same fields and `NEMO_LENS_*` variables as the Python
//! library's `NemoLensConfig`, parsed strictly and validated up front.

pub mod otel;
pub mod strategy;

use crate::api::groups::{SpanGroupError, SpanGroupFamily, SpanGroupSet};
use std::fmt;
use std::str::FromStr;

/// The default environment prefix.
pub const ENV_PREFIX: &str = "NEMO_LENS_";

/// Built-in export strategy names.
pub const BUILTIN_STRATEGIES: &[&str] =
    &["all_ranks", "single_rank", "sampled", "first_rank_per_node"];

const BOOL_CHOICES: &str = "1, 0, true, false, yes, no, on, off (any case)";

/// Where spans, metrics and logs go.
///
/// ```
/// use lens_runtime::config::ExporterKind;
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
}

impl ExporterKind {
    /// Every accepted name.
    pub const CHOICES: &'static str = "otlp, console, file";

    /// The name as written in configuration.
    ///
    /// ```
    /// assert_eq!(lens_runtime::config::ExporterKind::Console.as_str(), "console");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            ExporterKind::Otlp => "otlp",
            ExporterKind::Console => "console",
            ExporterKind::File => "file",
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
            _ => Err(()),
        }
    }
}

impl fmt::Display for ExporterKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A configuration error. Every variant names the variable (or field), the
/// value and what is accepted.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A value that does not parse.
    InvalidValue {
        /// The environment variable or config field.
        variable: String,
        /// The value given.
        value: String,
        /// What is accepted.
        expected: String,
    },
    /// A span-group spec naming an unknown group or preset.
    UnknownSpanGroup {
        /// The environment variable or config field.
        variable: String,
        /// The whole spec.
        value: String,
        /// The unknown name and the valid ones.
        source: SpanGroupError,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::InvalidValue {
                variable,
                value,
                expected,
            } => write!(
                f,
                "invalid value {value:?} for {variable}; expected {expected}"
            ),
            ConfigError::UnknownSpanGroup {
                variable,
                value,
                source,
            } => write!(f, "invalid value {value:?} for {variable}: {source}"),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::UnknownSpanGroup { source, .. } => Some(source),
            ConfigError::InvalidValue { .. } => None,
        }
    }
}

fn invalid(variable: &str, value: &str, expected: &str) -> ConfigError {
    ConfigError::InvalidValue {
        variable: variable.to_owned(),
        value: value.to_owned(),
        expected: expected.to_owned(),
    }
}

/// Parses a boolean the way every `NEMO_LENS_*` switch is parsed.
///
/// ```
/// use lens_runtime::config::parse_bool;
/// assert_eq!(parse_bool("X", "On"), Ok(true));
/// assert_eq!(parse_bool("X", "0"), Ok(false));
/// assert!(parse_bool("NEMO_LENS_ENABLED", "maybe").unwrap_err().to_string().contains("NEMO_LENS_ENABLED"));
/// ```
pub fn parse_bool(variable: &str, value: &str) -> Result<bool, ConfigError> {
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
/// use lens_runtime::config::LensConfig;
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
    /// Flush telemetry on SIGTERM / SIGINT before the process dies
    /// (`NEMO_LENS_FLUSH_ON_SIGNAL`, default false).
    pub flush_on_signal: bool,
    /// Register GPU instruments read through NVML (`NEMO_LENS_GPU_METRICS`,
    /// default false).
    pub gpu_metrics: bool,
    /// Families the span-group spec resolves against (the base family is
    /// always included).
    pub span_group_families: Vec<&'static SpanGroupFamily>,
    /// Extra attribute keys whose string values are redacted, on top of the
    /// built-in rule (`NEMO_LENS_REDACT_KEYS`, comma-separated, blank parts
    /// ignored; default none). A key matches an attribute key equal to it or
    /// to a run of its dot-separated segments, ASCII case-insensitive
    /// (`email` redacts `user.email`); see
    /// [`is_redacted_key_with`](crate::api::attr::is_redacted_key_with). A key
    /// may not contain whitespace, `=` or `,`.
    ///
    /// ```
    /// use lens_runtime::config::LensConfig;
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
}

impl Default for LensConfig {
    fn default() -> Self {
        LensConfig {
            enabled: false,
            service_name: "nemo".to_owned(),
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
            flush_on_signal: false,
            gpu_metrics: false,
            span_group_families: Vec::new(),
            redact_keys: Vec::new(),
        }
    }
}

/// Reads variables for [`LensConfig::from_lookup`]: tries each prefix in
/// order and remembers which variable a value came from.
struct Env<'a, F> {
    prefixes: &'a [&'a str],
    lookup: F,
}

impl<F: Fn(&str) -> Option<String>> Env<'_, F> {
    /// `(variable, value)` of the first set, non-blank `PREFIX+key`.
    fn get(&self, key: &str) -> Option<(String, String)> {
        self.prefixes.iter().find_map(|p| {
            let var = format!("{p}{key}");
            (self.lookup)(&var)
                .filter(|v| !v.trim().is_empty())
                .map(|v| (var, v))
        })
    }

    fn plain(&self, var: &str) -> Option<String> {
        (self.lookup)(var).filter(|v| !v.trim().is_empty())
    }

    fn bool(&self, key: &str, slot: &mut bool) -> Result<(), ConfigError> {
        if let Some((var, v)) = self.get(key) {
            *slot = parse_bool(&var, &v)?;
        }
        Ok(())
    }

    fn string(&self, key: &str, slot: &mut String) {
        if let Some((_, v)) = self.get(key) {
            *slot = v.trim().to_owned();
        }
    }

    fn opt(&self, key: &str, slot: &mut Option<String>) {
        if let Some((_, v)) = self.get(key) {
            *slot = Some(v.trim().to_owned());
        }
    }
}

impl LensConfig {
    /// Reads `NEMO_LENS_*` (and `OTEL_SERVICE_NAME`, `WANDB_ENTITY`,
    /// `WANDB_PROJECT`) and validates the result against the base family.
    /// Unset or blank variables keep their defaults.
    ///
    /// ```
    /// let cfg = lens_runtime::config::LensConfig::from_env().unwrap();
    /// # let _ = cfg;
    /// ```
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_env_with(&[ENV_PREFIX], &[])
    }

    /// Reads each key under the first prefix that sets it, e.g.
    /// `&["MEGATRON_OTEL_", "NEMO_LENS_"]`, and validates the span-group spec
    /// against the base family plus `families`.
    ///
    /// ```
    /// use lens_runtime::config::LensConfig;
    /// let cfg = LensConfig::from_env_with(&["MEGATRON_OTEL_", "NEMO_LENS_"], &[]).unwrap();
    /// # let _ = cfg;
    /// ```
    pub fn from_env_with(
        prefixes: &[&str],
        families: &[&'static SpanGroupFamily],
    ) -> Result<Self, ConfigError> {
        Self::from_lookup(prefixes, families, |var| {
            std::env::var_os(var).map(|v| v.to_string_lossy().into_owned())
        })
    }

    /// Like [`from_env_with`](Self::from_env_with), reading variables through
    /// `lookup` instead of the process environment (for tests and embedding).
    ///
    /// ```
    /// use lens_runtime::config::LensConfig;
    /// let cfg = LensConfig::from_lookup(&["NEMO_LENS_"], &[], |v| {
    ///     (v == "NEMO_LENS_ENABLED").then(|| "yes".to_owned())
    /// }).unwrap();
    /// assert!(cfg.enabled);
    /// let err = LensConfig::from_lookup(&["NEMO_LENS_"], &[], |v| {
    ///     (v == "NEMO_LENS_EXPORT_RANK").then(|| "last".to_owned())
    /// }).unwrap_err();
    /// assert!(err.to_string().contains("NEMO_LENS_EXPORT_RANK"));
    /// ```
    pub fn from_lookup(
        prefixes: &[&str],
        families: &[&'static SpanGroupFamily],
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let env = Env { prefixes, lookup };
        let mut c = LensConfig {
            span_group_families: families.to_vec(),
            ..LensConfig::default()
        };
        env.bool("ENABLED", &mut c.enabled)?;
        if let Some(v) = env.plain("OTEL_SERVICE_NAME") {
            c.service_name = v.trim().to_owned();
        }
        env.string("EXPORT_STRATEGY", &mut c.export_strategy);
        c.export_strategy = c.export_strategy.to_ascii_lowercase();
        if let Some((var, v)) = env.get("EXPORT_RANK") {
            c.export_rank = v
                .trim()
                .parse()
                .map_err(|_| invalid(&var, &v, "an integer rank >= -1 (-1 = last rank)"))?;
            check_rank(&var, c.export_rank)?;
        }
        if let Some((var, v)) = env.get("EXPORT_SAMPLE_RATE") {
            c.export_sample_rate = v
                .trim()
                .parse()
                .map_err(|_| invalid(&var, &v, "a number in [0, 1]"))?;
            check_rate(&var, c.export_sample_rate)?;
        }
        env.bool("SAMPLER_ENABLED", &mut c.sampler_enabled)?;
        env.bool("TRACES_ENABLED", &mut c.traces_enabled)?;
        env.bool("METRICS_ENABLED", &mut c.metrics_enabled)?;
        env.bool("LOGS_ENABLED", &mut c.logs_enabled)?;
        if let Some((var, v)) = env.get("SPAN_GROUPS") {
            check_spec(&var, &v, families)?;
            c.span_groups = v;
        }
        if let Some((var, v)) = env.get("EXPORTER") {
            c.exporter = v
                .parse()
                .map_err(|()| invalid(&var, &v, &format!("one of: {}", ExporterKind::CHOICES)))?;
        }
        env.opt("RUN_ID", &mut c.run_id);
        env.opt("USER_ID", &mut c.user);
        env.opt("FILE_PATH", &mut c.file_path);
        env.bool("FLUSH_ON_SIGNAL", &mut c.flush_on_signal)?;
        env.bool("GPU_METRICS", &mut c.gpu_metrics)?;
        c.wandb_entity = env.plain("WANDB_ENTITY").map(|v| v.trim().to_owned());
        c.wandb_project = env.plain("WANDB_PROJECT").map(|v| v.trim().to_owned());
        if let Some((var, _)) = env.get("EXPORT_STRATEGY") {
            check_strategy(&var, &c.export_strategy)?;
        }
        if let Some((var, v)) = env.get("REDACT_KEYS") {
            c.redact_keys = v
                .split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
                .collect();
            check_redact_keys(&var, &c.redact_keys)?;
        }
        Ok(c)
    }

    /// Checks every field: span-group spec against the configured families,
    /// sample rate in [0, 1], export rank >= -1, a known export strategy,
    /// a non-empty service name, redaction keys that are non-empty and free
    /// of whitespace, `=` and `,`. Setup calls this on every rank before
    /// anything is installed.
    ///
    /// ```
    /// let mut cfg = lens_runtime::config::LensConfig::default();
    /// cfg.span_groups = "default,stpe".into();
    /// let msg = cfg.validate().unwrap_err().to_string();
    /// assert!(msg.contains("stpe") && msg.contains("step"));
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_spec("span_groups", &self.span_groups, &self.span_group_families)?;
        check_rate("export_sample_rate", self.export_sample_rate)?;
        check_rank("export_rank", self.export_rank)?;
        check_strategy("export_strategy", &self.export_strategy)?;
        check_redact_keys("redact_keys", &self.redact_keys)?;
        if self.service_name.trim().is_empty() {
            return Err(invalid(
                "service_name",
                &self.service_name,
                "a non-empty name",
            ));
        }
        Ok(())
    }

    /// The groups named by `span_groups`, resolved against the configured
    /// families.
    ///
    /// ```
    /// use lens_runtime::groups::base;
    /// let cfg = lens_runtime::config::LensConfig::default();
    /// assert!(cfg.resolve_span_groups().unwrap().contains(&base::JOB));
    /// ```
    pub fn resolve_span_groups(&self) -> Result<SpanGroupSet, ConfigError> {
        SpanGroupSet::resolve(&self.span_groups, &self.span_group_families).map_err(|source| {
            ConfigError::UnknownSpanGroup {
                variable: "span_groups".to_owned(),
                value: self.span_groups.clone(),
                source,
            }
        })
    }
}

fn check_spec(
    variable: &str,
    spec: &str,
    families: &[&'static SpanGroupFamily],
) -> Result<(), ConfigError> {
    SpanGroupSet::resolve(spec, families)
        .map(drop)
        .map_err(|source| ConfigError::UnknownSpanGroup {
            variable: variable.to_owned(),
            value: spec.to_owned(),
            source,
        })
}

fn check_rate(variable: &str, rate: f64) -> Result<(), ConfigError> {
    if (0.0..=1.0).contains(&rate) {
        Ok(())
    } else {
        Err(invalid(variable, &rate.to_string(), "a number in [0, 1]"))
    }
}

fn check_rank(variable: &str, rank: i64) -> Result<(), ConfigError> {
    if rank >= -1 {
        Ok(())
    } else {
        Err(invalid(
            variable,
            &rank.to_string(),
            "an integer rank >= -1 (-1 = last rank)",
        ))
    }
}

/// Every key non-empty, without whitespace, `=` or `,`.
fn check_redact_keys(variable: &str, keys: &[String]) -> Result<(), ConfigError> {
    match keys
        .iter()
        .find(|k| k.is_empty() || k.chars().any(|c| c.is_whitespace() || c == '=' || c == ','))
    {
        None => Ok(()),
        Some(bad) => Err(invalid(
            variable,
            bad,
            "comma-separated attribute keys, each non-empty and without whitespace or '='",
        )),
    }
}

fn check_strategy(variable: &str, name: &str) -> Result<(), ConfigError> {
    if strategy::is_export_strategy_registered(name) {
        Ok(())
    } else {
        Err(invalid(
            variable,
            name,
            &format!(
                "one of: {} (or a registered custom strategy)",
                BUILTIN_STRATEGIES.join(", ")
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |var| {
            vars.iter()
                .find(|(k, _)| *k == var)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn redact_keys_default_empty_and_parsed() {
        assert!(LensConfig::default().redact_keys.is_empty());
        let c = LensConfig::from_lookup(&[ENV_PREFIX], &[], lookup(&[])).unwrap();
        assert!(c.redact_keys.is_empty());
        let c = LensConfig::from_lookup(
            &[ENV_PREFIX],
            &[],
            lookup(&[("NEMO_LENS_REDACT_KEYS", " email ,, user.SSN,")]),
        )
        .unwrap();
        assert_eq!(c.redact_keys, ["email", "user.SSN"]);
        c.validate().unwrap();
        let c = LensConfig::from_lookup(
            &["MEGATRON_OTEL_", ENV_PREFIX],
            &[],
            lookup(&[
                ("MEGATRON_OTEL_REDACT_KEYS", "a"),
                ("NEMO_LENS_REDACT_KEYS", "b"),
            ]),
        )
        .unwrap();
        assert_eq!(c.redact_keys, ["a"], "first prefix wins");
    }

    #[test]
    fn bad_redact_keys_name_the_variable() {
        for bad in ["email,api key", "a=b", "x,y\tz"] {
            let e = LensConfig::from_lookup(&[ENV_PREFIX], &[], move |v: &str| {
                (v == "NEMO_LENS_REDACT_KEYS").then(|| bad.to_owned())
            })
            .unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains("NEMO_LENS_REDACT_KEYS"), "{msg}");
            assert!(msg.contains("without whitespace or '='"), "{msg}");
        }
        for bad in ["", "a,b", "a b", "k=v"] {
            let c = LensConfig {
                redact_keys: vec!["ok".into(), bad.into()],
                ..LensConfig::default()
            };
            let msg = c.validate().unwrap_err().to_string();
            assert!(msg.contains("redact_keys"), "{msg}");
        }
    }
}
