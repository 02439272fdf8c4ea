//! W3C Trace Context propagator (placeholder: delegates to the SDK's until
//! lens's own strict implementation lands).

use opentelemetry::propagation::{text_map_propagator::FieldIter, Extractor, Injector, TextMapPropagator};
use opentelemetry::Context;
use opentelemetry_sdk::propagation::TraceContextPropagator;

/// The W3C `traceparent` / `tracestate` propagator lens installs.
#[derive(Debug, Default)]
pub struct W3cPropagator {
    inner: TraceContextPropagator,
}

impl W3cPropagator {
    /// A new propagator.
    pub fn new() -> Self {
        Self::default()
    }
}

impl TextMapPropagator for W3cPropagator {
    fn inject_context(&self, cx: &Context, injector: &mut dyn Injector) {
        self.inner.inject_context(cx, injector)
    }
    fn extract_with_context(&self, cx: &Context, extractor: &dyn Extractor) -> Context {
        self.inner.extract_with_context(cx, extractor)
    }
    fn fields(&self) -> FieldIter<'_> {
        self.inner.fields()
    }
}
