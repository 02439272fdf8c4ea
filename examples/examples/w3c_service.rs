//! W3C Trace Context service: the service side of the official validation
//! suite (github.com/w3c/trace-context, `test/`), propagating context with
//! lens's strict W3C propagator.
//!
//! ```text
//! NEMO_LENS_ENABLED=1 NEMO_LENS_EXPORTER=file \
//!     cargo run --release -p examples --example w3c_service -- 127.0.0.1:5000
//! # then, from a checkout of w3c/trace-context/test:
//! python test.py http://127.0.0.1:5000/test
//! ```
//!
//! `POST /test` takes a JSON array of `{"url": ..., "arguments": ...}`; for
//! each element the service POSTs `arguments` as JSON to `url`. The context
//! of the incoming request is extracted (an invalid or missing `traceparent`
//! restarts the trace), a `w3c.test` span is opened as its child, and each
//! outgoing call gets its own `w3c.callback` child span whose context is
//! injected into the call's headers: same trace id, a new parent id per call,
//! the caller's sampled and random-trace-id flags and its `tracestate`.
//!
//! The first argument is the listen address (default `127.0.0.1:5000`; port
//! 0 picks a free port). Once listening, the service prints
//! `w3c_service listening on http://ADDR/test` on stdout. Telemetry is set
//! up from the `NEMO_LENS_*` variables (`lens::setup_telemetry_from_env`).
//! Run it with telemetry on, as above: the suite checks that every call
//! carries a parent id of its own, which only a recording span gives.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use lens::otel::propagation::{Extractor, Injector};
use serde::Deserialize;
use serde_json::{json, Value};
use std::error::Error;
use std::time::Duration;

/// One element of the `POST /test` body.
#[derive(Debug, Deserialize)]
struct Call {
    url: String,
    #[serde(default)]
    arguments: Value,
}

/// Reads an `http::HeaderMap` for a propagator. Names are matched
/// case-insensitively (`HeaderMap` stores them lowercase) and every value of
/// a repeated header is returned, so the propagator sees duplicated
/// `traceparent` and repeated `tracestate` headers. A value that is not
/// visible ASCII is returned as a replacement character, which no W3C field
/// accepts, so it invalidates its header instead of silently disappearing.
struct HeaderExtractor<'a>(&'a HeaderMap);

const NOT_ASCII: &str = "\u{fffd}";

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|v| v.to_str().unwrap_or(NOT_ASCII))
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }

    fn get_all(&self, key: &str) -> Option<Vec<&str>> {
        let values: Vec<&str> = self
            .0
            .get_all(key)
            .iter()
            .map(|v| v.to_str().unwrap_or(NOT_ASCII))
            .collect();
        (!values.is_empty()).then_some(values)
    }
}

/// Writes injected fields into an outgoing `HeaderMap`.
struct HeaderInjector<'a>(&'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// `POST /test`: call every `url` with its `arguments`, propagating the
/// incoming trace context.
async fn test(
    State(client): State<reqwest::Client>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, Json<Value>) {
    let calls: Vec<Call> = match serde_json::from_slice(&body) {
        Ok(calls) => calls,
        Err(e) => {
            let error = format!("expected a JSON array of {{url, arguments}}: {e}");
            return (StatusCode::BAD_REQUEST, Json(json!({ "error": error })));
        }
    };

    // Extract with the global propagator lens installed (W3C + baggage); an
    // invalid traceparent leaves the context without a remote parent.
    let parent =
        lens::otel::global::get_text_map_propagator(|p| p.extract(&HeaderExtractor(&headers)));
    // The parent is attached only while the span is created: the span itself
    // is detached, so it can live across the awaits below.
    let request_span = {
        let _parent = parent.attach();
        lens::detached_span("w3c.test")
    };
    request_span.set_attribute("w3c.calls", calls.len() as u64);

    let mut results = Vec::with_capacity(calls.len());
    for call in calls {
        let call_span = {
            let _parent = request_span.context().clone().attach();
            lens::detached_span("w3c.callback")
        };
        call_span.set_attribute("url.full", call.url.as_str());
        let mut out = HeaderMap::new();
        lens::otel::global::get_text_map_propagator(|p| {
            p.inject_context(call_span.context(), &mut HeaderInjector(&mut out))
        });
        let sent = client
            .post(&call.url)
            .headers(out)
            .json(&call.arguments)
            .send()
            .await;
        match sent {
            Ok(response) => {
                let status = response.status().as_u16();
                call_span.set_attribute("http.response.status_code", u64::from(status));
                results.push(json!({ "url": call.url, "status": status }));
            }
            Err(e) => {
                call_span.record_error(&e);
                results.push(json!({ "url": call.url, "error": e.to_string() }));
            }
        }
    }
    (StatusCode::OK, Json(Value::Array(results)))
}

async fn serve(addr: String, client: reqwest::Client) -> Result<(), Box<dyn Error>> {
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let app = Router::new().route("/test", post(test)).with_state(client);
    println!(
        "w3c_service listening on http://{}/test",
        listener.local_addr()?
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:5000".to_owned());

    // Telemetry from NEMO_LENS_* variables. Setup installs lens's W3C +
    // baggage propagator as the global propagator.
    let telemetry = lens::setup_telemetry_from_env()?;

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()?;
    let served = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(serve(addr, client));

    telemetry.shutdown(Duration::from_secs(5));
    if let Some(path) = telemetry.file_path() {
        eprintln!("w3c_service: spans written to {}", path.display());
    }
    served
}
