//! The plan setup consumes: a configuration checked once, on every rank,
//! before anything is installed. A `Plan` exists only for a valid
//! configuration; setup reads nothing else.

use super::lens::LensConfig;
use super::otel::{CodeSettings, OtelEnv};
use super::strategy::{self, StrategyError, StrategyFn};
use super::validate::ValidConfig;
use super::ConfigError;
use crate::api::groups::SpanGroupSet;
use std::sync::Arc;

/// A valid configuration and what follows from it.
pub(crate) struct Plan {
    /// The configuration, every field checked.
    pub(crate) config: LensConfig,
    /// The span groups of `config.span_groups`, resolved once.
    pub(crate) groups: SpanGroupSet,
    /// The `OTEL_*` settings lens applies, read once.
    pub(crate) otel: OtelEnv,
    /// Whether a rank exports: the custom strategy, or the named one
    /// (checked to exist).
    pub(crate) decide: StrategyFn,
}

/// Why a configuration gives no plan.
#[derive(Debug)]
pub(crate) enum PlanError {
    Config(ConfigError),
    Strategy(StrategyError),
}

impl From<ConfigError> for PlanError {
    fn from(e: ConfigError) -> Self {
        PlanError::Config(e)
    }
}

impl Plan {
    /// Checks `config`, the environment and the settings given in `code`;
    /// `custom` replaces the named export strategy (whose name is then not
    /// checked).
    pub(crate) fn new(
        config: LensConfig,
        custom: Option<StrategyFn>,
        code: &CodeSettings,
    ) -> Result<Plan, PlanError> {
        let (config, groups) = ValidConfig::new(config, custom.is_none())?.into_parts();
        // the configuration's choices (in code, or from a prefixed
        // variable) over the unprefixed variables
        let code = CodeSettings {
            span_path: config.span_path,
            otel_context: config.otel_context,
            ..code.clone()
        };
        let otel = OtelEnv::read(&code)?;
        let decide: StrategyFn = match custom {
            Some(f) => f,
            None => {
                strategy::should_export(&config, 0, 1).map_err(PlanError::Strategy)?;
                Arc::new(|c, r, w| strategy::should_export(c, r, w).unwrap_or(false))
            }
        };
        Ok(Plan {
            config,
            groups,
            otel,
            decide,
        })
    }
}
