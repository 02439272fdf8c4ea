//! Why a configuration value is invalid.

use crate::api::groups::SpanGroupError;
use std::error::Error;
use std::fmt;

/// A configuration error. Every variant names the variable (or field), the
/// value and what is accepted.
///
/// `{e}` (Display) is one line that says it all: the variable, the value
/// and the valid choices; no variant wraps another error, so `{e:?}`
/// (Debug, what `fn main() -> Result<(), Box<dyn Error>>` prints) is the
/// same line:
///
/// ```
/// use lens::ConfigError;
/// let e = lens::LensConfig::from_lookup(&["NEMO_LENS_"], &[], |k| {
///     (k == "NEMO_LENS_SPAN_GROUPS").then(|| "default,stpe".to_owned())
/// })
/// .unwrap_err();
/// let line = e.to_string();
/// assert!(line.starts_with(r#"invalid value "default,stpe" for NEMO_LENS_SPAN_GROUPS: unknown span group or preset `stpe`"#));
/// assert!(line.contains("step"), "the valid names: {line}");
/// assert!(std::error::Error::source(&e).is_none());
/// assert_eq!(format!("{e:?}"), line);
/// ```
#[derive(Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A value that does not parse.
    #[error("invalid value {value:?} for {variable}; expected {expected}")]
    InvalidValue {
        /// The environment variable or config field.
        variable: String,
        /// The value given.
        value: String,
        /// What is accepted.
        expected: String,
    },
    /// A span-group spec naming an unknown group or preset. Its line names
    /// the valid names (the reason is part of the line, not a source, so
    /// that `{e}` alone tells the user what to write).
    #[error("invalid value {value:?} for {variable}: {reason}")]
    UnknownSpanGroup {
        /// The environment variable or config field.
        variable: String,
        /// The whole spec.
        value: String,
        /// The unknown name and the valid ones.
        reason: SpanGroupError,
    },
}

/// The whole chain: the error's line, then each source's, joined by `: `.
impl fmt::Debug for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_chain(self, f)
    }
}

/// Writes `e` and each of its sources on one line, joined by `: ` (the
/// Debug form of lens's errors: what `main` prints when it returns one).
pub(crate) fn write_chain(e: &dyn Error, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "{e}")?;
    let mut next = e.source();
    while let Some(s) = next {
        write!(f, ": {s}")?;
        next = s.source();
    }
    Ok(())
}

pub(crate) fn invalid(variable: &str, value: &str, expected: &str) -> ConfigError {
    ConfigError::InvalidValue {
        variable: variable.to_owned(),
        value: value.to_owned(),
        expected: expected.to_owned(),
    }
}
