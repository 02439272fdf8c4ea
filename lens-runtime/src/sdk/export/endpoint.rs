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
}

pub(crate) const TRACES: Signal = Signal {
    name: "trace",
    var: "TRACES",
};
pub(crate) const METRICS: Signal = Signal {
    name: "metric",
    var: "METRICS",
};
pub(crate) const LOGS: Signal = Signal {
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
    pub(crate) fn endpoint(self, protocol: OtlpProtocol) -> (String, String) {
        self.setting("ENDPOINT").unwrap_or_else(|| {
            let default = match protocol {
                OtlpProtocol::Grpc => "http://localhost:4317",
                OtlpProtocol::HttpProtobuf | OtlpProtocol::HttpJson => "http://localhost:4318",
            };
            (default.to_owned(), "the OTLP default".to_owned())
        })
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
