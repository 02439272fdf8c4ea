//! The forwarding span: how a span of lens's path is current in
//! OpenTelemetry (`NEMO_LENS_OTEL_CONTEXT=full`). What OpenTelemetry code
//! does to it through `get_active_span` reaches the span's record.

use super::end::end_record;
use crate::engine::clock;
use crate::engine::open::Registration;
use opentelemetry::trace::{SpanContext, Status};
use opentelemetry::KeyValue;
use std::borrow::Cow;
use std::time::SystemTime;

/// A span of lens's path as it lives in an OpenTelemetry context: its ids
/// and the place of its record.
#[derive(Debug)]
pub(crate) struct ForwardingSpan {
    pub(super) sc: SpanContext,
    pub(super) reg: Registration,
}

impl opentelemetry::trace::Span for ForwardingSpan {
    fn add_event_with_timestamp<T>(
        &mut self,
        name: T,
        timestamp: SystemTime,
        attributes: Vec<KeyValue>,
    ) where
        T: Into<Cow<'static, str>>,
    {
        // the caller's conversion runs before the list is locked: code
        // that starts a span (or panics) there must not find it locked
        let name = name.into();
        self.reg
            .with_record(|r| r.add_event(name, timestamp, attributes));
    }

    fn span_context(&self) -> &SpanContext {
        &self.sc
    }

    fn is_recording(&self) -> bool {
        self.reg.with_record(|_| ()).is_some()
    }

    fn set_attribute(&mut self, attribute: KeyValue) {
        self.reg.with_record(|r| r.set_attribute(attribute));
    }

    fn set_status(&mut self, status: Status) {
        self.reg.with_record(|r| r.set_status(status));
    }

    fn update_name<T>(&mut self, new_name: T)
    where
        T: Into<Cow<'static, str>>,
    {
        let name = new_name.into(); // before the lock, as above
        self.reg.with_record(|r| r.update_name(name));
    }

    fn add_link(&mut self, span_context: SpanContext, attributes: Vec<KeyValue>) {
        self.reg
            .with_record(|r| r.add_link(span_context, attributes));
    }

    fn end_with_timestamp(&mut self, timestamp: SystemTime) {
        end_record(
            &self.reg,
            || self.sc.is_sampled(),
            clock::from_system(timestamp),
        );
    }
}
