//! The two front ends: a `log` logger and a `tracing` layer, both forwarding
//! to the bridge the latest setup configured.

use crate::sdk::logs::options::{target_accepted, Level};
use crate::sdk::logs::state::{current, emit_once, level_passes, Active};
use std::any::TypeId;
use std::sync::Arc;
use tracing_subscriber::layer::Context as LayerContext;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// Sends the `log` crate's records to the current bridge.
///
/// [`setup_logging_bridge`](crate::setup::setup_logging_bridge) installs it as the process's `log` logger. When
/// another logger holds that slot, chain this one into it: it forwards
/// whatever the latest [`setup_logging_bridge`](crate::setup::setup_logging_bridge) call configured (nothing
/// before the first call or when the bridge is inactive).
///
/// ```
/// use lens::{logs::log::Log, logs::log::Record};
/// let bridge = lens::logs::LogBridgeLogger;
/// // e.g. from your own logger's `log` method:
/// bridge.log(&Record::builder().target("trainer").args(format_args!("hi")).build());
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct LogBridgeLogger;

impl log::Log for LogBridgeLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        level_passes(Level::from_log(metadata.level()))
            && current().is_some_and(|a| {
                a.log_on
                    && target_accepted(&a.targets, metadata.target())
                    && a.log.enabled(metadata)
            })
    }

    fn log(&self, record: &log::Record<'_>) {
        if !level_passes(Level::from_log(record.level())) {
            return;
        }
        let Some(active) = current() else { return };
        if active.log_on && target_accepted(&active.targets, record.target()) {
            emit_once(|| active.log.log(record));
        }
    }

    fn flush(&self) {}
}

/// A `tracing_subscriber` layer that sends `tracing` events to the current
/// bridge.
///
/// It forwards whatever the latest [`setup_logging_bridge`](crate::setup::setup_logging_bridge) call configured
/// (nothing before the first call or when the bridge is inactive), so it can
/// be added to a subscriber before telemetry is set up. A second bridge
/// layer in the same subscriber stays silent: every event is forwarded once.
/// It never filters the events other layers see.
///
/// ```
/// use lens::tracing::tracing_subscriber::{layer::SubscriberExt as _, registry};
/// use lens::logs::LogBridgeLayer;
/// let subscriber = registry().with(LogBridgeLayer::new());
/// lens::tracing::tracing::subscriber::with_default(subscriber, || {
///     lens::tracing::tracing::info!(target: "trainer", "bridged once set up");
/// });
/// ```
#[derive(Debug, Clone, Default)]
pub struct LogBridgeLayer {
    /// Another bridge layer is already in the subscriber below this one.
    duplicate: bool,
}

impl LogBridgeLayer {
    /// A new layer.
    ///
    /// ```
    /// let layer = lens::logs::LogBridgeLayer::new();
    /// # drop(layer);
    /// ```
    pub fn new() -> Self {
        LogBridgeLayer::default()
    }
}

impl<S> Layer<S> for LogBridgeLayer
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_layer(&mut self, subscriber: &mut S) {
        self.duplicate = forwarder_below(subscriber);
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: LayerContext<'_, S>) {
        if self.duplicate {
            return;
        }
        if let Some(active) = tracing_event_taker(event.metadata()) {
            forward_tracing_event(&active, event, ctx);
        }
    }
}

/// Answered (through `Layer::downcast_raw`) by a layer that forwards
/// `tracing` events to the log bridge itself (the tracing bridge's layer),
/// so that a [`LogBridgeLayer`] in the same subscriber stays silent.
#[derive(Debug)]
pub(crate) struct ForwardsTracingEvents;

/// The value a forwarding layer's `downcast_raw` points at.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))] // the tracing bridge
pub(crate) static FORWARDS_TRACING_EVENTS: ForwardsTracingEvents = ForwardsTracingEvents;

/// Whether the subscriber below already holds a layer that forwards
/// `tracing` events to the log bridge (a [`LogBridgeLayer`], or the tracing
/// bridge's layer).
pub(crate) fn forwarder_below<S: tracing::Subscriber>(subscriber: &S) -> bool {
    // SAFETY: the returned pointers are only compared with `None`, never
    // dereferenced.
    unsafe {
        subscriber
            .downcast_raw(TypeId::of::<LogBridgeLayer>())
            .is_some()
            || subscriber
                .downcast_raw(TypeId::of::<ForwardsTracingEvents>())
                .is_some()
    }
}

/// The bridge configuration that takes a `tracing` event of `metadata` as
/// a log record, if the latest setup asked for one (level, `tracing` on,
/// target accepted).
pub(crate) fn tracing_event_taker(metadata: &tracing::Metadata<'_>) -> Option<Arc<Active>> {
    if !level_passes(Level::from_tracing(metadata.level())) {
        return None;
    }
    let active = current()?;
    (active.tracing_on && target_accepted(&active.targets, metadata.target())).then_some(active)
}

/// Sends `event` to the logger provider of `active` (once per thread at a
/// time: a record produced while emitting one is dropped).
pub(crate) fn forward_tracing_event<S>(
    active: &Active,
    event: &tracing::Event<'_>,
    ctx: LayerContext<'_, S>,
) where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    emit_once(|| active.tracing.on_event(event, ctx));
}
