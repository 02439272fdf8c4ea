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
    /// ```
    /// let mut cfg = lens::LensConfig::default();
    /// cfg.span_groups = "default,stpe".into();
    /// let msg = cfg.validate().unwrap_err().to_string();
    /// assert!(msg.contains("stpe") && msg.contains("step"));
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.checked(true).map(drop)
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
        SpanGroupSet::resolve(&self.span_groups, &self.span_group_families).map_err(|source| {
            ConfigError::UnknownSpanGroup {
                variable: "span_groups".to_owned(),
                value: self.span_groups.clone(),
                source,
            }
        })
    }
}

pub(super) fn check_spec(
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
