//! Runtime of Lens for Rust. Depend on the `lens` crate instead: it re-exports
//! everything here that is meant to be used, and its macros expand to calls
//! into this crate through `lens::__private`.

pub mod attr;
pub mod config;
pub mod future;
pub mod groups;
pub mod span;

/// The OpenTelemetry API crate lens is built on.
pub use opentelemetry as otel;

/// Whether `name` is a known export strategy.
pub(crate) fn strategy_known(name: &str) -> bool {
    config::BUILTIN_STRATEGIES.contains(&name)
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
