//! The `tracing_subscriber` layer: the spans the filter lets through
//! become lens spans (one per span, or one per entry), and events in them
//! span events or log records.

use super::fields::{merge, Fields};
use super::filter::RouteTable;
use super::route::{Route, Routes, TracingMode};
use crate::api::semconv::{CODE_FILE_PATH, CODE_LINE_NUMBER, CODE_NAMESPACE};
use crate::api::span::start::{start_detached_builder, start_detached_in};
use crate::api::span::{span_of, LensSpan, SpanGuard};
use opentelemetry::trace::{SpanBuilder, SpanKind, Status, TraceContextExt};
use opentelemetry::{Context, ContextGuard, KeyValue};
use std::any::TypeId;
use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context as LayerContext, Layer};
use tracing_subscriber::registry::LookupSpan;

/// How many attributes [`callsite`] adds at most.
const CALLSITE_ATTRIBUTES: usize = 3;

/// The callsite of a span as attributes (semantic conventions 1.37):
/// `code.namespace` (the target: deprecated upstream in favour of a
/// fully-qualified `code.function.name`, which a `tracing` callsite does not
/// have), `code.file.path`, `code.line.number`. The metadata's strings are
/// `'static`: no allocation.
#[inline]
fn callsite(meta: &'static Metadata<'static>, attributes: &mut Vec<KeyValue>) {
    attributes.push(KeyValue::new(CODE_NAMESPACE, meta.target()));
    if let Some(file) = meta.file() {
        attributes.push(KeyValue::new(CODE_FILE_PATH, file));
    }
    if let Some(line) = meta.line() {
        attributes.push(KeyValue::new(CODE_LINE_NUMBER, i64::from(line)));
    }
}

/// What the bridge keeps in a `tracing` span's extensions.
enum State {
    /// Lifetime mode: one lens span from creation to close.
    Lifetime(LensSpan),
    /// Per-entry mode: what each entry's span is made of.
    PerEntry(Box<Template>),
}

struct Template {
    route: Route,
    name: Cow<'static, str>,
    kind: SpanKind,
    attributes: Vec<KeyValue>,
}

/// What an entered span holds on this thread until it exits.
enum Entered {
    /// A lifetime span's context, current until the exit.
    Attached(#[allow(dead_code)] ContextGuard),
    /// The span of one entry (ends at the exit).
    Entry(SpanGuard),
}

thread_local! {
    /// `(tracing span id, what its entry holds)`, innermost last.
    static ENTERED: RefCell<Vec<(u64, Entered)>> = const { RefCell::new(Vec::new()) };
}

/// The context of the entry of span `id` on this thread, if it is entered
/// here in per-entry mode.
fn entry_context(id: u64) -> Option<Context> {
    ENTERED
        .try_with(|e| {
            let e = e.try_borrow().ok()?;
            e.iter().rev().find_map(|(i, en)| match en {
                Entered::Entry(g) if *i == id => Some(g.context().clone()),
                _ => None,
            })
        })
        .ok()
        .flatten()
}

/// The layer [`tracing_layer`](crate::tracing_layer) and
/// [`TracingBridge::layer`](crate::TracingBridge::layer) return: add it to a
/// `tracing_subscriber` registry, next to any other layers.
///
/// By default a group that is off affects this layer alone: the other
/// layers of the subscriber see every span as they would without lens.
/// With [`TracingBridge::global_filter`](crate::TracingBridge::global_filter)
/// a span of a target routed to a group that is off (lifetime mode) is not
/// created at all, for any layer. Targets the bridge does not route are
/// always left to the other layers.
///
/// Each recorded span carries its callsite: `code.namespace` (the target),
/// `code.file.path` and `code.line.number`.
///
/// ```
/// use lens::tracing::tracing_subscriber::{layer::SubscriberExt as _, registry};
/// let subscriber = registry().with(lens::tracing::layer());
/// # drop(subscriber);
/// ```
#[derive(Debug)]
pub struct TracingLayer {
    shared: Arc<RouteTable>,
    /// Forward events to the log bridge here (no `LogBridgeLayer` below).
    #[cfg_attr(not(feature = "logs"), allow(dead_code))]
    forward_logs: bool,
}

impl TracingLayer {
    pub(crate) fn new(routes: Routes, global: bool) -> Self {
        TracingLayer {
            shared: Arc::new(RouteTable::new(routes, global)),
            forward_logs: true,
        }
    }

    /// The lens context of a recorded span (its own, or its entry's on this
    /// thread), else of its nearest recorded ancestor.
    fn context_of<S>(&self, id: &Id, ctx: &LayerContext<'_, S>) -> Option<Context>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let span = ctx.span(id)?;
        for s in span.scope() {
            match s.extensions().get::<State>() {
                Some(State::Lifetime(ls)) => return Some(ls.context().clone()),
                Some(State::PerEntry(_)) => {
                    if let Some(cx) = entry_context(s.id().into_u64()) {
                        return Some(cx);
                    }
                }
                None => {}
            }
        }
        None
    }

    fn parent(
        &self,
        attrs: &Attributes<'_>,
        ctx: &LayerContext<'_, impl Subscriber + for<'a> LookupSpan<'a>>,
    ) -> Context {
        if attrs.is_root() {
            Context::new()
        } else if let Some(parent) = attrs.parent() {
            self.context_of(parent, ctx)
                .unwrap_or_else(Context::current)
        } else {
            // the current context: the innermost entered bridged span or
            // lens span on this thread (entering a bridged span attaches it)
            Context::current()
        }
    }
}

impl<S> Layer<S> for TracingLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        self.shared.register(meta)
    }

    #[inline]
    fn enabled(&self, meta: &Metadata<'_>, _ctx: LayerContext<'_, S>) -> bool {
        self.shared.enabled(meta)
    }

    fn on_layer(&mut self, _subscriber: &mut S) {
        #[cfg(feature = "logs")]
        {
            self.forward_logs = !crate::sdk::logs::forwarder_below(_subscriber);
        }
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: LayerContext<'_, S>) {
        let meta = attrs.metadata();
        let Some(route) = self.shared.route(meta) else {
            return;
        };
        // per-layer mode: the group decides here, for lens alone (global
        // mode refused the span in `enabled`; per-entry tests each entry)
        if route.mode == TracingMode::Lifetime && !route.group.is_enabled() {
            return;
        }
        let mut fields = Fields::span(meta.fields().len() + CALLSITE_ATTRIBUTES);
        callsite(meta, &mut fields.attributes);
        attrs.record(&mut fields);
        let name = fields.name.take().unwrap_or(Cow::Borrowed(meta.name()));
        let kind = fields.kind.take().unwrap_or(SpanKind::Internal);
        let state = match route.mode {
            TracingMode::Lifetime => {
                let parent = self.parent(attrs, &ctx);
                let builder = SpanBuilder::from_name(name)
                    .with_kind(kind)
                    .with_attributes(fields.attributes);
                State::Lifetime(start_detached_in(builder, &parent))
            }
            TracingMode::PerEntry => State::PerEntry(Box::new(Template {
                route,
                name,
                kind,
                attributes: fields.attributes,
            })),
        };
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().replace(state);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: LayerContext<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut fields = Fields::span(values.len());
        values.record(&mut fields);
        let mut ext = span.extensions_mut();
        match ext.get_mut::<State>() {
            Some(State::Lifetime(ls)) => {
                let s = ls.handle();
                if let Some(name) = fields.name {
                    s.update_name(name);
                }
                s.set_attributes(fields.attributes);
            }
            Some(State::PerEntry(t)) => {
                if let Some(name) = fields.name {
                    t.name = name;
                }
                if let Some(cx) = entry_context(id.into_u64()) {
                    span_of(&cx).set_attributes(fields.attributes.iter().cloned());
                }
                merge(&mut t.attributes, fields.attributes);
            }
            None => {}
        }
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, ctx: LayerContext<'_, S>) {
        let Some(other) = self.context_of(follows, &ctx) else {
            return;
        };
        let Some(span) = ctx.span(id) else { return };
        let ext = span.extensions();
        if let Some(State::Lifetime(ls)) = ext.get::<State>() {
            let linked = other.span().span_context().clone();
            ls.handle().add_link(linked, Vec::new());
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: LayerContext<'_, S>) {
        let meta = event.metadata();
        #[cfg(feature = "logs")]
        if let Some(active) = crate::sdk::logs::tracing_event_taker(meta) {
            // the log bridge takes it: a log record with the span's ids,
            // never a span event too
            if self.forward_logs {
                crate::sdk::logs::forward_tracing_event(&active, event, ctx);
            }
            return;
        }
        if *meta.level() > self.shared.floor {
            return;
        }
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        let Some(cx) = self.context_of(&span.id(), &ctx) else {
            return;
        };
        let mut fields = Fields::event(meta.fields().len() + 2);
        event.record(&mut fields);
        let name = fields
            .message
            .take()
            .unwrap_or_else(|| meta.name().to_owned());
        fields
            .attributes
            .push(KeyValue::new("level", meta.level().as_str()));
        fields
            .attributes
            .push(KeyValue::new("target", meta.target().to_owned()));
        let s = span_of(&cx);
        if *meta.level() == tracing::Level::ERROR {
            s.set_status(Status::error(name.clone()));
        }
        s.add_event(name, fields.attributes);
    }

    fn on_enter(&self, id: &Id, ctx: LayerContext<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let entered = {
            let ext = span.extensions();
            match ext.get::<State>() {
                Some(State::Lifetime(ls)) => Entered::Attached(ls.context().clone().attach()),
                Some(State::PerEntry(t)) => {
                    // the group's bit, tested at every entry
                    if !t.route.group.is_enabled() {
                        return;
                    }
                    let builder = SpanBuilder::from_name(t.name.clone())
                        .with_kind(t.kind.clone())
                        .with_attributes(t.attributes.clone());
                    drop(ext);
                    // child of the current context: the entered bridged span
                    // or lens span that encloses this entry
                    Entered::Entry(start_detached_builder(builder).enter())
                }
                None => return,
            }
        };
        let _ = ENTERED.try_with(|e| {
            if let Ok(mut e) = e.try_borrow_mut() {
                e.push((id.into_u64(), entered));
            }
        });
    }

    fn on_exit(&self, id: &Id, _ctx: LayerContext<'_, S>) {
        let id = id.into_u64();
        let entered = ENTERED
            .try_with(|e| {
                let mut e = e.try_borrow_mut().ok()?;
                let at = e.iter().rposition(|(i, _)| *i == id)?;
                Some(e.remove(at).1)
            })
            .ok()
            .flatten();
        // dropped outside the borrow: ending a span may export, and the
        // exporter may emit `tracing` events of its own
        drop(entered);
    }

    fn on_close(&self, id: Id, ctx: LayerContext<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let state = span.extensions_mut().remove::<State>();
        drop(span);
        drop(state); // a lifetime span ends here
    }

    unsafe fn downcast_raw(&self, id: TypeId) -> Option<*const ()> {
        if id == TypeId::of::<Self>() {
            return Some(self as *const Self as *const ());
        }
        #[cfg(feature = "logs")]
        if id == TypeId::of::<crate::sdk::logs::ForwardsTracingEvents>() {
            let marker: &'static crate::sdk::logs::ForwardsTracingEvents =
                &crate::sdk::logs::FORWARDS_TRACING_EVENTS;
            return Some(marker as *const _ as *const ());
        }
        None
    }
}
