//! The OTLP exporters (gRPC through tonic, HTTP through reqwest) and where
//! they send: the standard `OTEL_EXPORTER_OTLP_*` variables, with TLS for
//! `https://` endpoints (the `tls` feature).

// a build without OTLP keeps this module (its builders say which feature
// is missing); what only the OTLP transports use is unused there
#![cfg_attr(
    not(any(feature = "otlp-grpc", feature = "otlp-http")),
    allow(dead_code)
)]

use super::build_error::BuildError;
use super::endpoint::{Signal, LOGS, METRICS, TRACES};
use super::runtime::OnRuntime;
use crate::config::otel::{OtelEnv, OtlpProtocol};
use tokio::runtime::Handle;

/// Where the OTLP exporters send traces, metrics and logs, for messages:
/// each signal's endpoint variable, else the general one, else the
/// protocol's default.
pub(crate) fn otlp_destinations(otel: &OtelEnv) -> [String; 3] {
    let protocols = otel.protocols;
    let code = otel.endpoint.as_deref();
    let name = |protocol| match protocol {
        OtlpProtocol::Grpc => "grpc",
        OtlpProtocol::HttpProtobuf => "http/protobuf",
        OtlpProtocol::HttpJson => "http/json",
    };
    let one = |signal: Signal, protocol| {
        format!(
            "{} (OTLP {})",
            signal.endpoint(protocol, code).0,
            name(protocol)
        )
    };
    [
        one(TRACES, protocols[0]),
        one(METRICS, protocols[1]),
        one(LOGS, protocols[2]),
    ]
}

/// The TLS settings for `signal` when its endpoint is `https://`; `None`
/// for plain `http://`. Without the `tls` feature an `https://` endpoint is
/// an error that says how to get TLS (rather than the exporter's own, which
/// names features of a crate the user never chose).
#[cfg(feature = "tls")]
type Secure = Option<super::tls::Settings>;
#[cfg(not(feature = "tls"))]
type Secure = Option<std::convert::Infallible>;

fn secure(signal: Signal, protocol: OtlpProtocol, code: Option<&str>) -> Result<Secure, String> {
    let (endpoint, from) = signal.endpoint(protocol, code);
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

/// The client of the OTLP HTTP exporter for `signal`, when lens must
/// give it one: lens's rustls client for `https://` (the `tls` feature),
/// or, with headers given in code, a reqwest client with the timeout the
/// exporter would have used; either sets the code headers on each request.
/// `None`: the exporter's own client.
#[cfg(feature = "otlp-http")]
fn http_client(
    signal: Signal,
    otel: &OtelEnv,
    tls: &Secure,
) -> Result<Option<super::headers::HttpHeaders>, BuildError> {
    let inner: Box<dyn opentelemetry_http::HttpClient> = match tls {
        #[cfg(feature = "tls")]
        Some(t) => Box::new(
            t.http_client(signal, otel.otlp_timeout)
                .map_err(BuildError::new)?,
        ),
        #[cfg(not(feature = "tls"))]
        Some(never) => match *never {},
        None if otel.headers.is_empty() => return Ok(None),
        None => Box::new(
            reqwest::Client::builder()
                .timeout(signal.http_timeout(otel.otlp_timeout))
                .build()
                .map_err(|e| build_err(signal, e))?,
        ),
    };
    super::headers::HttpHeaders::new(inner, &otel.headers).map(Some)
}

fn build_err(signal: Signal, e: impl std::error::Error + Send + Sync + 'static) -> BuildError {
    BuildError::caused(format!("cannot build the OTLP {} exporter", signal.name), e)
}

/// `protocol` for `signal` needs a feature this build lacks.
fn missing(signal: Signal, protocol: OtlpProtocol) -> String {
    let (name, feature) = match protocol {
        OtlpProtocol::Grpc => ("grpc", "otlp-grpc"),
        OtlpProtocol::HttpProtobuf => ("http/protobuf", "otlp-http"),
        OtlpProtocol::HttpJson => ("http/json", "otlp-http"),
    };
    crate::sdk::features::needs(
        &format!(
            "OTLP {name} for {}s (OTEL_EXPORTER_OTLP_PROTOCOL)",
            signal.name
        ),
        feature,
    )
}

/// Whether this build has the transport `protocol` needs.
fn available(signal: Signal, protocol: OtlpProtocol) -> Result<(), String> {
    let grpc = matches!(protocol, OtlpProtocol::Grpc);
    if (grpc && cfg!(feature = "otlp-grpc")) || (!grpc && cfg!(feature = "otlp-http")) {
        Ok(())
    } else {
        Err(missing(signal, protocol))
    }
}

/// An exporter type of a build without OTLP: never made, so never called.
#[cfg(not(any(feature = "otlp-grpc", feature = "otlp-http")))]
#[derive(Debug)]
pub(crate) enum NoOtlp {}

#[cfg(not(any(feature = "otlp-grpc", feature = "otlp-http")))]
mod no_otlp {
    use crate::sdk::export::otlp::NoOtlp;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::logs::{LogBatch, LogExporter};
    use opentelemetry_sdk::metrics::{data::ResourceMetrics, exporter::PushMetricExporter};
    use opentelemetry_sdk::trace::{SpanData, SpanExporter};
    use std::time::Duration;

    impl SpanExporter for NoOtlp {
        async fn export(&self, _: Vec<SpanData>) -> OTelSdkResult {
            match *self {}
        }
    }
    impl PushMetricExporter for NoOtlp {
        async fn export(&self, _: &ResourceMetrics) -> OTelSdkResult {
            match *self {}
        }
        fn force_flush(&self) -> OTelSdkResult {
            match *self {}
        }
        fn shutdown_with_timeout(&self, _: Duration) -> OTelSdkResult {
            match *self {}
        }
        fn temporality(&self) -> opentelemetry_sdk::metrics::Temporality {
            match *self {}
        }
    }
    impl LogExporter for NoOtlp {
        async fn export(&self, _: LogBatch<'_>) -> OTelSdkResult {
            match *self {}
        }
    }
}

/// Builds one OTLP exporter type for `protocol` on lens's export runtime
/// (endpoint, headers, timeout and compression come from the standard
/// `OTEL_EXPORTER_OTLP_*` variables, TLS from the certificate ones): the
/// three signals differ only in the exporter type. A protocol whose
/// feature this build lacks is an error naming the feature.
macro_rules! otlp_exporter {
    ($(#[$doc:meta])* $name:ident, $ty:ident, $signal:expr) => {
        $(#[$doc])*
        #[cfg(any(feature = "otlp-grpc", feature = "otlp-http"))]
        pub(crate) fn $name(
            otel: &OtelEnv,
            handle: &Handle,
        ) -> Result<OnRuntime<opentelemetry_otlp::$ty>, BuildError> {
            #[allow(unused_imports)]
            use opentelemetry_otlp::WithExportConfig;
            let signal = $signal;
            let protocol = otel.protocols[signal.index];
            let code = otel.endpoint.as_deref();
            available(signal, protocol).map_err(BuildError::new)?;
            let tls = secure(signal, protocol, code).map_err(BuildError::new)?;
            let _enter = handle.enter();
            let b = opentelemetry_otlp::$ty::builder();
            let e = match protocol {
                #[cfg(feature = "otlp-grpc")]
                OtlpProtocol::Grpc => {
                    let mut b = b.with_tonic();
                    if let Some(e) = code {
                        b = b.with_endpoint(signal.under(e, protocol));
                    }
                    if let Some(t) = otel.otlp_timeout {
                        b = b.with_timeout(t);
                    }
                    if !otel.headers.is_empty() {
                        use opentelemetry_otlp::WithTonicConfig;
                        b = b.with_interceptor(super::headers::GrpcHeaders::new(&otel.headers)?);
                    }
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
                #[cfg(feature = "otlp-http")]
                OtlpProtocol::HttpProtobuf | OtlpProtocol::HttpJson => {
                    use opentelemetry_otlp::Protocol;
                    let p = match protocol {
                        OtlpProtocol::HttpJson => Protocol::HttpJson,
                        _ => Protocol::HttpBinary,
                    };
                    let mut b = b.with_http().with_protocol(p);
                    if let Some(e) = code {
                        b = b.with_endpoint(signal.under(e, protocol));
                    }
                    if let Some(t) = otel.otlp_timeout {
                        b = b.with_timeout(t);
                    }
                    if let Some(c) = http_client(signal, otel, &tls)? {
                        use opentelemetry_otlp::WithHttpConfig;
                        b = b.with_http_client(c);
                    }
                    b.build()
                }
                #[allow(unreachable_patterns)]
                _ => return Err(BuildError::new(missing(signal, protocol))),
            }
            .map_err(|e| build_err(signal, e))?;
            let _ = tls;
            Ok(OnRuntime::new(e, handle.clone()))
        }

        $(#[$doc])*
        #[cfg(not(any(feature = "otlp-grpc", feature = "otlp-http")))]
        pub(crate) fn $name(
            otel: &OtelEnv,
            _: &Handle,
        ) -> Result<OnRuntime<NoOtlp>, BuildError> {
            let protocol = otel.protocols[$signal.index];
            Err(BuildError::new(missing($signal, protocol)))
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
