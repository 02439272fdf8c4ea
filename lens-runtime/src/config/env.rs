//! Reading `LensConfig` from the environment: each `NEMO_LENS_*` key under
//! the first prefix that sets it, each value checked as it is read.

use super::error::{invalid, ConfigError};
use super::lens::{
    parse_bool, parse_choice, ExporterKind, LensConfig, OtelContext, SpanPath, ENV_PREFIX,
};
use super::validate::{
    check_perfetto_max_bytes, check_rank, check_rate, check_redact_keys, check_spec, check_strategy,
};
use crate::api::groups::SpanGroupFamily;

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
    /// `WANDB_PROJECT`) and validates the result against every family the
    /// program knows ([`span_group_families`](crate::span_group_families):
    /// the base family, every family declared with `define_span_group!`
    /// anywhere in the program, every registered family), so
    /// `NEMO_LENS_SPAN_GROUPS=per_step,layer` needs no code. Unset or blank
    /// variables keep their defaults.
    ///
    /// ```
    /// let cfg = lens::LensConfig::from_env().unwrap();
    /// assert!(cfg.span_group_families.iter().any(|f| f.name() == "megatron"));
    /// ```
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_env_with(&[ENV_PREFIX], &crate::api::groups::span_group_families())
    }

    /// Reads each key under the first prefix that sets it, e.g.
    /// `&["MEGATRON_OTEL_", "NEMO_LENS_"]`, and validates the span-group spec
    /// against the base family plus exactly `families` (pass
    /// [`span_group_families()`](crate::span_group_families) for every family
    /// the program knows, as [`from_env`](Self::from_env) does).
    ///
    /// ```
    /// use lens::LensConfig;
    /// let cfg = LensConfig::from_env_with(&["MEGATRON_OTEL_", "NEMO_LENS_"], &[]).unwrap();
    /// # let _ = cfg;
    /// ```
    pub fn from_env_with(
        prefixes: &[&str],
        families: &[&'static SpanGroupFamily],
    ) -> Result<Self, ConfigError> {
        Self::from_lookup(prefixes, families, crate::vars::raw)
    }

    /// Like [`from_env_with`](Self::from_env_with), reading variables through
    /// `lookup` instead of the process environment (for tests and embedding).
    ///
    /// ```
    /// use lens::LensConfig;
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
        // OTEL_SDK_DISABLED=true switches every signal off, whatever
        // NEMO_LENS_ENABLED says; as the specification asks, any other value
        // is false (and a value other than `false` is warned about)
        if let Some(v) = env.plain("OTEL_SDK_DISABLED") {
            match v.trim().to_ascii_lowercase().as_str() {
                "true" => c.enabled = false,
                "false" => {}
                _other => {
                    #[cfg(feature = "sdk-core")]
                    crate::diag::warn(format_args!(
                        "OTEL_SDK_DISABLED={v:?} is not `true` or `false`; taken as false"
                    ));
                }
            }
        }
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
        otel_exporters(&env, &mut c)?;
        env.opt("RUN_ID", &mut c.run_id);
        env.opt("USER_ID", &mut c.user);
        env.opt("FILE_PATH", &mut c.file_path);
        if let Some((var, v)) = env.get("PERFETTO_MAX_BYTES") {
            c.perfetto_max_bytes = v
                .trim()
                .parse()
                .map_err(|_| invalid(&var, &v, "a whole number of bytes >= 65536"))?;
            check_perfetto_max_bytes(&var, c.perfetto_max_bytes)?;
        }
        env.bool("FLUSH_ON_SIGNAL", &mut c.flush_on_signal)?;
        env.bool("QUIET", &mut c.quiet)?;
        env.bool("GPU_METRICS", &mut c.gpu_metrics)?;
        env.bool("FINE_BUCKETS", &mut c.fine_buckets)?;
        env.bool("PROFILE", &mut c.profile)?;
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
        if let Some((var, v)) = env.get("SPAN_PATH") {
            c.span_path = Some(parse_choice(&var, &v, SpanPath::CHOICES)?);
        }
        if let Some((var, v)) = env.get("OTEL_CONTEXT") {
            c.otel_context = Some(parse_choice(&var, &v, OtelContext::CHOICES)?);
        }
        Ok(c)
    }
}

/// `OTEL_{TRACES,METRICS,LOGS}_EXPORTER`, reconciled with lens's settings:
/// `none` switches that signal off; `otlp` and `console` choose the
/// exporter when `NEMO_LENS_EXPORTER` is not set (which wins when it is),
/// and must then agree, since lens sends every signal to one exporter.
fn otel_exporters<F: Fn(&str) -> Option<String>>(
    env: &Env<'_, F>,
    c: &mut LensConfig,
) -> Result<(), ConfigError> {
    const EXPECTED: &str =
        "one of: otlp, console, none (zipkin, prometheus and the others are not built in)";
    let lens_set = env.get("EXPORTER").is_some();
    let mut chosen: Option<(String, ExporterKind)> = None;
    for (signal, var) in [
        ("traces", "OTEL_TRACES_EXPORTER"),
        ("metrics", "OTEL_METRICS_EXPORTER"),
        ("logs", "OTEL_LOGS_EXPORTER"),
    ] {
        let Some(v) = env.plain(var) else { continue };
        let kind = match v.trim().to_ascii_lowercase().as_str() {
            "none" => {
                match signal {
                    "traces" => c.traces_enabled = false,
                    "metrics" => c.metrics_enabled = false,
                    _ => c.logs_enabled = false,
                }
                continue;
            }
            "otlp" => ExporterKind::Otlp,
            "console" => ExporterKind::Console,
            _ => return Err(invalid(var, &v, EXPECTED)),
        };
        if lens_set {
            continue;
        }
        match &chosen {
            Some((first, k)) if *k != kind => {
                return Err(invalid(
                    var,
                    &v,
                    &format!("the same exporter as {first} (lens sends every signal to one exporter; set NEMO_LENS_EXPORTER to choose it)"),
                ))
            }
            Some(_) => {}
            None => chosen = Some((var.to_owned(), kind)),
        }
    }
    if let Some((_, kind)) = chosen {
        c.exporter = kind;
    }
    Ok(())
}
