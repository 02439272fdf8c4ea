//! The `tracing` bridge: `tracing` spans become lens spans in lens's own
//! pipeline, gated by span groups.
//!
//! * **One pipeline.** Spans are made with the tracer lens spans use (the
//!   provider `setup_telemetry` or `set_tracer_provider` installed), so
//!   they share lens's sampler, redaction, exporters and shutdown.
//! * **Parents both ways.** A bridged span is a child of the current
//!   context when it is created (a lens span or another bridged span);
//!   entering it makes it the current context, so lens spans (and bridged
//!   spans) opened inside are its children, on any thread and across
//!   `.await`s (a `tracing::Instrument`ed future enters its span on every
//!   poll). An explicit `parent:` is followed when the bridge recorded it.
//! * **Span groups.** Each callsite's target is mapped to a lens span group
//!   once (longest module-path prefix wins; a target with no entry takes
//!   the default, `off` unless set); a span is recorded when that group's
//!   bit is on, tested per span exactly as `managed_span!` tests it. Spans
//!   below the level floor, of a target mapped to `off`, and of the
//!   OpenTelemetry crates are never recorded.
//! * **Per-layer filtering.** By default the group decides for lens's layer
//!   alone (in `on_new_span`): the span is still created, and the other
//!   layers (`fmt`, `tracing-chrome`, ...) see every span as they would
//!   without lens. `TracingBridge::global_filter(true)` tests the group in
//!   `Layer::enabled` instead: a routed span whose group is off is then not
//!   created at all, for any layer (cheaper, and the group switches its
//!   targets off for the whole subscriber). Targets the bridge does not
//!   route are left to the other layers in both modes.
//! * **Callsite.** Each recorded span carries `code.namespace` (its
//!   target), `code.file.path` and `code.line.number` (static strings of
//!   the callsite's metadata: no allocation).
//! * **Re-entered spans.** `lifetime` (the default): one lens span from the
//!   `tracing` span's creation to its close, however often it is entered:
//!   right for async code, whose spans are entered on every poll.
//!   `per_entry`: one lens span per enter/exit, a child of what is current
//!   at the entry, with the fields recorded so far: right for spans made
//!   once and entered many times (candle makes one span per layer at model
//!   load and enters it on every `forward`). The group is tested at each
//!   entry, so it can be switched on after the spans were made.
//! * **Fields** become attributes under lens's scalar and redaction rules (a
//!   `prompt` field is recorded as `[REDACTED]`); `otel.name` and
//!   `otel.kind` set the span's name and kind.
//! * **Events** in a recorded span become *span events* of it (name: the
//!   message; attributes: the fields, `level`, `target`; an ERROR event
//!   marks the span ERROR). When the log bridge is on
//!   (`setup_logging_bridge` with `tracing` events) and takes the event
//!   (its level and targets), the event becomes a *log record* instead,
//!   carrying the span's trace and span ids, and no span event: never both.
//!   The layer forwards it to the log bridge itself (a `LogBridgeLayer` in
//!   the same subscriber stays silent, or the other way round).
//!
//! Configuration: [`TracingBridge`] (builder) or the environment:
//!
//! | variable | value | default |
//! |---|---|---|
//! | `NEMO_LENS_TRACING_GROUPS` | `target=group[:mode],...`, mode `lifetime` or `per_entry`, group `off` to switch a target off | none |
//! | `NEMO_LENS_TRACING_DEFAULT` | `group[:mode]` for targets with no entry, or `off` | `off` |
//! | `NEMO_LENS_TRACING_LEVEL` | the least severe level recorded: `trace` … `error` | `trace` |

mod builder;
mod callsites;
mod fields;
mod filter;
mod layer;
mod route;
mod spec;

use crate::api::groups::SpanGroupFamily;
use crate::config::ConfigError;
#[cfg(feature = "sdk-core")]
pub(crate) use builder::known_routes;
pub use builder::TracingBridge;
pub use layer::TracingLayer;
pub use route::TracingMode;

/// The bridge configured from the environment
/// ([`TracingBridge::from_env`]), as a layer. An invalid variable is
/// reported on stderr (variable, value, what is accepted) and the layer then
/// records nothing; use [`TracingBridge::from_env`] to handle the error
/// yourself.
///
/// ```
/// use lens::tracing::tracing_subscriber::{layer::SubscriberExt as _, registry};
/// let subscriber = registry().with(lens::tracing::layer());
/// lens::tracing::tracing::subscriber::with_default(subscriber, || {
///     let span = lens::tracing::tracing::info_span!("not.routed");
///     let _e = span.enter(); // no NEMO_LENS_TRACING_* set: nothing recorded
/// });
/// ```
pub fn tracing_layer() -> TracingLayer {
    tracing_layer_with(&[])
}

/// [`tracing_layer`], also looking group names up in `families` (on top of
/// every family the program knows, which [`tracing_layer`] already uses).
///
/// ```
/// use lens::tracing::tracing_subscriber::{layer::SubscriberExt as _, registry};
/// let layer = lens_runtime::tracing_layer_with(&[&lens::megatron::FAMILY]);
/// let subscriber = registry().with(layer);
/// # drop(subscriber);
/// ```
pub fn tracing_layer_with(families: &[&'static SpanGroupFamily]) -> TracingLayer {
    match TracingBridge::from_env_with(families) {
        Ok(bridge) => bridge.layer(),
        Err(e) => {
            report(&e);
            TracingBridge::new().layer()
        }
    }
}

fn report(e: &ConfigError) {
    #[cfg(feature = "sdk-core")]
    crate::diag::warn(format_args!(
        "{e:?}; the tracing bridge records nothing (use TracingBridge::from_env to handle the error)"
    ));
    #[cfg(not(feature = "sdk-core"))]
    {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "lens: {e:?}; the tracing bridge records nothing (use TracingBridge::from_env to handle the error)"
        );
    }
}
