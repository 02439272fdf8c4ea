//! One slot of a slab, and the mark of a finished span in its id.

use std::mem::MaybeUninit;

/// Set in the id of a finished span (ids count from 1 and never reach it).
#[cfg(feature = "sdk-core")]
pub(super) const DONE: u64 = 1 << 63;

/// One slot of a [`Slab`](super::Slab): `span` is initialised exactly
/// when `id != 0`.
pub(super) struct Slot<T> {
    pub(super) id: u64,
    pub(super) span: MaybeUninit<T>,
}

impl<T> Slot<T> {
    /// The open span in the slot, with its id (not a finished one).
    #[cfg(feature = "sdk-core")]
    pub(super) fn live(&mut self) -> Option<(u64, &mut T)> {
        // SAFETY: a slot with an id holds an initialised span
        (self.is_open()).then(|| (self.id, unsafe { self.span.assume_init_mut() }))
    }

    #[cfg(feature = "sdk-core")]
    pub(super) fn is_open(&self) -> bool {
        self.id != 0 && self.id & DONE == 0
    }
}
