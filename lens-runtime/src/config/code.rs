//! The settings given in code through `TelemetryBuilder`, each over its
//! `OTEL_*` variable (code over environment over default), and the checks
//! they share with those variables.

use super::lens::{OtelContext, SpanPath};
use super::otel::{in_a_day, invalid, OtlpProtocol};
use super::ConfigError;
use opentelemetry_sdk::trace::Sampler;
use std::time::Duration;

/// The settings given in code (`TelemetryBuilder`), each over its
/// `OTEL_*` variable: code over environment over default.
#[derive(Debug, Default, Clone)]
pub(crate) struct CodeSettings {
    /// `with_endpoint`, over `OTEL_EXPORTER_OTLP_[<SIGNAL>_]ENDPOINT`.
    pub(crate) endpoint: Option<String>,
    /// `with_otlp_protocol`, over `OTEL_EXPORTER_OTLP_[<SIGNAL>_]PROTOCOL`.
    pub(crate) protocol: Option<OtlpProtocol>,
    /// `with_export_timeout`, over `OTEL_BSP_EXPORT_TIMEOUT` and
    /// `OTEL_EXPORTER_OTLP_[<SIGNAL>_]TIMEOUT`.
    pub(crate) export_timeout: Option<Duration>,
    /// `with_sampler`, over `OTEL_TRACES_SAMPLER(_ARG)`.
    pub(crate) sampler: Option<Sampler>,
    /// `LensConfig::span_path`, over `NEMO_LENS_SPAN_PATH`.
    pub(crate) span_path: Option<SpanPath>,
    /// `LensConfig::otel_context`, over `NEMO_LENS_OTEL_CONTEXT`.
    pub(crate) otel_context: Option<OtelContext>,
    /// `with_header`, over the same keys of
    /// `OTEL_EXPORTER_OTLP_[<SIGNAL>_]HEADERS`, in the order given.
    pub(crate) headers: Vec<(String, String)>,
}

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
