//! Unit tests of the W3C propagator, including the official validation
//! suite's cases: shared carriers and helpers here; `traceparent`,
//! `tracestate` and `property` (generated hostile input) beside them.

mod property;
mod traceparent;
mod tracestate;

use super::*;
use opentelemetry::trace::{SpanId, Tracer as _, TracerProvider as _};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use std::collections::HashMap;

const TRACE: &str = "12345678901234567890123456789012";
const PARENT: &str = "1234567890123456";
const VALID: &str = "00-12345678901234567890123456789012-1234567890123456-01";

/// An HTTP-like carrier: ordered headers, names matched case-insensitively,
/// `keys()` lowercase (like `http::HeaderMap`).
#[derive(Default)]
struct Headers(Vec<(String, String)>);

impl Headers {
    fn new(pairs: &[(&str, &str)]) -> Self {
        Headers(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }
}

impl Extractor for Headers {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    }
    fn keys(&self) -> Vec<&str> {
        // like http::HeaderMap: names are stored lowercase, listed once
        let mut keys: Vec<&str> = Vec::new();
        for (k, _) in &self.0 {
            if !keys.iter().any(|seen| seen.eq_ignore_ascii_case(k)) {
                keys.push(k.as_str());
            }
        }
        keys
    }
    fn get_all(&self, key: &str) -> Option<Vec<&str>> {
        let all: Vec<&str> = self
            .0
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
            .collect();
        (!all.is_empty()).then_some(all)
    }
}

/// A carrier that matches names exactly (case-sensitively) and reports
/// them as stored, e.g. a list of pairs read from a message queue.
struct ExactPairs(Vec<(String, String)>);

impl Extractor for ExactPairs {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|(k, _)| k.as_str()).collect()
    }
    fn get_all(&self, key: &str) -> Option<Vec<&str>> {
        let all: Vec<&str> = self
            .0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect();
        (!all.is_empty()).then_some(all)
    }
}

fn extract(pairs: &[(&str, &str)]) -> Context {
    W3cPropagator::new().extract(&Headers::new(pairs))
}

/// The remote span context extracted from `traceparent: value`, if any.
fn parent_of(value: &str) -> Option<SpanContext> {
    let cx = extract(&[("traceparent", value)]);
    cx.has_active_span()
        .then(|| cx.span().span_context().clone())
}

fn assert_restarts(value: &str) {
    assert!(
        parent_of(value).is_none(),
        "{value:?} must be rejected (restart the trace)"
    );
}

fn assert_continues(value: &str) -> SpanContext {
    let sc = parent_of(value).unwrap_or_else(|| panic!("{value:?} must be accepted"));
    assert!(sc.is_valid() && sc.is_remote());
    assert_eq!(format!("{:032x}", sc.trace_id()), TRACE);
    assert_eq!(format!("{:016x}", sc.span_id()), PARENT);
    sc
}

/// The `tracestate` injected after extracting a valid traceparent with
/// these `tracestate` headers (`None`: no tracestate sent).
fn tracestate_after(headers: &[&str]) -> Option<String> {
    let mut pairs = vec![("traceparent", VALID)];
    pairs.extend(headers.iter().map(|h| ("tracestate", *h)));
    let cx = extract(&pairs);
    assert!(
        cx.has_active_span(),
        "the traceparent is kept whatever the tracestate"
    );
    let mut out = HashMap::new();
    W3cPropagator::new().inject_context(&cx, &mut out);
    out.remove("tracestate")
}

fn members(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("bar{i:02}={i:02}")).collect()
}

// --- traceparent ---------------------------------------------------------
