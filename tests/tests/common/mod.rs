//! Shared fixture: an in-memory exporter installed as lens's provider. Tests
//! in one binary share global state (groups, provider), so each takes a lock.

#![allow(dead_code, unreachable_pub)]

use lens::otel_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use std::sync::{Mutex, MutexGuard};

static LOCK: Mutex<()> = Mutex::new(());

pub struct Fixture {
    pub exporter: InMemorySpanExporter,
    pub provider: SdkTracerProvider,
    _lock: MutexGuard<'static, ()>,
}

/// Installs a fresh in-memory pipeline and enables the groups of `spec`.
pub fn fixture(spec: &str) -> Fixture {
    fixture_with(spec, &[])
}

pub fn fixture_with(spec: &str, families: &[&'static lens::SpanGroupFamily]) -> Fixture {
    let lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    lens::set_tracer_provider(&provider);
    lens::set_enabled_span_groups(&lens::SpanGroupSet::resolve(spec, families).unwrap());
    Fixture {
        exporter,
        provider,
        _lock: lock,
    }
}

impl Fixture {
    pub fn spans(&self) -> Vec<SpanData> {
        self.exporter.get_finished_spans().unwrap()
    }

    pub fn span(&self, name: &str) -> SpanData {
        let spans = self.spans();
        spans
            .iter()
            .find(|s| s.name == name)
            .cloned()
            .unwrap_or_else(|| {
                panic!(
                    "no span named {name:?}; got {:?}",
                    spans.iter().map(|s| &s.name).collect::<Vec<_>>()
                )
            })
    }
}

pub fn attr(span: &SpanData, key: &str) -> Option<lens::otel::Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

/// Asserts `child`'s parent is `parent` and both share a trace.
pub fn assert_child(child: &SpanData, parent: &SpanData) {
    assert_eq!(
        child.parent_span_id,
        parent.span_context.span_id(),
        "{} should be a child of {}",
        child.name,
        parent.name
    );
    assert_eq!(
        child.span_context.trace_id(),
        parent.span_context.trace_id()
    );
}
