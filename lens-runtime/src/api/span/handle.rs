//! The span an operation reaches: an OpenTelemetry span through its
//! context, or the record of a span of lens's own path.
//!
//! Under `NEMO_LENS_OTEL_CONTEXT=ids` a span of lens's path is current in
//! OpenTelemetry as its ids only (no forwarding span), so `cx.span()` is
//! not recording. Lens's own API (span methods, `#[trace_fn(ret)]`, the
//! `tracing` bridge, `set_attributes` on a context) reaches the record
//! through [`span_of`], which finds it by its span id.

use opentelemetry::trace::{SpanContext, SpanRef, Status, TraceContextExt};
use opentelemetry::{Context, KeyValue};
use std::borrow::Cow;

#[cfg(feature = "sdk-core")]
use crate::api::engine_socket::{find, recorder, Registration};

/// Where span operations go.
pub(crate) enum SpanHandle<'a> {
    /// A span in an OpenTelemetry context (the SDK's, a forwarding span,
    /// or a non-recording one).
    Otel(SpanRef<'a>),
    /// The record of a span of lens's own path.
    #[cfg(feature = "sdk-core")]
    Record(Registration),
}

/// The span of `cx`, reaching the record of a span of lens's path whose
/// context holds only its ids.
pub(crate) fn span_of(cx: &Context) -> SpanHandle<'_> {
    let span = cx.span();
    #[cfg(feature = "sdk-core")]
    if recorder::ids_only() && !span.is_recording() {
        let sc = span.span_context();
        if sc.is_valid() && !sc.is_remote() {
            if let Some(reg) = find(sc.trace_id(), sc.span_id()) {
                return SpanHandle::Record(reg);
            }
        }
    }
    SpanHandle::Otel(span)
}

impl SpanHandle<'_> {
    pub(crate) fn is_recording(&self) -> bool {
        match self {
            SpanHandle::Otel(s) => s.is_recording(),
            #[cfg(feature = "sdk-core")]
            SpanHandle::Record(reg) => reg.with_record(|_| ()).is_some(),
        }
    }

    pub(crate) fn set_attribute(&self, attribute: KeyValue) {
        match self {
            SpanHandle::Otel(s) => s.set_attribute(attribute),
            #[cfg(feature = "sdk-core")]
            SpanHandle::Record(reg) => {
                reg.with_record(|r| r.set_attribute(attribute));
            }
        }
    }

    #[cfg_attr(not(feature = "tracing"), allow(dead_code))] // the bridge
    pub(crate) fn set_attributes(&self, attributes: impl IntoIterator<Item = KeyValue>) {
        match self {
            SpanHandle::Otel(s) => s.set_attributes(attributes),
            #[cfg(feature = "sdk-core")]
            SpanHandle::Record(reg) => {
                reg.with_record(|r| attributes.into_iter().for_each(|a| r.set_attribute(a)));
            }
        }
    }

    pub(crate) fn add_event(&self, name: impl Into<Cow<'static, str>>, attributes: Vec<KeyValue>) {
        match self {
            SpanHandle::Otel(s) => s.add_event(name, attributes),
            #[cfg(feature = "sdk-core")]
            SpanHandle::Record(reg) => {
                // the caller's conversion runs before the list is locked
                let (name, now) = (name.into(), opentelemetry::time::now());
                reg.with_record(|r| r.add_event(name, now, attributes));
            }
        }
    }

    pub(crate) fn set_status(&self, status: Status) {
        match self {
            SpanHandle::Otel(s) => s.set_status(status),
            #[cfg(feature = "sdk-core")]
            SpanHandle::Record(reg) => {
                reg.with_record(|r| r.set_status(status));
            }
        }
    }

    #[cfg_attr(not(feature = "tracing"), allow(dead_code))] // the bridge
    pub(crate) fn update_name(&self, name: impl Into<Cow<'static, str>>) {
        match self {
            SpanHandle::Otel(s) => s.update_name(name),
            #[cfg(feature = "sdk-core")]
            SpanHandle::Record(reg) => {
                let name = name.into(); // before the list is locked
                reg.with_record(|r| r.update_name(name));
            }
        }
    }

    #[cfg_attr(not(feature = "tracing"), allow(dead_code))] // the bridge
    pub(crate) fn add_link(&self, span_context: SpanContext, attributes: Vec<KeyValue>) {
        match self {
            SpanHandle::Otel(s) => s.add_link(span_context, attributes),
            #[cfg(feature = "sdk-core")]
            SpanHandle::Record(reg) => {
                reg.with_record(|r| r.add_link(span_context, attributes));
            }
        }
    }
}

// The span of a context, as lens's attribute helpers reach it (also the
// record of a span current as its ids only).
impl crate::api::attr::SpanAttributeTarget for Context {
    fn is_recording(&self) -> bool {
        span_of(self).is_recording()
    }
    fn set_checked_attribute(&self, attribute: KeyValue) {
        span_of(self).set_attribute(attribute);
    }
}
