//! The engine's placement writes: values written where they stay, not
//! made on the stack and copied (each copy reads back stores still on
//! their way to the cache). Where a span being started is written
//! ([`SpanPlace`]), and the proof that it was ([`Written`]): in a module of
//! its own, so that nothing but [`SpanPlace::write`] can make a `Written`
//! (private fields are visible to a module's children too). And
//! [`OwnedRef`], a value handed on by reference, owned by whoever holds the
//! reference: the span's attributes go from the caller's argument to the
//! record with one copy, not one per function they pass through (a
//! 64-byte move each).

use crate::engine::open::Registration;
use opentelemetry::Context;
use std::marker::PhantomData;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ops::{Deref, DerefMut};

/// The brand of a [`SpanPlace`] and of its [`Written`]: a lifetime no other
/// `SpanPlace` has (invariant, and universal in the closures that write
/// one), so that a `Written` proves its own `SpanPlace` was written.
type Brand<'a> = PhantomData<fn(&'a ()) -> &'a ()>;

/// Where a span being started is written: the fields of its guard (or of
/// a detached `LensSpan`), so that the context is made where it stays, not
/// returned and copied (each copy reads back stores still on their way
/// to the cache).
pub(crate) struct SpanPlace<'a> {
    cx: &'a mut MaybeUninit<Context>,
    reg: &'a mut Option<Registration>,
    brand: Brand<'a>,
}

/// Proof that the [`SpanPlace`] of the same lifetime was written (made
/// only by its `write`).
pub(crate) struct Written<'a>(Brand<'a>);

impl<'a> SpanPlace<'a> {
    /// Where `cx` and `reg` are to be written; `reg` is `None` from now
    /// until the span's record is registered.
    ///
    /// # Safety
    ///
    /// The caller reads `cx` only once it holds the [`Written`] of this
    /// `SpanPlace` (of a closure `for<'b> FnOnce(SpanPlace<'b>) ->
    /// Written<'b>`, which cannot return another's).
    #[inline(always)]
    pub(crate) unsafe fn new(
        cx: &'a mut MaybeUninit<Context>,
        reg: &'a mut MaybeUninit<Option<Registration>>,
    ) -> SpanPlace<'a> {
        SpanPlace {
            cx,
            reg: reg.write(None),
            brand: PhantomData,
        }
    }

    /// Writes the span's registration, once its record is registered:
    /// before its context is made, so that, if making it panics, the one
    /// who handed this `SpanPlace` can end the record.
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

/// Owns the value in a slot it borrows: dropped with it, or taken out by
/// [`take`](OwnedRef::take).
pub(crate) struct OwnedRef<'a, T>(&'a mut ManuallyDrop<T>);

impl<'a, T> OwnedRef<'a, T> {
    /// The owner of the value in `slot`.
    ///
    /// # Safety
    ///
    /// `slot` holds a value, and nothing reads, takes or drops it after
    /// this but the returned `OwnedRef` (which drops it or hands it out once).
    #[inline(always)]
    pub(crate) unsafe fn new(slot: &'a mut ManuallyDrop<T>) -> Self {
        OwnedRef(slot)
    }

    /// The value, moved out of its slot.
    #[inline(always)]
    pub(crate) fn take(self) -> T {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: the slot holds the value (`new`'s promise) and this is
        // its only owner, which is not dropped (`ManuallyDrop`)
        unsafe { ManuallyDrop::take(this.0) }
    }
}

impl<T> Deref for OwnedRef<'_, T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        self.0
    }
}

impl<T> DerefMut for OwnedRef<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        self.0
    }
}

impl<T> Drop for OwnedRef<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: the slot holds the value, owned by this `OwnedRef` only,
        // which drops it once (`take` forgets the `OwnedRef`)
        unsafe { ManuallyDrop::drop(self.0) }
    }
}

#[cfg(test)]
mod tests {
    use super::OwnedRef;
    use std::mem::ManuallyDrop;
    use std::sync::Arc;

    /// The value is dropped once: by the `OwnedRef`, or by whoever took it.
    #[test]
    fn the_value_is_dropped_once_by_its_owner() {
        let v = Arc::new(());
        let mut slot = ManuallyDrop::new(v.clone());
        // SAFETY: `slot` is not used again
        drop(unsafe { OwnedRef::new(&mut slot) });
        assert_eq!(Arc::strong_count(&v), 1, "dropped by the OwnedRef");
        let mut slot = ManuallyDrop::new(v.clone());
        // SAFETY: as above
        let mut moved = unsafe { OwnedRef::new(&mut slot) };
        let _ = &mut *moved; // reachable in place
        let taken = moved.take();
        assert_eq!(Arc::strong_count(&v), 2, "taken out, not dropped");
        drop(taken);
        assert_eq!(Arc::strong_count(&v), 1);
    }
}
