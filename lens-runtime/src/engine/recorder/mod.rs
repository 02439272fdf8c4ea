//! Lens's own span recorder (`NEMO_LENS_SPAN_PATH=lens`): spans are built
//! here instead of by the OpenTelemetry SDK's tracer.
//!
//! A span start draws its ids from the fork-safe generator, asks the
//! configured sampler (the same one the SDK tracer uses: rank-aware,
//! `OTEL_TRACES_SAMPLER`, parent-based) and reads the clock. Its record
//! (ids, name, times, attributes, status; events and links boxed apart)
//! lives in the starting thread's open-span list ([`open`](crate::engine::open))
//! while the span is open, and stays in its slot, marked finished, when it
//! ends, until the list's finished records are handed over together: one
//! uncontended lock at start, one at the end, no allocation for the record
//! itself and no copy of it on the span's thread. The collector ([`collector`]) hands finished records
//! to the sink off the calling thread, whose exporter thread builds the
//! SDK's `SpanData` from them ([`to_span_data`](crate::engine::to_span_data)).
//!
//! The span is made the current OpenTelemetry context as a [`ForwardingSpan`], a
//! small span that holds only its ids and the record's place: raw
//! OpenTelemetry spans, `tracing-opentelemetry` and propagators see its
//! span context as their parent, and `get_active_span`'s
//! `set_attribute`/`add_event`/`set_status` reach the record. Limits are
//! the provider's ([`RecordSettings`]).

mod end;
pub(crate) mod forwarding_span;
pub(crate) mod ids;
pub(crate) mod placement;
mod start_options;

use crate::engine::attrs::Attrs;
use crate::engine::clock;
use crate::engine::collector::{self, SpanSink};
use crate::engine::open::record_slots::NewSlot;
use crate::engine::record::{limit_events, limit_links, RareFields};
use crate::engine::record::{Record, RecordSettings};
pub(crate) use end::end_record;
use forwarding_span::ForwardingSpan;
use opentelemetry::trace::{
    SpanBuilder, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceState,
};
use opentelemetry::Context;
use opentelemetry_sdk::trace::{SamplingDecision, ShouldSample};
use placement::{OwnedRef, SpanPlace, Written};
use start_options::{BuilderOptions, NoOptions, StartOptions};
use std::borrow::Cow;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// What spans on lens's path are made with: set by setup when
/// `NEMO_LENS_SPAN_PATH=lens`.
pub(crate) struct Recorder {
    pub(crate) sampler: Box<dyn ShouldSample>,
    /// The sampler decides as `parentbased_always_on` (the default, kept
    /// by this rank): the recorder decides so itself, without the call.
    pub(crate) default_sampling: bool,
    /// `NEMO_LENS_OTEL_CONTEXT=ids`: a span is current in OpenTelemetry as
    /// its ids only, without the forwarding span.
    pub(crate) ids_only: bool,
    /// The scope and the span limits of its records.
    pub(crate) settings: RecordSettings,
}

static RECORDER: AtomicPtr<Recorder> = AtomicPtr::new(std::ptr::null_mut());
/// Set once a recorder with `ids_only` was installed (and kept: its spans
/// may outlive it).
static IDS_ONLY: AtomicBool = AtomicBool::new(false);

/// Recorders installed in this process so far.
static INSTALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Whether records of more than one pipeline may exist in this process (a
/// recorder was installed more than once: a re-init, set-ups one after
/// another, or a set-up in a forked child, which inherits the count), so
/// that a sink may be handed records that are not its own. While it says
/// no, there was one install, and every record is of its recorder: a
/// record of a later recorder is made after the load of `RECORDER` that
/// sees it, published after that install was counted and its sink set, so
/// whoever hands the record over sees the count at two and the new sink.
/// And a sink handed an older pipeline's record counted the install that
/// made it the sink in use before it was published.
pub(crate) fn may_mix_pipelines() -> bool {
    INSTALLS.load(Ordering::Relaxed) > 1
}

/// Whether spans of lens's path may be current as their ids only.
#[inline]
pub(crate) fn ids_only() -> bool {
    IDS_ONLY.load(Ordering::Relaxed)
}

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
    // counted before the sink is in use: a sink that finds one install
    // only knows every record it is handed is its own
    INSTALLS.fetch_add(1, Ordering::Relaxed);
    collector::set_sink(sink, interval);
    if recorder.ids_only {
        IDS_ONLY.store(true, Ordering::Relaxed);
    }
    RECORDER.store(Box::into_raw(Box::new(recorder)), Ordering::Release);
}

/// Turns lens's span path off: new spans are built by the tracer again.
/// Spans still buffered stay there for the pipeline's last drain.
pub(crate) fn uninstall() {
    RECORDER.store(std::ptr::null_mut(), Ordering::Release);
}

/// In a forked child: forget the recorder and the parent's spans (plain
/// atomic stores).
pub(crate) fn forget_after_fork() {
    uninstall();
    collector::reset_after_fork();
}

/// Sampled spans of this path that ended in a forked child (inert: never
/// exported), for the child's shutdown report.
pub(crate) fn dropped_in_child() -> u64 {
    collector::dropped_in_child()
}

/// Moves every thread's finished spans to the sink now (flush, shutdown),
/// those of batches an ending thread is handing over too (waited for until
/// `until` at most): every span that ended before the call.
pub(crate) fn drain(until: std::time::Instant) {
    collector::drain(Some(until));
}

/// Forgets `sink` once its pipeline is shut down (if it is still the one
/// in use).
pub(crate) fn release_sink(sink: &std::sync::Arc<dyn SpanSink>) {
    collector::release_sink(sink);
}

impl Recorder {
    /// Starts a span from `builder` as a child of `parent_cx`, as the SDK's
    /// tracer would (same sampling, same limits), without its span object:
    /// written into `place`.
    #[inline(always)]
    pub(crate) fn start_into<'a>(
        &'static self,
        builder: SpanBuilder,
        parent_cx: &Context,
        place: SpanPlace<'a>,
    ) -> Written<'a> {
        let SpanBuilder {
            name,
            span_kind,
            start_time,
            attributes,
            events,
            links,
            ..
        } = builder;
        let mut attributes = ManuallyDrop::new(attributes.map(Attrs::from).unwrap_or_default());
        self.start_parts(
            name,
            span_kind.unwrap_or(SpanKind::Internal),
            // SAFETY: `attributes` is not used again
            unsafe { OwnedRef::new(&mut attributes) },
            BuilderOptions {
                links: links.unwrap_or_default(),
                events: events.unwrap_or_default(),
                start_time,
            },
            parent_cx,
            place,
        )
    }

    /// Starts an internal span with `attributes` (moved into its record
    /// where they lie), child of `parent_cx`, written into `place`.
    #[inline(always)]
    pub(crate) fn start_simple_into<'a>(
        &'static self,
        name: Cow<'static, str>,
        attributes: OwnedRef<'_, Attrs>,
        parent_cx: &Context,
        place: SpanPlace<'a>,
    ) -> Written<'a> {
        self.start_parts(
            name,
            SpanKind::Internal,
            attributes,
            NoOptions,
            parent_cx,
            place,
        )
    }

    #[inline(always)]
    fn start_parts<'a>(
        &'static self,
        name: Cow<'static, str>,
        kind: SpanKind,
        mut attributes: OwnedRef<'_, Attrs>,
        options: impl StartOptions,
        parent_cx: &Context,
        mut place: SpanPlace<'a>,
    ) -> Written<'a> {
        if parent_cx.is_telemetry_suppressed() {
            return place.write(parent_cx.with_remote_span_context(SpanContext::empty_context()));
        }
        let parent = parent_cx.span();
        let psc = parent.span_context();
        // the fork-safe generator (a direct call, inlined: not through a
        // function pointer)
        // read once: the parent's ids are behind a pointer the stores
        // below may alias, so a second `is_valid` would load them again
        let root = !psc.is_valid();
        let (span_id, new_trace) = ids::draw(root);
        let (trace_id, flags) = match new_trace {
            None => (psc.trace_id(), psc.trace_flags()),
            Some(t) => (t, TraceFlags::default()),
        };
        let dropped = |place: SpanPlace<'a>, trace_state| -> Written<'a> {
            let sc = SpanContext::new(trace_id, span_id, TraceFlags::default(), false, trace_state);
            place.write(parent_cx.with_remote_span_context(sc))
        };
        // decided without a `SamplingResult` on the default path: its
        // tracestate, moved through it, was read back before its stores
        // reached the cache (a stall, `perf annotate`)
        // the span context, made in the arm that knows its tracestate
        let made = |sampled, trace_state| {
            SpanContext::new(
                trace_id,
                span_id,
                flags.with_sampled(sampled),
                false,
                trace_state,
            )
        };
        let sc = if self.default_sampling {
            // the SDK's `ParentBased(AlwaysOn)`: an active parent's flag,
            // else sampled; the parent's tracestate (most often none: made
            // as a constant where it goes, not cloned, nor moved there
            // through the stack)
            if parent_cx.has_active_span() && !psc.is_sampled() {
                return dropped(place, psc.trace_state().clone());
            }
            match *psc.trace_state() == TraceState::NONE {
                true => made(true, TraceState::NONE),
                false => made(true, psc.trace_state().clone()),
            }
        } else {
            // a copy made here: a reference to `kind` itself has it stored
            // on the stack on every path, sampled by the default or not
            let r = self.sampler.should_sample(
                Some(parent_cx),
                trace_id,
                &name,
                &kind.clone(),
                &attributes,
                options.links(),
            );
            let sampled = match r.decision {
                SamplingDecision::Drop => return dropped(place, r.trace_state),
                SamplingDecision::RecordOnly => false,
                SamplingDecision::RecordAndSample => true,
            };
            // added here, so that no list of them (empty on the default
            // path) is carried past the branch
            match r.attributes.is_empty() {
                false => attributes.0.extend(r.attributes),
                true => forget_empty(r.attributes),
            }
            made(sampled, r.trace_state)
        };
        let limits = &self.settings.limits;
        let max = limits.max_attributes_per_span as usize;
        // compared, not subtracted and tested: over the limit is rare
        let dropped_attributes = match attributes.len() > max {
            true => over_limit(&mut attributes, max),
            false => 0,
        };
        // a `match`, not `map_or_else`: that is not always inlined
        let start = match options.start_time() {
            None => clock::now(),
            Some(t) => clock::from_system(t),
        };
        let rare = match options.has_any() || *sc.trace_state() != TraceState::NONE {
            true => {
                let (events, links) = options.into_lists();
                Some(Box::new(RareFields {
                    trace_state: sc.trace_state().clone(),
                    status: Status::Unset,
                    events: limit_events(events, limits),
                    links: limit_links(links, limits),
                }))
            }
            false => {
                let (events, links) = options.into_lists();
                forget_empty(events);
                forget_empty(links);
                None
            }
        };
        let (flags, parent_span_id, parent_is_remote) = (
            sc.trace_flags(),
            if !root {
                psc.span_id()
            } else {
                SpanId::INVALID
            },
            !root && psc.is_remote(),
        );
        let Some(mut new_slot) = NewSlot::take() else {
            // the thread is exiting: the span is not recorded
            return place.write(parent_cx.with_remote_span_context(sc));
        };
        // written where it lies (`MaybeUninit::write` into the slot), not
        // made on the stack and copied there: the copy reads back stores
        // still on their way to the cache and stalls on them (seen with
        // `perf annotate`)
        new_slot.place().write(Record {
            trace_id,
            span_id,
            flags,
            parent_span_id,
            parent_is_remote,
            kind,
            name,
            start,
            end: start,
            attributes: attributes.take(),
            dropped_attributes,
            rare,
            settings: &self.settings,
        });
        // SAFETY: the record was written through `new_slot.place()` just above
        let reg = unsafe { new_slot.commit() };
        // before the context is made, which may panic (an OpenTelemetry
        // context observer's view): the record is then ended with the
        // panic by the one who handed `place`. The context is made with the
        // list unlocked, so that such an observer can reach the record.
        place.register(reg);
        // each arm writes the context where it goes, not to the stack to
        // be copied (the copy reads the callee's stores back before they
        // reach the cache)
        match self.ids_only {
            true => place.write(parent_cx.with_remote_span_context(sc)),
            false => place.write(parent_cx.with_span(ForwardingSpan { sc, reg })),
        }
    }
}

/// Drops the attributes past `max`; returns how many.
#[cold]
#[inline(never)]
fn over_limit(attributes: &mut Attrs, max: usize) -> u32 {
    let dropped = attributes.len().saturating_sub(max) as u32;
    attributes.0.truncate(max);
    dropped
}

/// Drops `v`, which is empty: without a call, if it holds no memory (a
/// `Vec` of capacity 0 owns nothing, so forgetting it is dropping it; the
/// drop glue would still be called, on every span, to drop no elements).
#[inline(always)]
fn forget_empty<T>(v: Vec<T>) {
    match v.capacity() {
        0 => std::mem::forget(v),
        _ => drop(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TraceId;
    use opentelemetry_sdk::trace::Sampler;
    use std::mem::MaybeUninit;

    fn recorder(default_sampling: bool) -> &'static Recorder {
        Box::leak(Box::new(Recorder {
            sampler: Box::new(Sampler::ParentBased(Box::new(Sampler::AlwaysOn))),
            default_sampling,
            ids_only: false,
            settings: RecordSettings::new("t", None),
        }))
    }

    /// The recorder's own `parentbased_always_on` decides as the SDK's.
    #[test]
    fn default_sampling_decides_as_the_sdk_sampler() {
        let (fast, sdk) = (recorder(true), recorder(false));
        let state = TraceState::from_key_value([("k", "v")]).unwrap();
        let remote = |flags| {
            Context::new().with_remote_span_context(SpanContext::new(
                TraceId::from(7u128),
                SpanId::from(9u64),
                flags,
                true,
                state.clone(),
            ))
        };
        let parents = [
            Context::new(),
            remote(TraceFlags::SAMPLED),
            remote(TraceFlags::default()),
            Context::new().with_remote_span_context(SpanContext::empty_context()),
        ];
        let start = |rec: &'static Recorder, parent: &Context| {
            let (mut cx, mut reg) = (MaybeUninit::uninit(), MaybeUninit::uninit());
            // SAFETY: both are read once `start_simple_into` returned its
            // `Written`
            unsafe {
                let mut attributes = ManuallyDrop::new(Attrs::new());
                rec.start_simple_into(
                    "s".into(),
                    OwnedRef::new(&mut attributes),
                    parent,
                    SpanPlace::new(&mut cx, &mut reg),
                );
                (cx.assume_init(), reg.assume_init())
            }
        };
        for (i, parent) in parents.iter().enumerate() {
            let (a_cx, a_reg) = start(fast, parent);
            let (b_cx, b_reg) = start(sdk, parent);
            let (sa, sb) = (a_cx.span(), b_cx.span());
            let (sa, sb) = (sa.span_context(), sb.span_context());
            assert_eq!(a_reg.is_some(), b_reg.is_some(), "recording, parent {i}");
            assert_eq!(sa.is_sampled(), sb.is_sampled(), "sampled, parent {i}");
            assert_eq!(sa.trace_state(), sb.trace_state(), "tracestate, parent {i}");
            assert_eq!(sa.trace_id() == TraceId::from(7u128), i == 1 || i == 2);
            for reg in [a_reg, b_reg].into_iter().flatten() {
                end_record(&reg, || true, clock::now());
            }
        }
    }
}
