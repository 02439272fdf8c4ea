//! Lens's own span recorder (`NEMO_LENS_SPAN_PATH=lens`): spans are built
//! here instead of by the OpenTelemetry SDK's tracer, and finished spans
//! go into the ending thread's buffer ([`collect`]) instead of through the
//! SDK's span processors one by one.
//!
//! A span start draws its ids from the fork-safe generator, asks the
//! configured sampler (the same one the SDK tracer uses: rank-aware,
//! `OTEL_TRACES_SAMPLER`, parent-based) and reads the clock. The span is
//! made the current OpenTelemetry context as a [`RecSpan`]: raw
//! OpenTelemetry spans, `tracing-opentelemetry` and propagators see its
//! span context as their parent, and `get_active_span` reaches the record
//! itself (attributes, events, status), so nothing is forwarded twice.
//! Limits are the SDK's defaults (128 attributes, events and links per
//! span, 128 attributes per event and link).

use opentelemetry::trace::{
    Event, Link, SpanBuilder, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags,
};
use opentelemetry::{Context, InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{
    IdGenerator, SamplingDecision, ShouldSample, SpanData, SpanEvents, SpanLinks,
};
use std::borrow::Cow;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::time::SystemTime;

pub(crate) use collect::SpanSink;

/// The SDK's default span limits, which lens's providers use.
const LIMIT: usize = 128;

/// What spans on lens's path are made with: set by setup when
/// `NEMO_LENS_SPAN_PATH=lens`.
pub(crate) struct Recorder {
    pub(crate) sampler: Box<dyn ShouldSample>,
    pub(crate) ids: Box<dyn IdGenerator>,
    pub(crate) scope: InstrumentationScope,
}

static RECORDER: AtomicPtr<Recorder> = AtomicPtr::new(std::ptr::null_mut());

/// The recorder in use, if lens's span path is on (one acquire load).
#[inline]
pub(crate) fn get() -> Option<&'static Recorder> {
    // SAFETY: the pointer is null or a leaked `Box<Recorder>`, never freed.
    unsafe { RECORDER.load(Ordering::Acquire).as_ref() }
}

/// Turns lens's span path on with `recorder`; finished spans go to `sink`,
/// drained at least every `interval`. Each call leaks one small recorder
/// (calls are rare: setup, tests), so the hot path takes no lock.
pub(crate) fn install(
    recorder: Recorder,
    sink: std::sync::Arc<dyn SpanSink>,
    interval: std::time::Duration,
) {
    collect::set_sink(sink, interval);
    RECORDER.store(Box::into_raw(Box::new(recorder)), Ordering::Release);
}

/// Turns lens's span path off: new spans are built by the tracer again.
/// Spans still buffered stay there for the pipeline's last drain.
pub(crate) fn uninstall() {
    RECORDER.store(std::ptr::null_mut(), Ordering::Release);
}

/// In a forked child: forget the recorder and the parent's buffers (plain
/// atomic stores).
pub(crate) fn forget_after_fork() {
    uninstall();
    collect::reset_after_fork();
}

/// Sampled spans of this path that ended in a forked child (inert: never
/// exported), for the child's shutdown report.
pub(crate) fn dropped_in_child() -> u64 {
    collect::dropped_in_child()
}

/// Moves every thread's finished spans to the sink now (flush, shutdown).
pub(crate) fn drain() {
    collect::drain();
}

/// Forgets `sink` once its pipeline is shut down (if it is still the one
/// in use).
pub(crate) fn release_sink(sink: &std::sync::Arc<dyn SpanSink>) {
    collect::release_sink(sink);
}

/// A span of lens's path, as it lives in an OpenTelemetry context.
#[derive(Debug)]
pub(crate) struct RecSpan {
    sc: SpanContext,
    record: Option<Record>,
}

/// What a recording span has gathered so far.
#[derive(Debug)]
struct Record {
    parent_span_id: SpanId,
    parent_is_remote: bool,
    kind: SpanKind,
    name: Cow<'static, str>,
    start: SystemTime,
    attributes: Vec<KeyValue>,
    dropped_attributes: u32,
    events: SpanEvents,
    links: SpanLinks,
    status: Status,
    scope: &'static InstrumentationScope,
}

impl Recorder {
    /// Starts a span from `builder` as a child of `parent_cx`, as the SDK's
    /// tracer would (same sampling, same limits), without its span object.
    pub(crate) fn start(&'static self, builder: SpanBuilder, parent_cx: &Context) -> RecSpan {
        if parent_cx.is_telemetry_suppressed() {
            return RecSpan {
                sc: SpanContext::empty_context(),
                record: None,
            };
        }
        let span_id = self.ids.new_span_id();
        let parent = parent_cx.span();
        let psc = parent.span_context();
        let (trace_id, flags) = if psc.is_valid() {
            (psc.trace_id(), psc.trace_flags())
        } else {
            (self.ids.new_trace_id(), TraceFlags::default())
        };
        let kind = builder.span_kind.clone().unwrap_or(SpanKind::Internal);
        let result = self.sampler.should_sample(
            Some(parent_cx),
            trace_id,
            &builder.name,
            &kind,
            builder.attributes.as_deref().unwrap_or(&[]),
            builder.links.as_deref().unwrap_or(&[]),
        );
        let sampled = match result.decision {
            SamplingDecision::Drop => {
                return RecSpan {
                    sc: SpanContext::new(
                        trace_id,
                        span_id,
                        TraceFlags::default(),
                        false,
                        result.trace_state,
                    ),
                    record: None,
                };
            }
            SamplingDecision::RecordOnly => false,
            SamplingDecision::RecordAndSample => true,
        };
        let sc = SpanContext::new(
            trace_id,
            span_id,
            flags.with_sampled(sampled),
            false,
            result.trace_state,
        );
        let (parent_span_id, parent_is_remote) = if psc.is_valid() {
            (psc.span_id(), psc.is_remote())
        } else {
            (SpanId::INVALID, false)
        };
        let SpanBuilder {
            name,
            start_time,
            attributes,
            events,
            links,
            ..
        } = builder;
        let mut attributes = attributes.unwrap_or_default();
        attributes.extend(result.attributes);
        let dropped_attributes = keep_limit(&mut attributes);
        RecSpan {
            sc,
            record: Some(Record {
                parent_span_id,
                parent_is_remote,
                kind,
                name,
                start: start_time.unwrap_or_else(opentelemetry::time::now),
                attributes,
                dropped_attributes,
                events: limit_events(events),
                links: limit_links(links),
                status: Status::Unset,
                scope: &self.scope,
            }),
        }
    }
}

/// Keeps at most the SDK's limit of `items`; returns how many were dropped.
fn keep_limit<T>(items: &mut Vec<T>) -> u32 {
    let dropped = items.len().saturating_sub(LIMIT) as u32;
    items.truncate(LIMIT);
    dropped
}

fn limit_events(events: Option<Vec<Event>>) -> SpanEvents {
    let mut out = SpanEvents::default();
    if let Some(mut events) = events {
        out.dropped_count = keep_limit(&mut events);
        for e in &mut events {
            e.dropped_attributes_count = keep_limit(&mut e.attributes);
        }
        out.events = events;
    }
    out
}

fn limit_links(links: Option<Vec<Link>>) -> SpanLinks {
    let mut out = SpanLinks::default();
    if let Some(mut links) = links {
        out.dropped_count = keep_limit(&mut links);
        for l in &mut links {
            l.dropped_attributes_count = keep_limit(&mut l.attributes);
        }
        out.links = links;
    }
    out
}

impl opentelemetry::trace::Span for RecSpan {
    fn add_event_with_timestamp<T>(
        &mut self,
        name: T,
        timestamp: SystemTime,
        mut attributes: Vec<KeyValue>,
    ) where
        T: Into<Cow<'static, str>>,
    {
        if let Some(r) = &mut self.record {
            if r.events.events.len() < LIMIT {
                let dropped = attributes.len().saturating_sub(LIMIT) as u32;
                attributes.truncate(LIMIT);
                r.events
                    .events
                    .push(Event::new(name, timestamp, attributes, dropped));
            } else {
                r.events.dropped_count += 1;
            }
        }
    }

    fn span_context(&self) -> &SpanContext {
        &self.sc
    }

    fn is_recording(&self) -> bool {
        self.record.is_some()
    }

    fn set_attribute(&mut self, attribute: KeyValue) {
        if let Some(r) = &mut self.record {
            if r.attributes.len() < LIMIT {
                r.attributes.push(attribute);
            } else {
                r.dropped_attributes += 1;
            }
        }
    }

    fn set_status(&mut self, status: Status) {
        if let Some(r) = &mut self.record {
            // a total order, as in the SDK: Ok > Error > Unset
            if status > r.status {
                r.status = status;
            }
        }
    }

    fn update_name<T>(&mut self, new_name: T)
    where
        T: Into<Cow<'static, str>>,
    {
        if let Some(r) = &mut self.record {
            r.name = new_name.into();
        }
    }

    fn add_link(&mut self, span_context: SpanContext, mut attributes: Vec<KeyValue>) {
        if let Some(r) = &mut self.record {
            if r.links.links.len() < LIMIT {
                let dropped = attributes.len().saturating_sub(LIMIT) as u32;
                attributes.truncate(LIMIT);
                r.links
                    .links
                    .push(Link::new(span_context, attributes, dropped));
            } else {
                r.links.dropped_count += 1;
            }
        }
    }

    fn end_with_timestamp(&mut self, timestamp: SystemTime) {
        let Some(r) = self.record.take() else {
            return;
        };
        collect::push(SpanData {
            span_context: self.sc.clone(),
            parent_span_id: r.parent_span_id,
            parent_span_is_remote: r.parent_is_remote,
            span_kind: r.kind,
            name: r.name,
            start_time: r.start,
            end_time: timestamp,
            attributes: r.attributes,
            dropped_attributes_count: r.dropped_attributes,
            events: r.events,
            links: r.links,
            status: r.status,
            instrumentation_scope: r.scope.clone(),
        });
    }
}

impl Drop for RecSpan {
    fn drop(&mut self) {
        // as the SDK's span: one never ended explicitly ends when dropped
        if self.record.is_some() {
            opentelemetry::trace::Span::end(self);
        }
    }
}

pub(crate) mod collect;
