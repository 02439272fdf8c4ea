//! The tracer lens spans are created with: installed with a provider,
//! forgotten after a fork, read with one acquire load on the span path
//! (the SDK's tracer's slot is the engine's).

#[cfg(feature = "sdk-core")]
use crate::api::engine_socket::{recorder, sdk_tracer, SdkTracerProvider};
#[cfg(feature = "sdk-core")]
use crate::api::span::panic::install_panic_hook;

#[cfg(feature = "sdk-core")]
use crate::api::scope::SCOPE_NAME;

/// Installs `provider` as the provider of lens spans and as the global
/// OpenTelemetry tracer provider. `setup_telemetry` does this for you; tests
/// use it with an in-memory exporter.
///
/// ```
/// use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
/// let exporter = InMemorySpanExporter::default();
/// let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
/// lens::set_tracer_provider(&provider);
/// drop(lens::span_cm!("doc.span"));
/// assert_eq!(exporter.get_finished_spans().unwrap()[0].name, "doc.span");
/// # lens::clear_tracer_provider();
/// ```
#[cfg(feature = "sdk-core")]
pub fn set_tracer_provider(provider: &SdkTracerProvider) {
    use opentelemetry::trace::TracerProvider as _;
    let scope = opentelemetry::InstrumentationScope::builder(SCOPE_NAME)
        .with_version(env!("CARGO_PKG_VERSION"))
        .build();
    install_panic_hook();
    sdk_tracer::set(Some(provider.tracer_with_scope(scope)));
    opentelemetry::global::set_tracer_provider(provider.clone());
}

/// Forgets the provider installed by [`set_tracer_provider`]; lens spans go to
/// the global OpenTelemetry provider again.
///
/// ```
/// lens::clear_tracer_provider();
/// ```
#[cfg(feature = "sdk-core")]
pub fn clear_tracer_provider() {
    sdk_tracer::set(None);
}

/// What sets lens up again in a forked child whose parent left a recipe:
/// registered by setup (a layer above), called by the first span start
/// that finds no tracer. True when it set up a tracer of the child's own.
#[cfg(feature = "sdk-core")]
static FORK_RESPAWN: std::sync::OnceLock<fn() -> bool> = std::sync::OnceLock::new();

/// Registers [`FORK_RESPAWN`] (the same function every time: set once).
#[cfg(feature = "sdk-core")]
pub(crate) fn set_fork_respawn(respawn: fn() -> bool) {
    let _ = FORK_RESPAWN.set(respawn);
}

/// In a forked child with a recipe, on a span start that found no tracer:
/// sets lens up again (once; see `sdk::fork`). True when the span path now
/// has a tracer of the child's own.
#[cfg(feature = "sdk-core")]
#[cold]
#[inline(never)]
pub(crate) fn respawn_after_fork() -> bool {
    FORK_RESPAWN.get().is_some_and(|respawn| respawn())
}

/// In a forked child: forget the parent's tracer (one atomic store).
#[cfg(feature = "sdk-core")]
pub(crate) fn forget_tracer_after_fork() {
    recorder::forget_after_fork();
    sdk_tracer::set(None);
}
