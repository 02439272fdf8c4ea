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

/// A span exporter that keeps spans and the resource it was given (the
/// SDK's in-memory exporter forgets both on shutdown).
#[derive(Debug, Clone, Default)]
pub struct Capture {
    pub spans: std::sync::Arc<Mutex<Vec<SpanData>>>,
    pub resource: std::sync::Arc<Mutex<Option<lens::otel_sdk::Resource>>>,
}

impl lens::otel_sdk::trace::SpanExporter for Capture {
    async fn export(&self, batch: Vec<SpanData>) -> lens::otel_sdk::error::OTelSdkResult {
        self.spans.lock().unwrap().extend(batch);
        Ok(())
    }
    fn set_resource(&mut self, resource: &lens::otel_sdk::Resource) {
        *self.resource.lock().unwrap() = Some(resource.clone());
    }
}

impl Capture {
    pub fn finished(&self) -> Vec<SpanData> {
        self.spans.lock().unwrap().clone()
    }

    pub fn resource_attr(&self, key: &str) -> Option<String> {
        let r = self.resource.lock().unwrap();
        r.as_ref()?
            .iter()
            .find(|(k, _)| k.as_str() == key)
            .map(|(_, v)| v.to_string())
    }
}
