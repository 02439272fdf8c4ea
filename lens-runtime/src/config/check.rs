//! The checks that a setting given in code through `TelemetryBuilder`
//! shares with its `OTEL_*` variable (the same error, naming the method
//! instead of the variable), and the error helpers of the readers.

use super::ConfigError;
use std::time::Duration;

/// The name a code setting is reported under in errors.
pub(crate) const CODE_ENDPOINT: &str = "TelemetryBuilder::with_endpoint";
/// The name a code timeout is reported under in errors.
pub(crate) const CODE_EXPORT_TIMEOUT: &str = "TelemetryBuilder::with_export_timeout";
/// The name a code header is reported under in errors.
pub(crate) const CODE_HEADER: &str = "TelemetryBuilder::with_header";

/// What an OTLP endpoint may be.
const ENDPOINT_EXPECTED: &str = "an http:// or https:// URL such as http://localhost:4317";

/// Checks an OTLP endpoint (`variable` names where it came from): an
/// `http://` or `https://` URL with a host, no whitespace. The same check
/// for the environment and for code.
pub(crate) fn check_endpoint(variable: &str, value: &str) -> Result<(), ConfigError> {
    let v = value.trim();
    let lower = v.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"));
    let ok = match rest {
        Some(rest) => {
            let host = rest.split(['/', '?', '#']).next().unwrap_or("");
            !host.is_empty()
                && !host.starts_with(':')
                && !v.chars().any(|c| c.is_whitespace() || c.is_control())
        }
        None => false,
    };
    match ok {
        true => Ok(()),
        false => Err(invalid(variable, value.to_owned(), ENDPOINT_EXPECTED)),
    }
}

/// Checks an export timeout (`variable` names where it came from): at
/// most a day, as for every `OTEL_*` duration; zero means the default.
pub(crate) fn check_timeout(
    variable: &str,
    timeout: Duration,
) -> Result<Option<Duration>, ConfigError> {
    let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    in_a_day(variable, ms).map(|d| d.filter(|d| !d.is_zero()))
}

/// What a header given in code may be.
const HEADER_EXPECTED: &str = "a name of letters, digits and !#$%&'*+-.^_`|~ (not ending in -bin) \
     and a value of printable ASCII, such as (\"authorization\", \"Bearer t0ken\")";

/// Checks a header given in code: a token name (RFC 9110; gRPC metadata
/// ending in `-bin` is binary and not taken) and a value of printable
/// ASCII or tabs, as both the HTTP and the gRPC transports accept. The
/// value is not shown in the error: it is often a secret.
pub(crate) fn check_header(name: &str, value: &str) -> Result<(), ConfigError> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    let name_ok =
        !name.is_empty() && name.chars().all(token) && !name.to_ascii_lowercase().ends_with("-bin");
    let value_ok = value.chars().all(|c| c == '\t' || (' '..='~').contains(&c));
    match name_ok && value_ok {
        true => Ok(()),
        false => Err(invalid(
            CODE_HEADER,
            format!("{name:?} = <{} bytes, not shown>", value.len()),
            HEADER_EXPECTED,
        )),
    }
}

/// What a duration variable may be.
pub(crate) const MILLIS_EXPECTED: &str = "a duration in milliseconds (0 to 86400000)";

/// The error for `value` of `variable`, which should be `expected`.
pub(crate) fn invalid(variable: &str, value: String, expected: &str) -> ConfigError {
    ConfigError::InvalidValue {
        variable: variable.to_owned(),
        value,
        expected: expected.to_owned(),
    }
}

/// `ms` milliseconds of `var`, if at most a day.
pub(crate) fn in_a_day(var: &str, ms: u64) -> Result<Option<Duration>, ConfigError> {
    const DAY_MS: u64 = 86_400_000;
    match ms <= DAY_MS {
        true => Ok(Some(Duration::from_millis(ms))),
        false => Err(invalid(var, ms.to_string(), MILLIS_EXPECTED)),
    }
}
