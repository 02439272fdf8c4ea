//! Why a configuration value is invalid.

use crate::api::groups::SpanGroupError;
use std::fmt;

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

pub(crate) fn invalid(variable: &str, value: &str, expected: &str) -> ConfigError {
    ConfigError::InvalidValue {
        variable: variable.to_owned(),
        value: value.to_owned(),
        expected: expected.to_owned(),
    }
}
