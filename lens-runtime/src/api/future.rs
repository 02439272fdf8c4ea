//! Instrumenting futures: the span is current on every poll and never held
//! across a suspension; it ends when the future completes or is dropped.

use crate::api::span::{LensSpan, SpanGuard};
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

pin_project_lite::pin_project! {
    /// A future running inside a span. Made by [`InSpan::in_span`].
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct InSpanFuture<F> {
        #[pin]
        inner: F,
        span: Option<LensSpan>,
    }
}

/// Anything that can be the span of an [`InSpanFuture`]: a
/// [`LensSpan`], a [`SpanGuard`] (detached first; an inert one, e.g. from
/// a disabled `managed_span!`, instruments nothing), or an `Option` of
/// either (`None` instruments nothing).
///
/// ```
/// use lens::IntoInSpan;
/// // telemetry is off here: the guard is inert, so there is no span
/// assert!(lens::managed_span!("step", "train.step").into_in_span().is_none());
/// assert!(None::<lens::LensSpan>.into_in_span().is_none());
/// ```
pub trait IntoInSpan {
    /// The span, if any.
    fn into_in_span(self) -> Option<LensSpan>;
}
impl IntoInSpan for LensSpan {
    fn into_in_span(self) -> Option<LensSpan> {
        Some(self)
    }
}
impl IntoInSpan for SpanGuard {
    fn into_in_span(self) -> Option<LensSpan> {
        self.into_span()
    }
}
impl<T: IntoInSpan> IntoInSpan for Option<T> {
    fn into_in_span(self) -> Option<LensSpan> {
        self.and_then(T::into_in_span)
    }
}

/// Runs any future inside a span: [`in_span`](Self::in_span). Named so as
/// not to clash with `tracing::Instrument`: both can be in scope.
///
/// ```
/// use lens::InSpan;
/// async fn rollout() -> u32 { 7 }
/// let fut = rollout().in_span(lens::detached_span("rollout"));
/// # drop(fut);
/// ```
pub trait InSpan: Future + Sized {
    /// Wraps `self` so that `span` is current while it is polled and ends
    /// when it completes or is dropped (an inert guard, e.g. from a
    /// disabled `managed_span!`, or `None` instruments nothing).
    ///
    /// ```
    /// use lens::InSpan;
    /// # async fn step() {}
    /// let fut = step().in_span(lens::managed_span!("step", "train.step"));
    /// # drop(fut);
    /// ```
    fn in_span<S: IntoInSpan>(self, span: S) -> InSpanFuture<Self> {
        InSpanFuture {
            inner: self,
            span: span.into_in_span(),
        }
    }
}
impl<F: Future> InSpan for F {}

/// Wraps `fut` in `span` (used by `#[trace_fn]` on `async fn`).
#[doc(hidden)]
#[inline]
pub fn instrument<F: Future>(fut: F, span: Option<LensSpan>) -> InSpanFuture<F> {
    InSpanFuture { inner: fut, span }
}

impl<F: Future> Future for InSpanFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        let this = self.project();
        let Some(span) = this.span.as_ref() else {
            return this.inner.poll(cx);
        };
        let attached = crate::api::span::live::attach_if_live(span.context());
        let out = this.inner.poll(cx);
        crate::api::span::live::detach(attached);
        if out.is_ready() {
            this.span.take(); // ends the span now, not when the future is dropped
        }
        out
    }
}

pin_project_lite::pin_project! {
    /// A future whose `Err` output is recorded on its span (`#[trace_fn(err)]`),
    /// as its `Display` text (`M` = [`DisplayErr`]) or its `Debug` text
    /// ([`DebugErr`]).
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct InSpanResult<F, M> {
        #[pin]
        inner: InSpanFuture<F>,
        how: PhantomData<fn() -> M>,
    }
}

/// How an `Err` is recorded on a span.
#[doc(hidden)]
pub trait RecordErr<E> {
    /// Records `err` on `span`.
    fn record(span: &LensSpan, err: &E);
}

/// `err`, `err(Display)`: the error's `Display` text.
#[doc(hidden)]
#[derive(Debug)]
pub struct DisplayErr;

/// `err(Debug)`: the error's `Debug` text.
#[doc(hidden)]
#[derive(Debug)]
pub struct DebugErr;

impl<E: std::fmt::Display> RecordErr<E> for DisplayErr {
    fn record(span: &LensSpan, err: &E) {
        span.record_error(err);
    }
}

impl<E: std::fmt::Debug> RecordErr<E> for DebugErr {
    fn record(span: &LensSpan, err: &E) {
        span.record_error_debug(err);
    }
}

/// Wraps `fut` in `span`, recording an `Err` output as the span's error.
#[doc(hidden)]
#[inline]
pub fn instrument_result<F, T, E>(fut: F, span: Option<LensSpan>) -> InSpanResult<F, DisplayErr>
where
    F: Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    InSpanResult {
        inner: instrument(fut, span),
        how: PhantomData,
    }
}

/// [`instrument_result`] recording the error's `Debug` text (`err(Debug)`).
#[doc(hidden)]
#[inline]
pub fn instrument_result_debug<F, T, E>(fut: F, span: Option<LensSpan>) -> InSpanResult<F, DebugErr>
where
    F: Future<Output = Result<T, E>>,
    E: std::fmt::Debug,
{
    InSpanResult {
        inner: instrument(fut, span),
        how: PhantomData,
    }
}

impl<F, T, E, M> Future for InSpanResult<F, M>
where
    F: Future<Output = Result<T, E>>,
    M: RecordErr<E>,
{
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Result<T, E>> {
        let inner = self.project().inner.project();
        let Some(span) = inner.span.as_ref() else {
            return inner.inner.poll(cx);
        };
        let attached = crate::api::span::live::attach_if_live(span.context());
        let out = inner.inner.poll(cx);
        crate::api::span::live::detach(attached);
        if let Poll::Ready(result) = &out {
            if let Err(e) = result {
                M::record(span, e);
            }
            inner.span.take();
        }
        out
    }
}
