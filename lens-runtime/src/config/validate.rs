//! `LensConfig::validate`: every field checked up front, on every rank.

use super::error::{invalid, ConfigError};
use super::lens::LensConfig;
use super::strategy::{self, BUILTIN_STRATEGIES};
use crate::api::groups::{SpanGroupFamily, SpanGroupSet};

impl LensConfig {
    /// Checks every field: span-group spec against the configured families,
    /// sample rate in [0, 1], export rank >= -1, a known export strategy,
    /// a non-empty service name, redaction keys that are non-empty and free
    /// of whitespace, `=` and `,`. Setup calls this on every rank before
    /// anything is installed.
    ///
    /// A valid configuration comes back as a [`ValidConfig`]: the same
    /// values, with the span groups resolved.
    ///
    /// ```
    /// let mut cfg = lens::LensConfig::default();
    /// let valid = cfg.validate().unwrap();
    /// assert!(valid.span_groups().contains(&lens::groups::JOB));
    /// cfg.span_groups = "default,stpe".into();
    /// // `{:?}`: the error and its source, the unknown name and the valid ones
    /// let msg = format!("{:?}", cfg.validate().unwrap_err());
    /// assert!(msg.contains("stpe") && msg.contains("step"));
    /// ```
    pub fn validate(&self) -> Result<ValidConfig, ConfigError> {
        ValidConfig::new(self.clone(), true)
    }

    /// Every check of [`validate`](Self::validate) (the strategy name only
    /// with `check_strategy`: a custom strategy replaces the named one),
    /// returning the resolved span groups, so that the spec is resolved
    /// once.
    pub(crate) fn checked(&self, check_strategy_name: bool) -> Result<SpanGroupSet, ConfigError> {
        let groups = self.resolve_span_groups()?;
        check_rate("export_sample_rate", self.export_sample_rate)?;
        check_rank("export_rank", self.export_rank)?;
        if check_strategy_name {
            check_strategy("export_strategy", &self.export_strategy)?;
        }
        check_redact_keys("redact_keys", &self.redact_keys)?;
        check_perfetto_max_bytes("perfetto_max_bytes", self.perfetto_max_bytes)?;
        if self.service_name.trim().is_empty() {
            return Err(invalid(
                "service_name",
                &self.service_name,
                "a non-empty name",
            ));
        }
        Ok(groups)
    }

    /// The groups named by `span_groups`, resolved against the configured
    /// families.
    ///
    /// ```
    /// use lens::groups;
    /// let cfg = lens::LensConfig::default();
    /// assert!(cfg.resolve_span_groups().unwrap().contains(&groups::JOB));
    /// ```
    pub fn resolve_span_groups(&self) -> Result<SpanGroupSet, ConfigError> {
        SpanGroupSet::resolve(&self.span_groups, &self.span_group_families).map_err(|reason| {
            ConfigError::UnknownSpanGroup {
                variable: "span_groups".to_owned(),
                value: self.span_groups.clone(),
                reason,
            }
        })
    }
}

/// A [`LensConfig`] whose every field was checked, with its span groups
/// resolved: made only by [`LensConfig::validate`], so holding one means the
/// checks passed. Setup builds one on every rank before installing anything.
///
/// ```
/// let valid = lens::LensConfig::default().validate().unwrap();
/// assert_eq!(valid.config().service_name, "nemo");
/// assert_eq!(valid.span_groups().names(), ["job", "checkpoint", "evaluate"]);
/// let config: lens::LensConfig = valid.into_config();
/// # drop(config);
/// ```
#[derive(Debug, Clone)]
pub struct ValidConfig {
    config: LensConfig,
    groups: SpanGroupSet,
}

impl ValidConfig {
    /// Checks `config` (the export strategy's name only with
    /// `check_strategy_name`: a custom strategy replaces the named one).
    pub(crate) fn new(config: LensConfig, check_strategy_name: bool) -> Result<Self, ConfigError> {
        let groups = config.checked(check_strategy_name)?;
        Ok(ValidConfig { config, groups })
    }

    /// The checked configuration.
    ///
    /// ```
    /// let valid = lens::LensConfig::default().validate().unwrap();
    /// assert!(!valid.config().enabled);
    /// ```
    pub fn config(&self) -> &LensConfig {
        &self.config
    }

    /// The span groups `config().span_groups` names, resolved against the
    /// configured families.
    ///
    /// ```
    /// let valid = lens::LensConfig::default().validate().unwrap();
    /// assert!(valid.span_groups().contains(&lens::groups::CHECKPOINT));
    /// ```
    pub fn span_groups(&self) -> &SpanGroupSet {
        &self.groups
    }

    /// The configuration and its span groups, by value.
    #[cfg(feature = "sdk-core")]
    pub(crate) fn into_parts(self) -> (LensConfig, SpanGroupSet) {
        (self.config, self.groups)
    }

    /// The configuration, by value.
    ///
    /// ```
    /// let cfg = lens::LensConfig::default().validate().unwrap().into_config();
    /// assert_eq!(cfg.span_groups, "default");
    /// ```
    pub fn into_config(self) -> LensConfig {
        self.config
    }
}

pub(super) fn check_spec(
    variable: &str,
    spec: &str,
    families: &[&'static SpanGroupFamily],
) -> Result<(), ConfigError> {
    SpanGroupSet::resolve(spec, families)
        .map(drop)
        .map_err(|reason| ConfigError::UnknownSpanGroup {
            variable: variable.to_owned(),
            value: spec.to_owned(),
            reason,
        })
}

pub(super) fn check_rate(variable: &str, rate: f64) -> Result<(), ConfigError> {
    if (0.0..=1.0).contains(&rate) {
        Ok(())
    } else {
        Err(invalid(variable, &rate.to_string(), "a number in [0, 1]"))
    }
}

pub(super) fn check_rank(variable: &str, rank: i64) -> Result<(), ConfigError> {
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
pub(super) fn check_redact_keys(variable: &str, keys: &[String]) -> Result<(), ConfigError> {
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

pub(super) fn check_strategy(variable: &str, name: &str) -> Result<(), ConfigError> {
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

pub(super) fn check_perfetto_max_bytes(variable: &str, bytes: u64) -> Result<(), ConfigError> {
    if bytes < super::lens::PERFETTO_MIN_MAX_BYTES {
        return Err(invalid(
            variable,
            &bytes.to_string(),
            "a whole number of bytes >= 65536",
        ));
    }
    Ok(())
}
