//! The instrumented functions the benches compare. Every variant wraps the
//! same `#[inline(never)]` body, so the benches differ only in what the site
//! does around it.

use lens::otel::trace::{Span as _, TraceContextExt as _, Tracer as _};
use lens::otel::{Context, KeyValue};
use lens::otel_sdk::trace::SdkTracer;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

/// The work every variant wraps.
#[inline(always)]
pub(crate) fn body(x: u64) -> u64 {
    black_box(x).wrapping_mul(3)
}

/// No instrumentation.
#[inline(never)]
pub(crate) fn bare(x: u64) -> u64 {
    body(x)
}

/// The ideal gate written by hand: a `static AtomicU64` of the calling crate
/// and a constant mask, then the same span call `#[trace_fn]` makes
/// (`span_cm!` is `start_span(name, Vec::new())`, the call behind an enabled
/// `#[trace_fn]`). Each bench's `main` stores to it once, so the compiler
/// cannot assume it stays 0.
pub(crate) static HAND_WORD: AtomicU64 = AtomicU64::new(0);
const HAND_MASK: u64 = 1 << 5;

#[inline(never)]
pub(crate) fn bit_test(x: u64) -> u64 {
    let _guard = if HAND_WORD.load(Ordering::Relaxed) & HAND_MASK != 0 {
        Some(lens::span_cm!("bit_test"))
    } else {
        None
    };
    body(x)
}

/// The same hand-written test on a word that lives in another crate (lens's
/// base word, as any group word a site tests): in a position-independent
/// executable the word's address comes from the GOT, one more instruction
/// than for a static of the calling crate. This is the floor for lens.
#[inline(never)]
pub(crate) fn bit_test_xcrate(x: u64) -> u64 {
    let _guard = if lens::groups::WORD.load(Ordering::Relaxed) & HAND_MASK != 0 {
        Some(lens::span_cm!("bit_test_xcrate"))
    } else {
        None
    };
    body(x)
}

/// The absolute floor, written by hand: the same static bit test, but no
/// guard held across the body. The disabled path is load, test, then the
/// body in the site's own frame; the enabled path (cold, out of line) opens
/// the span and runs the body under it.
#[inline(never)]
pub(crate) fn bit_test_noguard(x: u64) -> u64 {
    if HAND_WORD.load(Ordering::Relaxed) & HAND_MASK != 0 {
        bit_test_noguard_on(x)
    } else {
        body(x)
    }
}

#[cold]
#[inline(never)]
fn bit_test_noguard_on(x: u64) -> u64 {
    let _guard = lens::span_cm!("bit_test_noguard");
    body(x)
}

/// [`bit_test_noguard`] on a word in another crate (lens's base word), as
/// lens's word always is: the reference for a disabled `#[trace_fn]`.
#[inline(never)]
pub(crate) fn bit_test_noguard_xcrate(x: u64) -> u64 {
    if lens::groups::WORD.load(Ordering::Relaxed) & HAND_MASK != 0 {
        bit_test_noguard_xcrate_on(x)
    } else {
        body(x)
    }
}

#[cold]
#[inline(never)]
fn bit_test_noguard_xcrate_on(x: u64) -> u64 {
    let _guard = lens::span_cm!("bit_test_noguard_xcrate");
    body(x)
}

/// `#[trace_fn]`, no attributes.
#[lens::trace_fn(group = "step")]
#[inline(never)]
pub(crate) fn lens_trace_fn(x: u64) -> u64 {
    body(x)
}

/// Three arguments, uninstrumented: the reference for [`lens_trace_fn3`].
#[inline(never)]
pub(crate) fn bare3(x: u64, y: u64, z: u64) -> u64 {
    body(x) ^ y ^ z
}

/// `#[trace_fn]` of a function of three arguments, no attributes: the
/// disabled path hands all three on to the body.
#[lens::trace_fn(group = "step")]
#[inline(never)]
pub(crate) fn lens_trace_fn3(x: u64, y: u64, z: u64) -> u64 {
    body(x) ^ y ^ z
}

/// `managed_span!` with one attribute.
#[inline(never)]
pub(crate) fn lens_managed_span(i: i64) -> u64 {
    let _span = lens::managed_span!("step", "train.step", iteration = i);
    body(i as u64)
}

/// `managed_span!` with three attributes (an integer, a float, a static
/// string).
#[inline(never)]
pub(crate) fn lens_managed_span3(i: i64) -> u64 {
    let _span = lens::managed_span!(
        "step",
        "train.step",
        iteration = i,
        loss = 0.25,
        phase = "train"
    );
    body(i as u64)
}

/// Raw SDK: builder with the attribute, start, end.
#[inline(never)]
pub(crate) fn sdk_start_end(tracer: &SdkTracer, i: i64) -> u64 {
    let mut span = tracer
        .span_builder("train.step")
        .with_attributes(vec![KeyValue::new("iteration", i)])
        .start(tracer);
    let r = body(i as u64);
    span.end();
    r
}

/// Raw SDK, `in_span` style: the span becomes the current context for the
/// body (what a lens guard also does), and ends when the context drops.
#[inline(never)]
pub(crate) fn sdk_in_span(tracer: &SdkTracer, i: i64) -> u64 {
    let builder = tracer
        .span_builder("train.step")
        .with_attributes(vec![KeyValue::new("iteration", i)]);
    let span = tracer.build_with_context(builder, &Context::current());
    let _attached = Context::current_with_span(span).attach();
    body(i as u64)
}

/// `tracing`, level TRACE while the subscriber keeps INFO.
#[tracing::instrument(level = "trace")]
#[inline(never)]
pub(crate) fn tracing_instrument(x: u64) -> u64 {
    body(x)
}

/// A `tracing` span of the target the bridge benches route (`bench_model`)
/// around the body.
#[inline(never)]
pub(crate) fn tracing_bridged(x: u64) -> u64 {
    let span = tracing::info_span!(target: "bench_model", "bench.span", n = x);
    let _e = span.enter();
    body(x)
}

/// `fastrace`, no reporter and no root span: nothing sampled.
#[fastrace::trace]
#[inline(never)]
pub(crate) fn fastrace_trace(x: u64) -> u64 {
    body(x)
}

/// fastrace, its docs' shape for a root span per request: `Span::root`
/// with a fresh random trace and one property, made the thread's local
/// parent for the body (so a `LocalSpan` or `#[fastrace::trace]` inside it
/// would nest under it, as a lens guard or the SDK's `in_span` makes its
/// span current). The span is recorded when it drops, after the guard, and
/// goes to whatever reporter `fastrace::set_reporter` installed. fastrace
/// properties are strings, so the attribute is the iteration formatted as
/// one (the OpenTelemetry reporter exports it as a string attribute).
#[inline(never)]
pub(crate) fn fastrace_root_span(i: i64) -> u64 {
    let root = fastrace::Span::root("train.step", fastrace::collector::SpanContext::random())
        .with_property(|| ("iteration", i.to_string()));
    let _parent = root.set_local_parent();
    body(i as u64)
}

/// LocalSpans under each root in [`FastraceStep`]'s shape: well below
/// fastrace's limit of 10,240 spans collected under one local parent (past
/// it, `LocalSpan`s are silently not recorded).
pub(crate) const FASTRACE_SPANS_PER_ROOT: u64 = 1_000;

/// fastrace as its users nest spans: one `Span::root` per step (a request,
/// a training step), made the thread's local parent with
/// `set_local_parent`, and the step's spans inside it as `LocalSpan`s
/// ([`fastrace_local_span`], what `#[fastrace::trace]` makes under a local
/// parent). The root's spans go to the reporter in one batch when it drops.
/// Fields drop in order: the guard first, then the root.
pub(crate) struct FastraceStep {
    _parent: fastrace::local::LocalParentGuard,
    _root: fastrace::Span,
}

impl FastraceStep {
    /// Opens step `i`: a root span with a fresh random trace, made the
    /// local parent.
    pub(crate) fn new(i: u64) -> Self {
        let root = fastrace::Span::root("train.step", fastrace::collector::SpanContext::random())
            .with_property(|| ("step", i.to_string()));
        Self {
            _parent: root.set_local_parent(),
            _root: root,
        }
    }
}

/// fastrace, the span its users write inside a root: a `LocalSpan` under
/// the thread's local parent (see [`FastraceStep`]) with one property, the
/// iteration formatted as a string (fastrace properties are strings).
#[inline(never)]
pub(crate) fn fastrace_local_span(i: i64) -> u64 {
    let _span = fastrace::local::LocalSpan::enter_with_local_parent("train.step")
        .with_property(|| ("iteration", i.to_string()));
    body(i as u64)
}

/// Raw SDK, `in_span` style, but the span ends at the end of the scope (as a
/// guard's does) rather than whenever the last clone of its context drops:
/// an explicit `end()` reaches the span through the context's mutex.
#[inline(never)]
pub(crate) fn sdk_in_span_end(tracer: &SdkTracer, i: i64) -> u64 {
    let builder = tracer
        .span_builder("train.step")
        .with_attributes(vec![KeyValue::new("iteration", i)]);
    let span = tracer.build_with_context(builder, &Context::current());
    let _attached = Context::current_with_span(span).attach();
    let r = body(i as u64);
    Context::map_current(|cx| cx.span().end());
    r
}

/// The raw-SDK equivalent of a lens guard: the span is current for the body,
/// the scope keeps its own handle to it (a clone of the context, so that it
/// can set attributes while a nested span is current) and ends it
/// explicitly at the end of the scope.
#[inline(never)]
pub(crate) fn sdk_guard_like(tracer: &SdkTracer, i: i64) -> u64 {
    let builder = tracer
        .span_builder("train.step")
        .with_attributes(vec![KeyValue::new("iteration", i)]);
    let span = tracer.build_with_context(builder, &Context::current());
    let cx = Context::current_with_span(span);
    let _attached = cx.clone().attach();
    let r = body(i as u64);
    cx.span().end();
    drop(cx);
    r
}

/// A span made current the way lens makes each span current, and nothing
/// else: the floor of any span that raw OpenTelemetry code inside it sees
/// as its parent. `full` is a small forwarding span in the context (lens's
/// default), otherwise the span's ids only (`NEMO_LENS_OTEL_CONTEXT=ids`).
/// Ids are made up from `i`; nothing is recorded or exported.
#[inline(never)]
pub(crate) fn otel_current_only(i: i64, full: bool) -> u64 {
    use lens::otel::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    let sc = SpanContext::new(
        TraceId::from(i as u128 + 1),
        SpanId::from(i as u64 + 1),
        TraceFlags::SAMPLED,
        false,
        TraceState::NONE,
    );
    let cx = Context::map_current(|parent| match full {
        true => parent.with_span(Forwarding(sc)),
        false => parent.with_remote_span_context(sc),
    });
    let _attached = cx.attach();
    body(i as u64)
}

/// A forwarding span of the size of lens's (its span context and a place):
/// what `full` puts in the context.
#[derive(Debug)]
struct Forwarding(lens::otel::trace::SpanContext);

impl lens::otel::trace::Span for Forwarding {
    fn add_event_with_timestamp<T>(&mut self, _: T, _: std::time::SystemTime, _: Vec<KeyValue>)
    where
        T: Into<std::borrow::Cow<'static, str>>,
    {
    }
    fn span_context(&self) -> &lens::otel::trace::SpanContext {
        &self.0
    }
    fn is_recording(&self) -> bool {
        true
    }
    fn set_attribute(&mut self, _: KeyValue) {}
    fn set_status(&mut self, _: lens::otel::trace::Status) {}
    fn update_name<T>(&mut self, _: T)
    where
        T: Into<std::borrow::Cow<'static, str>>,
    {
    }
    fn add_link(&mut self, _: lens::otel::trace::SpanContext, _: Vec<KeyValue>) {}
    fn end_with_timestamp(&mut self, _: std::time::SystemTime) {}
}
