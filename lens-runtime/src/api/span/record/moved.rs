//! A value handed on by reference, owned by whoever holds the reference:
//! the span's attributes go from the caller's argument to the record with
//! one copy, not one per function they pass through (a 64-byte move
//! each).

use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};

/// Owns the value in a slot it borrows: dropped with it, or taken out by
/// [`take`](Moved::take).
pub(crate) struct Moved<'a, T>(&'a mut ManuallyDrop<T>);

impl<'a, T> Moved<'a, T> {
    /// The owner of the value in `slot`.
    ///
    /// # Safety
    ///
    /// `slot` holds a value, and nothing reads, takes or drops it after
    /// this but the returned `Moved` (which drops it or hands it out once).
    #[inline(always)]
    pub(crate) unsafe fn new(slot: &'a mut ManuallyDrop<T>) -> Self {
        Moved(slot)
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

impl<T> Deref for Moved<'_, T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        self.0
    }
}

impl<T> DerefMut for Moved<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        self.0
    }
}

impl<T> Drop for Moved<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: the slot holds the value, owned by this `Moved` only,
        // which drops it once (`take` forgets the `Moved`)
        unsafe { ManuallyDrop::drop(self.0) }
    }
}

#[cfg(test)]
mod tests {
    use super::Moved;
    use std::mem::ManuallyDrop;
    use std::sync::Arc;

    /// The value is dropped once: by the `Moved`, or by whoever took it.
    #[test]
    fn the_value_is_dropped_once_by_its_owner() {
        let v = Arc::new(());
        let mut slot = ManuallyDrop::new(v.clone());
        // SAFETY: `slot` is not used again
        drop(unsafe { Moved::new(&mut slot) });
        assert_eq!(Arc::strong_count(&v), 1, "dropped by the Moved");
        let mut slot = ManuallyDrop::new(v.clone());
        // SAFETY: as above
        let mut moved = unsafe { Moved::new(&mut slot) };
        let _ = &mut *moved; // reachable in place
        let taken = moved.take();
        assert_eq!(Arc::strong_count(&v), 2, "taken out, not dropped");
        drop(taken);
        assert_eq!(Arc::strong_count(&v), 1);
    }
}
