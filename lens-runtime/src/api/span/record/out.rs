//! Where a span being started is written, and the proof that it was: a
//! module of its own, so that nothing but [`StartOut::write`] can make a
//! [`Written`] (private fields are visible to a module's children too).

use crate::api::span::open::Registration;
use opentelemetry::Context;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

/// The brand of a [`StartOut`] and of its [`Written`]: a lifetime no other
/// `StartOut` has (invariant, and universal in the closures that write
/// one), so that a `Written` proves its own `StartOut` was written.
type Brand<'a> = PhantomData<fn(&'a ()) -> &'a ()>;

/// Where a span being started is written: the fields of its guard (or of
/// a detached `LensSpan`), so that the context is made where it stays, not
/// returned and copied (each copy reads back stores still on their way
/// to the cache).
pub(crate) struct StartOut<'a> {
    cx: &'a mut MaybeUninit<Context>,
    reg: &'a mut Option<Registration>,
    brand: Brand<'a>,
}

/// Proof that the [`StartOut`] of the same lifetime was written (made
/// only by its `write`).
pub(crate) struct Written<'a>(Brand<'a>);

impl<'a> StartOut<'a> {
    /// Where `cx` and `reg` are to be written; `reg` is `None` from now
    /// until the span's record is registered.
    ///
    /// # Safety
    ///
    /// The caller reads `cx` only once it holds the [`Written`] of this
    /// `StartOut` (of a closure `for<'b> FnOnce(StartOut<'b>) ->
    /// Written<'b>`, which cannot return another's).
    #[inline(always)]
    pub(crate) unsafe fn new(
        cx: &'a mut MaybeUninit<Context>,
        reg: &'a mut MaybeUninit<Option<Registration>>,
    ) -> StartOut<'a> {
        StartOut {
            cx,
            reg: reg.write(None),
            brand: PhantomData,
        }
    }

    /// Writes the span's registration, once its record is registered:
    /// before its context is made, so that, if making it panics, the one
    /// who handed this `StartOut` can end the record.
    #[inline(always)]
    pub(super) fn register(&mut self, reg: Registration) {
        *self.reg = Some(reg);
    }

    /// Writes the started span's context (its registration, if any, was
    /// written by `register`).
    #[inline(always)]
    pub(super) fn write(self, cx: Context) -> Written<'a> {
        self.cx.write(cx);
        Written(self.brand)
    }
}
