//! The OTLP exporters (gRPC through tonic, HTTP through reqwest) and where
//! they send: the standard `OTEL_EXPORTER_OTLP_*` variables, with TLS for
//! `https://` endpoints (the `tls` feature).

use super::{OnRuntime, OtlpProtocol};
use tokio::runtime::Handle;

/// One OTLP signal, as its variables name it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Signal {
    /// For messages: `trace`, `metric`, `log`.
    pub(crate) name: &'static str,
    /// The infix of the per-signal variables: `TRACES`, `METRICS`, `LOGS`.
    pub(crate) var: &'static str,
}

const TRACES: Signal = Signal {
    name: "trace",
    var: "TRACES",
};
const METRICS: Signal = Signal {
    name: "metric",
    var: "METRICS",
};
const LOGS: Signal = Signal {
    name: "log",
    var: "LOGS",
};

impl Signal {
    /// `OTEL_EXPORTER_OTLP_<SIGNAL>_<setting>` if set, else
    /// `OTEL_EXPORTER_OTLP_<setting>`: the value and the variable it came
    /// from.
    pub(crate) fn setting(self, setting: &str) -> Option<(String, String)> {
        [
            format!("OTEL_EXPORTER_OTLP_{}_{setting}", self.var),
            format!("OTEL_EXPORTER_OTLP_{setting}"),
        ]
        .into_iter()
        .find_map(|name| crate::config::otel::env(&name).map(|v| (v.trim().to_owned(), name)))
    }

    /// The endpoint this signal's exporter uses and where it came from.
    fn endpoint(self, protocol: OtlpProtocol) -> (String, String) {
        self.setting("ENDPOINT").unwrap_or_else(|| {
            let default = match protocol {
                OtlpProtocol::Grpc => "http://localhost:4317",
                OtlpProtocol::HttpProtobuf | OtlpProtocol::HttpJson => "http://localhost:4318",
            };
            (default.to_owned(), "the OTLP default".to_owned())
        })
    }
}

/// Where the OTLP trace exporter sends spans, for messages: the traces
/// endpoint variable, else the general one, else the protocol's default.
pub(crate) fn otlp_destination(protocol: OtlpProtocol) -> String {
    let name = match protocol {
        OtlpProtocol::Grpc => "grpc",
        OtlpProtocol::HttpProtobuf => "http/protobuf",
        OtlpProtocol::HttpJson => "http/json",
    };
    format!("{} (OTLP {name})", TRACES.endpoint(protocol).0)
}

/// The TLS settings for `signal` when its endpoint is `https://`; `None`
/// for plain `http://`. Without the `tls` feature an `https://` endpoint is
/// an error that says how to get TLS (rather than the exporter's own, which
/// names features of a crate the user never chose).
#[cfg(feature = "tls")]
type Secure = Option<super::tls::Settings>;
#[cfg(not(feature = "tls"))]
type Secure = Option<std::convert::Infallible>;

fn secure(signal: Signal, protocol: OtlpProtocol) -> Result<Secure, String> {
    let (endpoint, from) = signal.endpoint(protocol);
    secure_for(signal, &endpoint, &from)
}

fn secure_for(signal: Signal, endpoint: &str, from: &str) -> Result<Secure, String> {
    let https = endpoint
        .get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("https://"));
    if !https {
        return Ok(None);
    }
    #[cfg(feature = "tls")]
    {
        let _ = from;
        super::tls::Settings::from_env(signal).map(Some)
    }
    #[cfg(not(feature = "tls"))]
    Err(format!(
        "the OTLP {} endpoint {endpoint} (from {from}) is https://, and this build has no TLS: \
         enable the `tls` feature of nemo-lens",
        signal.name
    ))
}

/// The cause of the latest failed OTLP HTTP request, where the exporter's
/// own error says only "network error" (kept by the `tls` HTTP client).
static TRANSPORT_ERROR: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Keeps `cause` as the latest transport failure.
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
pub(crate) fn note_transport_error(cause: String) {
    if let Ok(mut slot) = TRANSPORT_ERROR.lock() {
        *slot = Some(cause);
    }
}

/// The latest transport failure's cause, if one was kept.
pub(crate) fn transport_error() -> Option<String> {
    TRANSPORT_ERROR.lock().ok()?.take()
}

fn build_err(signal: Signal, e: impl std::fmt::Display) -> String {
    format!("cannot build the OTLP {} exporter: {e}", signal.name)
}

/// Builds one OTLP exporter type for `protocol` on lens's export runtime
/// (endpoint, headers, timeout and compression come from the standard
/// `OTEL_EXPORTER_OTLP_*` variables, TLS from the certificate ones): the
/// three signals differ only in the exporter type.
macro_rules! otlp_exporter {
    ($(#[$doc:meta])* $name:ident, $ty:ident, $signal:expr) => {
        $(#[$doc])*
        pub(crate) fn $name(
            protocol: OtlpProtocol,
            handle: &Handle,
        ) -> Result<OnRuntime<opentelemetry_otlp::$ty>, String> {
            use opentelemetry_otlp::{Protocol, WithExportConfig};
            let signal = $signal;
            let tls = secure(signal, protocol)?;
            let _enter = handle.enter();
            let b = opentelemetry_otlp::$ty::builder();
            let e = match protocol {
                OtlpProtocol::Grpc => {
                    let b = b.with_tonic();
                    #[cfg(feature = "tls")]
                    let b = match &tls {
                        Some(t) => {
                            use opentelemetry_otlp::WithTonicConfig;
                            b.with_tls_config(t.grpc())
                        }
                        None => b,
                    };
                    b.build()
                }
                OtlpProtocol::HttpProtobuf | OtlpProtocol::HttpJson => {
                    let p = match protocol {
                        OtlpProtocol::HttpJson => Protocol::HttpJson,
                        _ => Protocol::HttpBinary,
                    };
                    let b = b.with_http().with_protocol(p);
                    #[cfg(feature = "tls")]
                    let b = match &tls {
                        Some(t) => {
                            use opentelemetry_otlp::WithHttpConfig;
                            b.with_http_client(t.http_client(signal)?)
                        }
                        None => b,
                    };
                    b.build()
                }
            }
            .map_err(|e| build_err(signal, e))?;
            let _ = tls;
            Ok(OnRuntime::new(e, handle.clone()))
        }
    };
}

otlp_exporter!(
    /// The OTLP span exporter for `protocol`.
    otlp_spans,
    SpanExporter,
    TRACES
);
otlp_exporter!(
    /// The OTLP metric exporter for `protocol`.
    otlp_metrics,
    MetricExporter,
    METRICS
);
otlp_exporter!(
    /// The OTLP log exporter for `protocol` (the same protocol variables as
    /// traces and metrics are honoured).
    otlp_logs,
    LogExporter,
    LOGS
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_needs_no_tls() {
        for e in [
            "http://localhost:4317",
            "HTTP://collector:4318/v1/traces",
            "localhost:4317",
        ] {
            assert!(secure_for(TRACES, e, "OTEL_EXPORTER_OTLP_ENDPOINT")
                .unwrap()
                .is_none());
        }
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn https_without_the_tls_feature_says_which_feature() {
        let e = secure_for(
            METRICS,
            "HTTPS://api.example:443",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        )
        .unwrap_err();
        assert_eq!(
            e,
            "the OTLP metric endpoint HTTPS://api.example:443 (from OTEL_EXPORTER_OTLP_ENDPOINT) \
             is https://, and this build has no TLS: enable the `tls` feature of nemo-lens"
        );
    }

    #[cfg(feature = "tls")]
    #[test]
    fn https_with_the_tls_feature_reads_the_certificate_variables() {
        // no certificate variables in this process: default roots, no identity
        assert!(secure_for(LOGS, "https://api.example", "x")
            .unwrap()
            .is_some());
    }
}
