//! Why a configuration value is invalid.

use crate::api::groups::SpanGroupError;
use std::error::Error;
use std::fmt;

/// A configuration error. Every variant names the variable (or field), the
/// value and what is accepted.
///
/// `{e}` (Display) is this error's own line; [`source`](Error::source)
/// gives the error inside, if any. `{e:?}` (Debug) is the whole chain on
/// one line, which is what `fn main() -> Result<(), Box<dyn Error>>`
/// prints:
///
/// ```
/// use lens::ConfigError;
/// let e = lens::LensConfig::from_lookup(&["NEMO_LENS_"], &[], |k| {
///     (k == "NEMO_LENS_SPAN_GROUPS").then(|| "default,stpe".to_owned())
/// })
/// .unwrap_err();
/// assert_eq!(e.to_string(), r#"invalid value "default,stpe" for NEMO_LENS_SPAN_GROUPS"#);
/// let source = std::error::Error::source(&e).unwrap().to_string();
/// assert!(source.starts_with("unknown span group or preset `stpe`"));
/// assert_eq!(format!("{e:?}"), format!("{e}: {source}"));
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
    /// A span-group spec naming an unknown group or preset.
    #[error("invalid value {value:?} for {variable}")]
    UnknownSpanGroup {
        /// The environment variable or config field.
        variable: String,
        /// The whole spec.
        value: String,
        /// The unknown name and the valid ones.
        source: SpanGroupError,
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
