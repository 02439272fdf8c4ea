//! Instrumenting futures: the span is current on every poll and never held
//! across a suspension; it ends when the future completes or is dropped.

use crate::api::span::{LensSpan, SpanGuard};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

pin_project_lite::pin_project! {
    /// A future running inside a span. Made by [`Instrument::in_span`].
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct Instrumented<F> {
        #[pin]
        inner: F,
        span: Option<LensSpan>,
    }
}

/// Anything that can be the span of an [`Instrumented`] future: a
/// [`LensSpan`], a [`SpanGuard`] (detached first), or an `Option` of either
/// (`None`, e.g. from a disabled `managed_span!`, instruments nothing).
pub trait IntoInstrumentSpan {
    /// The span, if any.
    fn into_instrument_span(self) -> Option<LensSpan>;
}
impl IntoInstrumentSpan for LensSpan {
    fn into_instrument_span(self) -> Option<LensSpan> {
        Some(self)
    }
}
impl IntoInstrumentSpan for SpanGuard {
    fn into_instrument_span(self) -> Option<LensSpan> {
        Some(self.into_span())
    }
}
impl<T: IntoInstrumentSpan> IntoInstrumentSpan for Option<T> {
    fn into_instrument_span(self) -> Option<LensSpan> {
        self.and_then(T::into_instrument_span)
    }
}

/// Runs any future inside a span: [`in_span`](Self::in_span).
///
/// ```
/// use lens::Instrument;
/// async fn rollout() -> u32 { 7 }
/// let fut = rollout().in_span(lens::detached_span("rollout"));
/// # drop(fut);
/// ```
///
/// The method was called `instrument` before, like `tracing::Instrument`'s:
/// with both traits in scope a call to `.instrument(..)` is ambiguous
/// (E0034). `instrument` stays as a deprecated alias for one release; the
/// clash ends when it goes.
pub trait Instrument: Future + Sized {
    /// Wraps `self` so that `span` is current while it is polled and ends
    /// when it completes or is dropped (`None`, e.g. from a disabled
    /// `managed_span!`, instruments nothing).
    ///
    /// ```
    /// use lens::Instrument;
    /// # async fn step() {}
    /// let fut = step().in_span(lens::managed_span!("step", "train.step"));
    /// # drop(fut);
    /// ```
    fn in_span<S: IntoInstrumentSpan>(self, span: S) -> Instrumented<Self> {
        Instrumented {
            inner: self,
            span: span.into_instrument_span(),
        }
    }

    /// The former name of [`in_span`](Self::in_span).
    ///
    /// ```
    /// #![allow(deprecated)]
    /// use lens::Instrument;
    /// # async fn step() {}
    /// let fut = step().instrument(lens::detached_span("step"));
    /// # drop(fut);
    /// ```
    #[deprecated(
        since = "0.1.0",
        note = "renamed `in_span` (no clash with `tracing::Instrument::instrument`)"
    )]
    fn instrument<S: IntoInstrumentSpan>(self, span: S) -> Instrumented<Self> {
        self.in_span(span)
    }
}
impl<F: Future> Instrument for F {}

/// Wraps `fut` in `span` (used by `#[trace_fn]` on `async fn`).
#[doc(hidden)]
#[inline]
pub fn instrument<F: Future>(fut: F, span: Option<LensSpan>) -> Instrumented<F> {
    Instrumented { inner: fut, span }
}

impl<F: Future> Future for Instrumented<F> {
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
    /// A future whose `Err` output is recorded on its span (`#[trace_fn(err)]`).
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct InstrumentedResult<F> {
        #[pin]
        inner: Instrumented<F>,
    }
}

/// Wraps `fut` in `span`, recording an `Err` output as the span's error.
#[doc(hidden)]
#[inline]
pub fn instrument_result<F, T, E>(fut: F, span: Option<LensSpan>) -> InstrumentedResult<F>
where
    F: Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    InstrumentedResult {
        inner: instrument(fut, span),
    }
}

impl<F, T, E> Future for InstrumentedResult<F>
where
    F: Future<Output = Result<T, E>>,
    E: std::fmt::Display,
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
                span.record_error(e);
            }
            inner.span.take();
        }
        out
    }
}
