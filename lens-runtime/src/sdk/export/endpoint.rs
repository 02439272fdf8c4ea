//! The `OTEL_EXPORTER_OTLP_*` settings of one OTLP signal (the per-signal
//! variable over the general one), and the latest transport failure.

use crate::config::otel::OtlpProtocol;

/// One OTLP signal, as its variables name it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Signal {
    /// For messages: `trace`, `metric`, `log`.
    pub(crate) name: &'static str,
    /// The infix of the per-signal variables: `TRACES`, `METRICS`, `LOGS`.
    pub(crate) var: &'static str,
    /// The OTLP/HTTP path under a base endpoint: `traces`, `metrics`, `logs`.
    path: &'static str,
    /// The signal's place in per-signal arrays (traces, metrics, logs).
    pub(crate) index: usize,
}

pub(crate) const TRACES: Signal = Signal {
    name: "trace",
    var: "TRACES",
    path: "traces",
    index: 0,
};
pub(crate) const METRICS: Signal = Signal {
    name: "metric",
    var: "METRICS",
    path: "metrics",
    index: 1,
};
pub(crate) const LOGS: Signal = Signal {
    name: "log",
    var: "LOGS",
    path: "logs",
    index: 2,
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

    /// The timeout the OTLP HTTP exporter gives its own client: the one
    /// given in code, else `OTEL_EXPORTER_OTLP_<SIGNAL>_TIMEOUT`, else
    /// `OTEL_EXPORTER_OTLP_TIMEOUT` (milliseconds), else 10 s.
    #[cfg(feature = "otlp-http")]
    pub(crate) fn http_timeout(self, code: Option<std::time::Duration>) -> std::time::Duration {
        code.unwrap_or_else(|| {
            self.setting("TIMEOUT")
                .and_then(|(v, _)| v.parse().ok())
                .map_or(
                    std::time::Duration::from_secs(10),
                    std::time::Duration::from_millis,
                )
        })
    }

    /// The endpoint this signal's exporter uses and where it came from:
    /// the one given in code (`code`), else the variables, else the
    /// protocol's default.
    pub(crate) fn endpoint(self, protocol: OtlpProtocol, code: Option<&str>) -> (String, String) {
        if let Some(base) = code {
            let from = crate::config::otel::CODE_ENDPOINT.to_owned();
            return (self.under(base, protocol), from);
        }
        self.setting("ENDPOINT").unwrap_or_else(|| {
            let default = match protocol {
                OtlpProtocol::Grpc => "http://localhost:4317",
                OtlpProtocol::HttpProtobuf | OtlpProtocol::HttpJson => "http://localhost:4318",
            };
            (default.to_owned(), "the OTLP default".to_owned())
        })
    }

    /// This signal's URL under a base endpoint given in code, as for
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`: for HTTP, `/v1/<signal>` is appended.
    pub(crate) fn under(self, base: &str, protocol: OtlpProtocol) -> String {
        match protocol {
            OtlpProtocol::Grpc => base.to_owned(),
            OtlpProtocol::HttpProtobuf | OtlpProtocol::HttpJson => {
                format!("{}/v1/{}", base.trim_end_matches('/'), self.path)
            }
        }
    }
}

/// The cause of the latest failed OTLP HTTP request, where the exporter's
/// own error says only "network error" (kept by the `tls` HTTP client).
static TRANSPORT_ERROR: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Keeps `cause` as the latest transport failure.
#[cfg_attr(not(all(feature = "tls", feature = "otlp-http")), allow(dead_code))]
pub(crate) fn note_transport_error(cause: String) {
    if let Ok(mut slot) = TRANSPORT_ERROR.lock() {
        *slot = Some(cause);
    }
}

/// The latest transport failure's cause, if one was kept.
pub(crate) fn transport_error() -> Option<String> {
    TRANSPORT_ERROR.lock().ok()?.take()
}
