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
//! | `bridge/` | the `tracing` bridge: a `tracing_subscriber` layer making lens spans (feature `tracing`) | api, config, the log bridge of `sdk/` when built |
//! | `sdk/` | pipeline per backend, exporters, batch processor, ids, sampler, GPU metrics, log bridge, redaction, fork | the OpenTelemetry SDK |
//! | `host/` | facts about the host: resource detection (rank, SLURM, K8s, GPUs) | config, api |
//! | `config/` | `LensConfig`, `OTEL_*` settings, export strategies | api |
//! | `api/` | span groups, attributes, guards, futures, semantic conventions, instrument sets, W3C propagation | the OpenTelemetry API, the engine through one socket (`api/engine_socket.rs`) |
//! | `engine/` | the span engine: open-span lists, lens's span recorder, the collector, records to `SpanData`; the SDK tracer's slot | the OpenTelemetry API and SDK |
//! | `diag`, `vars` | best-effort diagnostics on stderr; the one reader of the environment | std |

// docs.rs (`--cfg docsrs`): "Available on crate feature … only" badges
#![cfg_attr(docsrs, feature(doc_cfg))]
// every `unsafe` block says why it is sound, in a `// SAFETY:` comment
#![deny(clippy::undocumented_unsafe_blocks)]

mod api;
#[cfg(feature = "tracing")]
mod bridge;
mod config;
#[cfg(feature = "sdk-core")]
mod diag;
mod engine;
#[cfg(feature = "sdk-core")]
mod host;
#[cfg(feature = "sdk-core")]
mod sdk;
#[cfg(feature = "sdk-core")]
mod setup;
mod vars;

// The public surface: exactly what `lens` re-exports, by name. Everything
// else is crate-private (`unreachable_pub` is warned in this crate).

pub use api::attr::{
    is_redacted_key, safe_set_span_attributes, AttributeValue, SpanAttributeTarget, REDACTED,
    REDACTED_KEYS,
};
pub use api::future::{InSpan, InSpanFuture, IntoInSpan};
pub use api::groups::{
    base, is_span_group_enabled, register_family, set_enabled_span_groups, span_group_families,
    SpanGroup, SpanGroupError, SpanGroupFamily, SpanGroupSet,
};
pub use api::metrics::{
    fine_bucket_boundaries, GymMetrics, GymRecord, InferenceMetrics, InferenceRecord, RlMetrics,
    RlRecord, TokenTimer, TrainingMetrics, TrainingRecord, DURATION_MS_BUCKETS,
    GEN_AI_DURATION_BUCKETS_S, GEN_AI_TOKEN_BUCKETS, GEN_AI_TPOT_BUCKETS_S, GEN_AI_TTFT_BUCKETS_S,
    MAX_INFERENCE_ATTRIBUTE_SETS, SDK_DEFAULT_BUCKETS, STEP_DURATION_BUCKETS_S,
};
#[cfg(feature = "http")]
pub use api::propagation::http;
#[cfg(feature = "mpi")]
pub use api::propagation::mpi_collective;
pub use api::propagation::{
    broadcast_trace_context, context_from_bytes, context_from_env, context_from_env_lookup,
    context_to_bytes, context_to_json_bytes, create_linked_span, env_for_child, extract_context,
    extract_from, inject_context, inject_into, pp_trace_carrier, set_pp_trace_carrier, w3c,
    Carrier, Collective, CollectiveError, LocalCollective, ENV_CARRIER_VARS,
};
pub use api::scope::{meter, tracer, SCOPE_NAME};
pub use api::semconv;
#[cfg(feature = "tower")]
pub use api::serving::{RouteFn, ServerFuture, ServerLayer, ServerService};
pub use api::span::opts::{IntoLink, IntoParentContext};
pub use api::span::start::start_detached;
#[cfg(feature = "sdk-core")]
pub use api::span::{clear_tracer_provider, set_tracer_provider};
pub use api::span::{LensSpan, SpanGuard, SpanStatus};
#[cfg(feature = "tracing")]
pub use bridge::{tracing_layer, tracing_layer_with, TracingBridge, TracingLayer, TracingMode};
#[cfg(feature = "sdk-core")]
pub use config::otel::OtlpProtocol;
pub use config::strategy::{
    is_export_strategy_registered, rank_is_sampled, register_export_strategy,
    registered_export_strategies, remove_export_strategy, replace_export_strategy, should_export,
    StrategyError,
};
pub use config::{ConfigError, ExporterKind, LensConfig, OtelContext, SpanPath, ValidConfig};
#[cfg(feature = "sdk-core")]
pub use host::gpus::GpuDevice;
#[cfg(feature = "sdk-core")]
pub use host::launcher::{file_safe_run_id, shared_run_id};
#[cfg(feature = "gpu")]
pub use sdk::gpu::{register_gpu_metrics, visible_gpus};
#[cfg(feature = "sdk-core")]
pub use sdk::ids::ForkSafeIdGenerator;
#[cfg(feature = "logs")]
pub use sdk::logs::{
    log, setup_logging_bridge_with_provider, InstallStatus, Level, LogBridge, LogBridgeError,
    LogBridgeLayer, LogBridgeLogger, LogBridgeOptions,
};
#[cfg(feature = "sdk-core")]
pub use sdk::sampler::RankAwareSampler;
#[cfg(feature = "logs")]
pub use setup::setup_logging_bridge;
#[cfg(feature = "sdk-core")]
pub use setup::{
    setup_telemetry, setup_telemetry_from_env, LossCause, SetupError, ShutdownReport, SignalReport,
    TelemetryBuilder, TelemetryHandle,
};

#[cfg(all(test, feature = "sdk-core"))]
mod metrics_test_support;
#[cfg(test)]
mod test_rng;

/// The OpenTelemetry SDK crate lens is built on.
#[cfg(feature = "sdk-core")]
pub use opentelemetry_sdk as otel_sdk;

/// The `tracing` crate the `tracing` bridge and the log bridge take spans
/// and events from (0.1), re-exported so that a program can use the same
/// version without its own dependency (`lens::tracing::tracing`).
///
/// ```
/// lens::tracing::tracing::info!(target: "trainer", step = 3, "hello");
/// ```
#[cfg(any(feature = "tracing", feature = "logs"))]
pub use tracing;

/// The `tracing-subscriber` crate (0.3) whose `Layer` trait
/// `TracingLayer` and `LogBridgeLayer` implement, re-exported so that
/// versions match (`lens::tracing::tracing_subscriber`).
///
/// ```
/// use lens::tracing::tracing_subscriber::{layer::SubscriberExt as _, registry};
/// let subscriber = registry().with(lens::tracing::layer());
/// # drop(subscriber);
/// ```
#[cfg(any(feature = "tracing", feature = "logs"))]
pub use tracing_subscriber;

/// The OpenTelemetry API crate lens is built on.
pub use opentelemetry as otel;

/// Items used by generated code. Not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::api::attr::{AttributeValue, Attrs, REDACTED};
    pub use crate::api::future::{instrument, instrument_result, instrument_result_debug};
    pub use crate::api::groups::{base, LinkedFamily, Preset, SpanGroup, SpanGroupFamily};
    pub use crate::api::span::opts::{
        record_ok, record_ok_current, record_return, record_return_current, start_detached_with,
        start_span_with, IntoLink, IntoParentContext,
    };
    pub use crate::api::span::start::{start_detached, start_span};
    pub use crate::api::span::{record_result, record_result_debug, LensSpan, SpanGuard};
    pub use inventory;
    pub use opentelemetry::trace::SpanKind;
    pub use opentelemetry::{Key, KeyValue};
    pub use std::sync::atomic::AtomicU64;
    pub use std::vec::Vec;

    /// Names lifetimes in the bound of the future an instrumented `async fn`
    /// returns, so that it captures them (Rust 2021 `impl Trait` captures
    /// only the lifetimes its bounds name); implemented by every type.
    pub trait Captures<T: ?Sized> {}
    impl<T: ?Sized, U: ?Sized> Captures<U> for T {}

    /// Pushes `key = value` unless the value is `None`.
    #[inline]
    pub fn push<V: AttributeValue + ?Sized>(attrs: &mut Attrs, key: &'static str, value: &V) {
        if let Some(v) = value.to_value() {
            attrs.push(KeyValue::new(Key::from_static_str(key), v));
        }
    }

    /// Pushes `key = %value`: its `Display` text.
    #[inline]
    pub fn push_display<V: std::fmt::Display + ?Sized>(
        attrs: &mut Attrs,
        key: &'static str,
        value: &V,
    ) {
        attrs.push(KeyValue::new(Key::from_static_str(key), value.to_string()));
    }

    /// Pushes `key = ?value`: its `Debug` text.
    #[inline]
    pub fn push_debug<V: std::fmt::Debug + ?Sized>(
        attrs: &mut Attrs,
        key: &'static str,
        value: &V,
    ) {
        attrs.push(KeyValue::new(
            Key::from_static_str(key),
            format!("{value:?}"),
        ));
    }

    /// `key = %value` under a redacted key: [`REDACTED`], the value not
    /// even formatted.
    #[inline]
    pub fn push_display_redacted<V: std::fmt::Display + ?Sized>(
        attrs: &mut Attrs,
        key: &'static str,
        _value: &V,
    ) {
        attrs.push(KeyValue::new(Key::from_static_str(key), REDACTED));
    }

    /// `key = ?value` under a redacted key: [`REDACTED`], the value not
    /// even formatted.
    #[inline]
    pub fn push_debug_redacted<V: std::fmt::Debug + ?Sized>(
        attrs: &mut Attrs,
        key: &'static str,
        _value: &V,
    ) {
        attrs.push(KeyValue::new(Key::from_static_str(key), REDACTED));
    }

    /// Pushes `key = value` for a key the macro found redacted at compile time.
    #[inline]
    pub fn push_redacted<V: AttributeValue + ?Sized>(
        attrs: &mut Attrs,
        key: &'static str,
        value: &V,
    ) {
        if let Some(v) = value.to_value_redacted() {
            attrs.push(KeyValue::new(Key::from_static_str(key), v));
        }
    }
}
