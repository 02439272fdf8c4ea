//! Runtime of Lens for Rust. Depend on the `lens` crate instead: it re-exports
//! everything here that is meant to be used, and its macros expand to calls
//! into this crate through `lens::__private`.
//!
//! The runtime is built in layers; a module only uses the layers below it
//! (checked by `tests/layers.rs`):
//!
//! | layer | what | needs |
//! |---|---|---|
//! | `setup/` | builder, handle (shutdown), signal hook | everything below |
//! | `sdk/` | pipeline per backend, exporters, batch processor, ids, sampler, GPU metrics, log bridge, redaction, fork | the OpenTelemetry SDK |
//! | `host/` | facts about the host: resource detection (rank, SLURM, K8s, GPUs) | config, api |
//! | `config/` | `LensConfig`, `OTEL_*` settings, export strategies | api |
//! | `api/` | span groups, attributes, guards, futures, semantic conventions, instrument sets, W3C propagation | the OpenTelemetry API only |
//! | `diag`, `vars` | best-effort diagnostics on stderr; the one reader of the environment | std |

mod api;
pub mod config;
#[cfg(feature = "sdk")]
mod diag;
#[cfg(feature = "sdk")]
mod host;
#[cfg(feature = "sdk")]
mod sdk;
#[cfg(feature = "sdk")]
pub mod setup;
mod vars;

// The public paths of the modules (unchanged by the move into layers).
pub use api::{attr, future, groups, semconv, span};
#[cfg(feature = "sdk")]
pub use api::{metrics, propagation, propagation::w3c};
pub use config::strategy;
#[cfg(feature = "sdk")]
pub use host::resource;
#[cfg(feature = "sdk")]
pub use sdk::{export, gpu, ids, logs, redact, sampler};

/// The proc macros' compile-time tables, compiled here so that a unit test
/// can check the macros' redaction rule against the runtime's.
#[cfg(test)]
#[path = "../../lens-macros/src/tables.rs"]
#[allow(dead_code)]
mod macro_tables;
#[cfg(all(test, feature = "sdk"))]
mod metrics_test_support;

/// The OpenTelemetry SDK crate lens is built on.
#[cfg(feature = "sdk")]
pub use opentelemetry_sdk as otel_sdk;

/// The OpenTelemetry API crate lens is built on.
pub use opentelemetry as otel;

/// Items used by generated code. Not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::api::attr::{AttributeValue, REDACTED};
    pub use crate::api::future::{instrument, instrument_result};
    pub use crate::api::groups::{base, Preset, SpanGroup, SpanGroupFamily};
    pub use crate::api::span::{record_result, start_detached, start_span, LensSpan, SpanGuard};
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
