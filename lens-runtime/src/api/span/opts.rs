//! Spans with the options of `#[trace_fn]`: a kind, an explicit parent,
//! links (follows-from) and the recorded return value.

use super::start::{start_detached_builder, start_detached_in};
use super::{LensSpan, SpanGuard};
use crate::api::attr::{value_for_key, AttributeValue, Attrs};
use opentelemetry::trace::{Link, SpanBuilder, SpanContext, SpanKind, TraceContextExt};
use opentelemetry::{Context, KeyValue};
use std::borrow::Cow;

/// What `#[trace_fn(parent = expr)]` accepts: an OpenTelemetry
/// [`Context`], a [`LensSpan`] or [`SpanGuard`], a [`SpanContext`] (e.g.
/// extracted from a remote carrier), a reference to any of these, or an
/// `Option` of any of these (`None`: the current context, as without
/// `parent`).
///
/// ```
/// use lens::trace_fn;
/// #[trace_fn(group = "step", parent = parent)]
/// fn step(parent: &lens::LensSpan) {}
/// let job = lens::detached_span("job");
/// step(&job);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the parent of a span",
    label = "not a parent context",
    note = "`parent = ...` takes an OpenTelemetry `Context`, a `LensSpan`, a `SpanGuard`, a `SpanContext`, a reference to one, or an `Option` of one"
)]
pub trait IntoParentContext {
    /// The parent context, or `None` for the current one.
    fn into_parent_context(self) -> Option<Context>;
}

impl IntoParentContext for Context {
    fn into_parent_context(self) -> Option<Context> {
        Some(self)
    }
}
impl IntoParentContext for &Context {
    fn into_parent_context(self) -> Option<Context> {
        Some(self.clone())
    }
}
impl IntoParentContext for &LensSpan {
    fn into_parent_context(self) -> Option<Context> {
        Some(self.context().clone())
    }
}
/// An inert guard: the current context, as without `parent`.
impl IntoParentContext for &SpanGuard {
    fn into_parent_context(self) -> Option<Context> {
        self.active.as_ref().map(|g| g.context().clone())
    }
}
impl IntoParentContext for SpanContext {
    fn into_parent_context(self) -> Option<Context> {
        Some(Context::new().with_remote_span_context(self))
    }
}
impl IntoParentContext for &SpanContext {
    fn into_parent_context(self) -> Option<Context> {
        self.clone().into_parent_context()
    }
}
impl<T: IntoParentContext> IntoParentContext for Option<T> {
    fn into_parent_context(self) -> Option<Context> {
        self.and_then(T::into_parent_context)
    }
}

/// What `#[trace_fn(links(expr, ...))]` accepts: a [`SpanContext`], an
/// OpenTelemetry [`Context`] (its span), a [`LensSpan`] or [`SpanGuard`], a
/// reference to any of these, or an `Option` of any of these (`None`, or an
/// invalid span context, adds no link).
///
/// ```
/// use lens::trace_fn;
/// #[trace_fn(group = "step", links(producer))]
/// fn consume(producer: &lens::LensSpan) {}
/// let produced = lens::detached_span("produce");
/// consume(&produced);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be linked to a span",
    label = "not a span to link",
    note = "`links(...)` takes `SpanContext`s, `Context`s, `LensSpan`s or `SpanGuard`s, references to them, or `Option`s of them"
)]
pub trait IntoLink {
    /// The span context to link, if any.
    fn into_link(self) -> Option<SpanContext>;
}

fn valid(sc: SpanContext) -> Option<SpanContext> {
    sc.is_valid().then_some(sc)
}

impl IntoLink for SpanContext {
    fn into_link(self) -> Option<SpanContext> {
        valid(self)
    }
}
impl IntoLink for &SpanContext {
    fn into_link(self) -> Option<SpanContext> {
        valid(self.clone())
    }
}
impl IntoLink for &Context {
    fn into_link(self) -> Option<SpanContext> {
        valid(self.span().span_context().clone())
    }
}
impl IntoLink for Context {
    fn into_link(self) -> Option<SpanContext> {
        (&self).into_link()
    }
}
impl IntoLink for &LensSpan {
    fn into_link(self) -> Option<SpanContext> {
        self.context().into_link()
    }
}
impl IntoLink for &SpanGuard {
    fn into_link(self) -> Option<SpanContext> {
        self.context().into_link()
    }
}
impl<T: IntoLink> IntoLink for Option<T> {
    fn into_link(self) -> Option<SpanContext> {
        self.and_then(T::into_link)
    }
}

/// Starts a span with a kind, an optional explicit parent and links,
/// without attaching it.
#[doc(hidden)]
#[inline(never)]
pub fn start_detached_with(
    name: impl Into<Cow<'static, str>>,
    attributes: impl Into<Attrs>,
    kind: SpanKind,
    parent: Option<Context>,
    links: Vec<SpanContext>,
) -> LensSpan {
    let mut builder = SpanBuilder::from_name(name.into())
        .with_attributes(attributes.into().into_vec())
        .with_kind(kind);
    if !links.is_empty() {
        builder = builder.with_links(links.into_iter().map(Link::with_context).collect());
    }
    match parent {
        Some(p) => start_detached_in(builder, &p),
        None => start_detached_builder(builder),
    }
}

/// [`start_detached_with`], made current until the guard drops.
#[doc(hidden)]
#[inline(never)]
pub fn start_span_with(
    name: impl Into<Cow<'static, str>>,
    attributes: impl Into<Attrs>,
    kind: SpanKind,
    parent: Option<Context>,
    links: Vec<SpanContext>,
) -> SpanGuard {
    start_detached_with(name, attributes, kind, parent, links).enter()
}

/// The attribute key of a recorded return value.
const RETURN_KEY: &str = "return";

/// Records `value` as the `return` attribute (`#[trace_fn(ret)]`).
#[doc(hidden)]
pub fn record_return<V: AttributeValue + ?Sized>(guard: &SpanGuard, value: &V) {
    if let Some(g) = guard.handle() {
        if let Some(v) = value_for_key(RETURN_KEY, value) {
            g.set_attribute(KeyValue::new(RETURN_KEY, v));
        }
    }
}

/// Records the `Ok` value as the `return` attribute (`#[trace_fn(ret, err)]`).
#[doc(hidden)]
pub fn record_ok<T: AttributeValue, E>(guard: &SpanGuard, result: &Result<T, E>) {
    if let Ok(v) = result {
        record_return(guard, v);
    }
}

/// [`record_return`] for an `async fn`: its span is the current one while
/// its body runs (`on`: the span was made).
#[doc(hidden)]
pub fn record_return_current<V: AttributeValue + ?Sized>(on: bool, value: &V) {
    if let (true, Some(v)) = (on, value_for_key(RETURN_KEY, value)) {
        Context::map_current(|cx| super::span_of(cx).set_attribute(KeyValue::new(RETURN_KEY, v)));
    }
}

/// [`record_ok`] for an `async fn`.
#[doc(hidden)]
pub fn record_ok_current<T: AttributeValue, E>(on: bool, result: &Result<T, E>) {
    if let Ok(v) = result {
        record_return_current(on, v);
    }
}
