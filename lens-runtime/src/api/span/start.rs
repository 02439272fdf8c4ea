//! Where spans start: lens's own recorder when it is installed, else the
//! tracer set up with a provider, else the global tracer.

use super::{ActiveGuard, LensSpan, SpanGuard, SCOPE_NAME};
use crate::api::engine_socket::Attrs;
use opentelemetry::trace::{SpanBuilder, TraceContextExt, Tracer as _};
use opentelemetry::Context;
use std::borrow::Cow;
use std::mem::{ManuallyDrop, MaybeUninit};

#[cfg(feature = "sdk-core")]
use crate::api::engine_socket::{recorder, sdk_tracer, OwnedRef};

// Both inline into the `#[inline(never)]` entry points, so the 120-byte
// `SpanBuilder` is not passed through an extra out-of-line call.
#[inline(always)]
fn start_context(name: Cow<'static, str>, attributes: Attrs) -> LensSpan {
    #[cfg(feature = "sdk-core")]
    if let Some(rec) = recorder::get() {
        let mut name = std::mem::ManuallyDrop::new(name);
        let mut attributes = std::mem::ManuallyDrop::new(attributes);
        // SAFETY: `attributes` is not used again
        let attributes = unsafe { OwnedRef::new(&mut attributes) };
        return LensSpan::from_recorder(|place| {
            Context::map_current(|parent| {
                // SAFETY: taken once, here (the closure runs once; if it
                // did not run, the name would leak)
                let name = unsafe { std::mem::ManuallyDrop::take(&mut name) };
                rec.start_simple_into(name, attributes, parent, place)
            })
        });
    }
    start_builder(SpanBuilder::from_name(name).with_attributes(attributes.into_vec()))
}

/// Writes into `out` an internal span of lens's path, child of the
/// current context, made current on this thread (whose OpenTelemetry
/// context is live).
#[cfg(feature = "sdk-core")]
#[inline(always)]
fn start_on_recorder_live(
    out: &mut MaybeUninit<ActiveGuard>,
    rec: &'static recorder::Recorder,
    name: Cow<'static, str>,
    attributes: OwnedRef<'_, Attrs>,
) {
    // the closure captures the name by reference (each capture by value
    // is a copy), and the attributes as a reference that owns them: they
    // are copied once, into the record (the name is not a `OwnedRef`: its
    // 24 bytes copy for less than the reference's setup)
    let mut name = ManuallyDrop::new(name);
    ActiveGuard::from_recorder_live_into(out, |place| {
        Context::map_current(|parent| {
            // SAFETY: taken once, here, and not used again (the closure
            // runs once; if it did not run, the name would leak)
            let name = unsafe { ManuallyDrop::take(&mut name) };
            rec.start_simple_into(name, attributes, parent, place)
        })
    })
}

#[inline(always)]
fn start_builder(builder: SpanBuilder) -> LensSpan {
    #[cfg(feature = "sdk-core")]
    if let Some(rec) = recorder::get() {
        return LensSpan::from_recorder(|place| {
            Context::map_current(|parent| rec.start_into(builder, parent, place))
        });
    }
    #[cfg(feature = "sdk-core")]
    if let Some(tracer) = sdk_tracer::get() {
        return LensSpan::new(Context::map_current(|parent| {
            let span = tracer.build_with_context(builder, parent);
            parent.with_span(span)
        }));
    }
    // a forked child's first span sets lens up again (`sdk::fork`)
    #[cfg(feature = "sdk-core")]
    if super::tracer::respawn_after_fork() {
        return start_builder_after_fork(builder);
    }
    let tracer = opentelemetry::global::tracer(SCOPE_NAME);
    LensSpan::new(Context::map_current(|parent| {
        let span = tracer.build_with_context(builder, parent);
        parent.with_span(span)
    }))
}

/// Starts a span from `builder` as a child of `parent` (not of the current
/// context); its context is `parent` plus the new span.
#[inline(always)]
fn start_builder_in(builder: SpanBuilder, parent: &Context) -> LensSpan {
    #[cfg(feature = "sdk-core")]
    if let Some(rec) = recorder::get() {
        return LensSpan::from_recorder(|place| rec.start_into(builder, parent, place));
    }
    #[cfg(feature = "sdk-core")]
    if let Some(tracer) = sdk_tracer::get() {
        let span = tracer.build_with_context(builder, parent);
        return LensSpan::new(parent.with_span(span));
    }
    #[cfg(feature = "sdk-core")]
    if super::tracer::respawn_after_fork() {
        return start_builder_in_after_fork(builder, parent);
    }
    let tracer = opentelemetry::global::tracer(SCOPE_NAME);
    let span = tracer.build_with_context(builder, parent);
    LensSpan::new(parent.with_span(span))
}

/// [`start_builder`] on the pipeline a forked child has just set up.
#[cfg(feature = "sdk-core")]
#[cold]
#[inline(never)]
fn start_builder_after_fork(builder: SpanBuilder) -> LensSpan {
    start_builder(builder)
}

/// [`start_builder_in`] on the pipeline a forked child has just set up.
#[cfg(feature = "sdk-core")]
#[cold]
#[inline(never)]
fn start_builder_in_after_fork(builder: SpanBuilder, parent: &Context) -> LensSpan {
    start_builder_in(builder, parent)
}

/// The span `start` makes, or an inert one where OpenTelemetry's context
/// is gone on this thread (a span started in a thread-local destructor at
/// thread exit: reaching the context would panic there, and abort).
#[inline(always)]
fn unless_gone(start: impl FnOnce() -> LensSpan) -> LensSpan {
    match super::live::otel_context_live() {
        true => start(),
        false => LensSpan::inert(),
    }
}

/// Starts a span, child of the current context, without attaching it.
#[doc(hidden)]
#[inline(never)]
pub fn start_detached(
    name: impl Into<Cow<'static, str>>,
    attributes: impl Into<Attrs>,
) -> LensSpan {
    unless_gone(|| start_context(name.into(), attributes.into()))
}

/// Starts a span from a full builder (links, kind, …), child of the current
/// context, without attaching it.
#[doc(hidden)]
pub(crate) fn start_detached_builder(builder: SpanBuilder) -> LensSpan {
    unless_gone(|| start_builder(builder))
}

/// Starts a span from a full builder as a child of `parent` (an explicit
/// parent context, not the current one), without attaching it.
pub(crate) fn start_detached_in(builder: SpanBuilder, parent: &Context) -> LensSpan {
    unless_gone(|| start_builder_in(builder, parent))
}

/// Starts a span, child of the current context, and makes it current until
/// the returned guard drops. This is what the macros expand to.
#[doc(hidden)]
#[inline(always)]
pub fn start_span(name: impl Into<Cow<'static, str>>, attributes: impl Into<Attrs>) -> SpanGuard {
    let mut guard = MaybeUninit::uninit();
    start_span_into(&mut guard, name, ManuallyDrop::new(attributes.into()));
    // SAFETY: `start_span_into` wrote the guard (it returns only then)
    SpanGuard::from_active(unsafe { guard.assume_init() })
}

/// [`start_span`] out of line, written into `out`, where the caller keeps
/// the guard (a guard returned from here would be copied there). The
/// attributes come as a `ManuallyDrop` argument, so that the memory the
/// caller made them in is where they stay until they are moved into the
/// record (each move of them is a 64-byte copy), and no drop of them is
/// left at the end. The name is converted here (a `&'static str` comes in
/// two registers, a `Cow` through memory).
#[inline(never)]
fn start_span_into(
    out: &mut MaybeUninit<ActiveGuard>,
    name: impl Into<Cow<'static, str>>,
    #[cfg_attr(not(feature = "sdk-core"), allow(unused_mut))] mut attributes: ManuallyDrop<Attrs>,
) {
    if !super::live::otel_context_live() {
        drop(ManuallyDrop::into_inner(attributes));
        out.write(LensSpan::inert().guard(None));
        return;
    }
    #[cfg(feature = "sdk-core")]
    if let Some(rec) = recorder::get() {
        // SAFETY: `attributes` is not used again
        let attributes = unsafe { OwnedRef::new(&mut attributes) };
        return start_on_recorder_live(out, rec, name.into(), attributes);
    }
    out.write(start_context(name.into(), ManuallyDrop::into_inner(attributes)).enter_live());
}
