//! The record of a span of lens's own path: what it has gathered while
//! open, and the finished span the collector turns into the SDK's
//! `SpanData`. Limits are the SDK's defaults (128 attributes, events and
//! links per span, 128 attributes per event and link).

use super::clock::{self, Stamp};
use crate::api::attr::Attrs;
use crate::api::semconv;
use opentelemetry::trace::{
    Event, Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use std::borrow::Cow;
use std::time::SystemTime;

/// The SDK's default span limits, which lens's providers use.
pub(super) const LIMIT: usize = 128;

/// What a recording span has gathered so far; also the finished span, once
/// `end` is set.
#[derive(Debug)]
pub(crate) struct Record {
    pub(super) trace_id: TraceId,
    pub(super) span_id: SpanId,
    pub(super) flags: TraceFlags,
    pub(super) parent_span_id: SpanId,
    pub(super) parent_is_remote: bool,
    pub(super) kind: SpanKind,
    pub(super) name: Cow<'static, str>,
    pub(super) start: Stamp,
    pub(super) end: Stamp,
    pub(super) attributes: Attrs,
    pub(super) dropped_attributes: u32,
    /// The rest, rare on hot spans: boxed apart, so that the record stays
    /// small (it moves into its list and out again).
    pub(super) more: Option<Box<More>>,
    pub(super) scope: &'static InstrumentationScope,
}

#[derive(Debug, Default)]
pub(super) struct More {
    pub(super) trace_state: TraceState,
    pub(super) status: Status,
    pub(super) events: SpanEvents,
    pub(super) links: SpanLinks,
}

/// Keeps at most the SDK's limit of `items`; returns how many were dropped.
pub(super) fn keep_limit<T>(items: &mut Vec<T>) -> u32 {
    let dropped = items.len().saturating_sub(LIMIT) as u32;
    items.truncate(LIMIT);
    dropped
}

pub(super) fn limit_events(mut events: Vec<Event>) -> SpanEvents {
    let mut out = SpanEvents::default();
    out.dropped_count = keep_limit(&mut events);
    for e in &mut events {
        e.dropped_attributes_count = keep_limit(&mut e.attributes);
    }
    out.events = events;
    out
}

pub(super) fn limit_links(mut links: Vec<Link>) -> SpanLinks {
    let mut out = SpanLinks::default();
    out.dropped_count = keep_limit(&mut links);
    for l in &mut links {
        l.dropped_attributes_count = keep_limit(&mut l.attributes);
    }
    out.links = links;
    out
}

impl Record {
    pub(crate) fn set_attribute(&mut self, attribute: KeyValue) {
        if self.attributes.len() < LIMIT {
            self.attributes.push(attribute);
        } else {
            self.dropped_attributes += 1;
        }
    }

    fn more(&mut self) -> &mut More {
        self.more.get_or_insert_with(Box::default)
    }

    pub(crate) fn add_event(
        &mut self,
        name: Cow<'static, str>,
        at: SystemTime,
        mut attributes: Vec<KeyValue>,
    ) {
        let events = &mut self.more().events;
        if events.events.len() < LIMIT {
            let dropped = keep_limit(&mut attributes);
            events
                .events
                .push(Event::new(name, at, attributes, dropped));
        } else {
            events.dropped_count += 1;
        }
    }

    pub(crate) fn add_link(&mut self, span_context: SpanContext, mut attributes: Vec<KeyValue>) {
        let links = &mut self.more().links;
        if links.links.len() < LIMIT {
            let dropped = keep_limit(&mut attributes);
            links
                .links
                .push(Link::new(span_context, attributes, dropped));
        } else {
            links.dropped_count += 1;
        }
    }

    pub(crate) fn update_name(&mut self, name: Cow<'static, str>) {
        self.name = name;
    }

    /// Whether this is the record of the span `trace_id`/`span_id`.
    pub(crate) fn is(&self, trace_id: TraceId, span_id: SpanId) -> bool {
        self.span_id == span_id && self.trace_id == trace_id
    }

    pub(crate) fn set_status(&mut self, status: Status) {
        // a total order, as in the SDK: Ok > Error > Unset
        if status > Status::Unset && self.more.as_ref().is_none_or(|m| status > m.status) {
            self.more().status = status;
        }
    }

    /// Marks a span ended by telemetry shutdown, now.
    pub(crate) fn truncate(&mut self, reason: &str) {
        self.set_attribute(KeyValue::new(semconv::NEMO_SPAN_TRUNCATED, true));
        let attrs = vec![KeyValue::new(
            semconv::NEMO_SPAN_TRUNCATED_REASON,
            reason.to_owned(),
        )];
        self.add_event(
            semconv::NEMO_SPAN_TRUNCATED.into(),
            opentelemetry::time::now(),
            attrs,
        );
        self.end = clock::now();
    }

    pub(crate) fn is_sampled(&self) -> bool {
        self.flags.is_sampled()
    }

    /// The span as the SDK's exporters take it.
    pub(crate) fn into_span_data(self) -> SpanData {
        let more = self.more.map(|m| *m).unwrap_or_default();
        SpanData {
            span_context: SpanContext::new(
                self.trace_id,
                self.span_id,
                self.flags,
                false,
                more.trace_state,
            ),
            parent_span_id: self.parent_span_id,
            parent_span_is_remote: self.parent_is_remote,
            span_kind: self.kind,
            name: self.name,
            start_time: clock::to_system(self.start),
            end_time: clock::to_system(self.end.max(self.start)),
            attributes: self.attributes.into_vec(),
            dropped_attributes_count: self.dropped_attributes,
            events: more.events,
            links: more.links,
            status: more.status,
            instrumentation_scope: self.scope.clone(),
        }
    }
}
