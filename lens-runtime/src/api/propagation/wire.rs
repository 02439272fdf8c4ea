//! The propagators lens injects and extracts with: W3C trace context, then
//! W3C baggage.

use super::baggage::BaggagePropagator;
use super::w3c::W3cPropagator;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::Context;

// Baggage is lens's own W3C Baggage propagator (API only, so it travels
// without the `sdk` feature too), encoded to round-trip with Python.
pub(super) fn inject_with(cx: &Context, injector: &mut dyn Injector) {
    W3cPropagator::new().inject_context(cx, injector);
    BaggagePropagator::new().inject_context(cx, injector);
}

pub(super) fn extract_with(extractor: &dyn Extractor) -> Context {
    let cx = W3cPropagator::new().extract_with_context(&Context::new(), extractor);
    BaggagePropagator::new().extract_with_context(&cx, extractor)
}
