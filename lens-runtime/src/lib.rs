//! Runtime of Lens for Rust. Depend on the `lens` crate instead: it re-exports
//! everything here that is meant to be used, and its macros expand to calls
//! into this crate through `lens::__private`.

pub mod attr;
pub mod config;
pub mod future;
pub mod groups;
pub mod semconv;
pub mod span;
pub mod strategy;

#[cfg(feature = "sdk")]
mod diag;
#[cfg(feature = "sdk")]
pub mod export;
#[cfg(feature = "sdk")]
mod fork;
#[cfg(feature = "sdk")]
pub mod gpu;
#[cfg(feature = "sdk")]
pub mod ids;
#[cfg(feature = "sdk")]
pub mod logs;
/// The proc macros' compile-time tables, compiled here so that a unit test
/// can check the macros' redaction rule against the runtime's.
#[cfg(test)]
#[path = "../../lens-macros/src/tables.rs"]
#[allow(dead_code)]
mod macro_tables;
#[cfg(feature = "sdk")]
pub mod metrics;
#[cfg(all(test, feature = "sdk"))]
mod metrics_test_support;
#[cfg(feature = "sdk")]
pub mod propagation;
#[cfg(feature = "sdk")]
pub mod redact;
#[cfg(feature = "sdk")]
pub mod resource;
#[cfg(feature = "sdk")]
pub mod sampler;
#[cfg(feature = "sdk")]
pub mod setup;
#[cfg(feature = "sdk")]
mod signal;
#[cfg(feature = "sdk")]
pub mod w3c;

/// Installs the W3C TraceContext + Baggage propagator as the global
/// propagator (the Rust SDK's default global propagator does nothing).
#[cfg(feature = "sdk")]
pub(crate) fn propagation_install() {
    use opentelemetry::propagation::TextMapCompositePropagator;
    use opentelemetry_sdk::propagation::BaggagePropagator;
    opentelemetry::global::set_text_map_propagator(TextMapCompositePropagator::new(vec![
        Box::new(w3c::W3cPropagator::new()),
        Box::new(BaggagePropagator::new()),
    ]));
}

/// The OpenTelemetry SDK crate lens is built on.
#[cfg(feature = "sdk")]
pub use opentelemetry_sdk as otel_sdk;

/// The OpenTelemetry API crate lens is built on.
pub use opentelemetry as otel;

/// Whether `name` is a registered export strategy.
pub(crate) fn strategy_known(name: &str) -> bool {
    strategy::is_export_strategy_registered(name)
}

/// Items used by generated code. Not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::attr::{AttributeValue, REDACTED};
    pub use crate::future::{instrument, instrument_result};
    pub use crate::groups::{base, Preset, SpanGroup, SpanGroupFamily};
    pub use crate::span::{record_result, start_detached, start_span, LensSpan, SpanGuard};
    pub use opentelemetry::{Key, KeyValue};
    pub use std::sync::atomic::AtomicU64;
    pub use std::vec::Vec;

    /// Pushes `key = value` unless the value is `None`.
    #[inline]
    pub fn push<V: AttributeValue + ?Sized>(
        attrs: &mut Vec<KeyValue>,
        key: &'static str,
        value: &V,
    ) {
        if let Some(v) = value.to_value() {
            attrs.push(KeyValue::new(Key::from_static_str(key), v));
        }
    }

    /// Pushes `key = value` for a key the macro found redacted at compile time.
    #[inline]
    pub fn push_redacted<V: AttributeValue + ?Sized>(
        attrs: &mut Vec<KeyValue>,
        key: &'static str,
        value: &V,
    ) {
        if let Some(v) = value.to_value_redacted() {
            attrs.push(KeyValue::new(Key::from_static_str(key), v));
        }
    }
}
