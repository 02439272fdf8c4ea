//! Where spans start: lens's own recorder when it is installed, else the
//! tracer set up with a provider, else the global tracer.

use super::{LensSpan, SpanGuard, SCOPE_NAME};
use crate::api::attr::Attrs;
use opentelemetry::trace::{SpanBuilder, TraceContextExt, Tracer as _};
use opentelemetry::Context;
use std::borrow::Cow;

#[cfg(feature = "sdk-core")]
use super::{record, tracer::slot};

// Both inline into the `#[inline(never)]` entry points, so the 120-byte
// `SpanBuilder` is not passed through an extra out-of-line call.
#[inline(always)]
fn start_context(name: Cow<'static, str>, attributes: Attrs) -> LensSpan {
    #[cfg(feature = "sdk-core")]
    if let Some(rec) = record::get() {
        let mut args = std::mem::ManuallyDrop::new((name, attributes));
        return LensSpan::recorded(|out| {
            Context::map_current(|parent| {
                // SAFETY: taken once, here (the closure runs once)
                let (name, attributes) = unsafe { std::mem::ManuallyDrop::take(&mut args) };
                rec.start_simple_into(name, attributes, parent, out)
            })
        });
    }
    start_builder(SpanBuilder::from_name(name).with_attributes(attributes.into_vec()))
}

/// An internal span of lens's path, child of the current context, made
/// current on this thread (whose OpenTelemetry context is live).
#[cfg(feature = "sdk-core")]
#[inline(always)]
fn start_recorded_live(
    rec: &'static record::Recorder,
    name: Cow<'static, str>,
    attributes: Attrs,
) -> SpanGuard {
    // the closure captures the arguments by reference: each capture by
    // value is a copy (the attributes are 48 bytes); one place each, not
    // a tuple made of them (a copy too)
    let mut name = std::mem::ManuallyDrop::new(name);
    let mut attributes = std::mem::ManuallyDrop::new(attributes);
    SpanGuard::recorded_live(|out| {
        Context::map_current(|parent| {
            // SAFETY: each is taken once, here, and not used again (the
            // closure runs once; if it did not run, they would leak)
            let (name, attributes) = unsafe {
                (
                    std::mem::ManuallyDrop::take(&mut name),
                    std::mem::ManuallyDrop::take(&mut attributes),
                )
            };
            rec.start_simple_into(name, attributes, parent, out)
        })
    })
}

#[inline(always)]
fn start_builder(builder: SpanBuilder) -> LensSpan {
    #[cfg(feature = "sdk-core")]
    if let Some(rec) = record::get() {
        return LensSpan::recorded(|out| {
            Context::map_current(|parent| rec.start_into(builder, parent, out))
        });
    }
    #[cfg(feature = "sdk-core")]
    if let Some(tracer) = slot::get() {
        return LensSpan::new(Context::map_current(|parent| {
            let span = tracer.build_with_context(builder, parent);
            parent.with_span(span)
        }));
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
    if let Some(rec) = record::get() {
        return LensSpan::recorded(|out| rec.start_into(builder, parent, out));
    }
    #[cfg(feature = "sdk-core")]
    if let Some(tracer) = slot::get() {
        let span = tracer.build_with_context(builder, parent);
        return LensSpan::new(parent.with_span(span));
    }
    let tracer = opentelemetry::global::tracer(SCOPE_NAME);
    let span = tracer.build_with_context(builder, parent);
    LensSpan::new(parent.with_span(span))
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
#[inline(never)]
pub fn start_span(name: impl Into<Cow<'static, str>>, attributes: impl Into<Attrs>) -> SpanGuard {
    if !super::live::otel_context_live() {
        return LensSpan::inert().enter();
    }
    let (name, attributes) = (name.into(), attributes.into());
    #[cfg(feature = "sdk-core")]
    if let Some(rec) = record::get() {
        return start_recorded_live(rec, name, attributes);
    }
    start_context(name, attributes).enter_live()
}
