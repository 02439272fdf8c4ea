//! The slab a thread's open spans live in.

use std::mem::MaybeUninit;

/// A slab of open spans: a span keeps its slot until it ends, so ending
/// one is O(1) whatever the order spans end in. A freed slot is reused
/// by the next span, and the top slot is popped, so spans that end
/// innermost first use the slab as a stack; no allocation once the slab
/// has grown to the most spans open at once.
pub(super) struct Slab<T> {
    /// The span in each slot, with its id; a free slot has id 0 (ids
    /// start at 1) and no span.
    slots: Vec<Slot<T>>,
    /// The free slots (all below `slots.len()`), most recently freed last.
    free: Vec<usize>,
}

/// One slot of a [`Slab`]: `span` is initialised exactly when `id != 0`.
struct Slot<T> {
    id: u64,
    span: MaybeUninit<T>,
}

impl<T> Slot<T> {
    const FREE: Slot<T> = Slot {
        id: 0,
        span: MaybeUninit::uninit(),
    };

    #[cfg(feature = "sdk-core")]
    fn live(&mut self) -> Option<(u64, &mut T)> {
        // SAFETY: a slot with an id holds an initialised span
        (self.id != 0).then(|| (self.id, unsafe { self.span.assume_init_mut() }))
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Slab<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slab")
            .field("slots", &self.slots.len())
            .field("free", &self.free.len())
            .finish()
    }
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Drop for Slab<T> {
    fn drop(&mut self) {
        self.take_all().for_each(drop);
    }
}

impl<T> Slab<T> {
    /// Stores `span` under `id`; returns its slot.
    pub(super) fn insert(&mut self, id: u64, span: T) -> usize {
        let slot = self.reserve();
        self.put_with(slot, id, |out| {
            out.write(span);
        });
        slot
    }

    /// A free slot for the next span.
    #[inline]
    pub(super) fn reserve(&mut self) -> usize {
        loop {
            match self.free.pop() {
                Some(slot) if self.slots.get(slot).is_some_and(|s| s.id == 0) => return slot,
                Some(_) => continue,
                None => {
                    self.slots.push(Slot::FREE);
                    return self.slots.len() - 1;
                }
            }
        }
    }

    /// Stores the span `init` writes under `id` in `slot`, a free slot
    /// [`reserve`](Self::reserve) returned: `init` writes it where it
    /// lies, so that it is not made on the stack and copied (the copy
    /// reads back stores not yet in the cache, and stalls on them).
    /// `init` must initialise the span it is given.
    #[inline(always)]
    pub(super) fn put_with(
        &mut self,
        slot: usize,
        id: u64,
        init: impl FnOnce(&mut MaybeUninit<T>),
    ) {
        if let Some(entry) = self.slots.get_mut(slot) {
            if entry.id == 0 && id != 0 {
                init(&mut entry.span);
                entry.id = id;
            }
        }
    }

    /// The span with `id` in `slot`, if it is still there.
    #[cfg(feature = "sdk-core")]
    pub(super) fn get_mut(&mut self, slot: usize, id: u64) -> Option<&mut T> {
        match self.slots.get_mut(slot)?.live() {
            Some((i, span)) if i == id => Some(span),
            _ => None,
        }
    }

    /// Each open span, with its slot and id.
    #[cfg(feature = "sdk-core")]
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (usize, u64, &mut T)> {
        self.slots
            .iter_mut()
            .enumerate()
            .filter_map(|(slot, s)| s.live().map(|(id, span)| (slot, id, span)))
    }

    /// Takes the span with `id` in `slot` out, if it is still there (not
    /// taken by [`truncate_all`](super::truncate_all)).
    pub(super) fn remove(&mut self, slot: usize, id: u64) -> Option<T> {
        let entry = self.slots.get_mut(slot)?;
        if entry.id != id || id == 0 {
            return None;
        }
        entry.id = 0;
        // SAFETY: it had an id, so its span is initialised; with the id
        // cleared it is read out once
        let taken = unsafe { entry.span.assume_init_read() };
        self.free_slot(slot);
        Some(taken)
    }

    /// Moves the span with `id` in `slot`, if it is still there, to the
    /// end of `out` after `finish` ran on it, with one copy (the record
    /// path's end: `remove` and `push` would copy it twice). Returns
    /// whether it was there.
    #[cfg(feature = "sdk-core")]
    #[inline]
    pub(super) fn move_into(
        &mut self,
        slot: usize,
        id: u64,
        out: &mut Vec<T>,
        finish: impl FnOnce(&mut T),
    ) -> bool {
        let Some(entry) = self.slots.get_mut(slot) else {
            return false;
        };
        match entry.live() {
            Some((i, span)) if i == id => finish(span),
            _ => return false,
        }
        out.reserve(1);
        // SAFETY: the slot holds an initialised span (checked above) and
        // `out` has room for one more (reserved above); the span is copied
        // there bit for bit and counted in `out`, and the slot is marked
        // free, so it is owned once.
        unsafe {
            std::ptr::copy_nonoverlapping(entry.span.as_ptr(), out.as_mut_ptr().add(out.len()), 1);
            out.set_len(out.len() + 1);
        }
        entry.id = 0;
        prefetch_next(out);
        self.free_slot(slot);
        true
    }

    /// Frees `slot` (its id is 0): popped if it is the top one.
    fn free_slot(&mut self, slot: usize) {
        if slot + 1 == self.slots.len() {
            // a free slot holds nothing to drop
            self.slots.truncate(slot);
        } else {
            self.free.push(slot);
        }
        if self.free.len() == self.slots.len() {
            // nothing open: start over (keeps the capacity)
            self.slots.clear();
            self.free.clear();
        }
    }

    /// How many spans are open.
    #[cfg(test)]
    pub(super) fn live(&self) -> usize {
        self.slots.len().saturating_sub(self.free.len())
    }

    /// How many slots there are, open or free.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Takes every span out, with its id.
    pub(super) fn take_all(&mut self) -> impl Iterator<Item = (u64, T)> {
        self.free.clear();
        std::mem::take(&mut self.slots).into_iter().filter_map(|s| {
            // SAFETY: a slot with an id holds an initialised span, read
            // out once (the slot itself is dropped without dropping it)
            (s.id != 0).then(|| (s.id, unsafe { s.span.assume_init_read() }))
        })
    }
}

/// Asks the CPU to own, for writing, the lines of `out`'s next element
/// (if it has room for one), so that the next span to end does not wait
/// for them: `out` was last read by another thread (the collector and the
/// export thread), and a store to a line another core holds stalls the
/// next locked instruction until that core gives the line up.
#[cfg(feature = "sdk-core")]
#[inline(always)]
pub(super) fn prefetch_next<T>(out: &Vec<T>) {
    #[cfg(target_arch = "x86_64")]
    if out.len() < out.capacity() {
        let first = out.as_ptr().wrapping_add(out.len()).cast::<u8>();
        let mut line = (first as usize) & !63;
        let end = first as usize + std::mem::size_of::<T>();
        while line < end {
            // SAFETY: a prefetch never faults nor changes memory; the
            // lines are of `out`'s allocation (its next, unused element)
            unsafe {
                std::arch::asm!(
                    "prefetchw [{}]",
                    in(reg) line,
                    options(nostack, preserves_flags, readonly)
                );
            }
            line += 64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Slab;
    use std::sync::Arc;

    /// Free slots hold nothing; the slab drops only the spans still in it,
    /// once each, and `take_all` hands out exactly those.
    #[test]
    fn only_live_spans_are_dropped_or_taken() {
        let span = Arc::new(());
        let mut slab = Slab::default();
        let slots: Vec<usize> = (1..=4).map(|id| slab.insert(id, span.clone())).collect();
        assert_eq!(Arc::strong_count(&span), 5);
        assert!(slab.remove(slots[1], 2).is_some());
        assert!(slab.remove(slots[1], 2).is_none(), "removed once");
        assert!(slab.remove(slots[2], 99).is_none(), "another span's id");
        assert_eq!(Arc::strong_count(&span), 4);
        let reused = slab.insert(5, span.clone());
        assert_eq!(reused, slots[1], "a freed slot is reused");
        let taken: Vec<u64> = slab.take_all().map(|(id, _)| id).collect();
        assert_eq!(taken, [1, 5, 3, 4]);
        assert_eq!(Arc::strong_count(&span), 1, "taken spans were dropped");
        for id in 6..9 {
            slab.insert(id, span.clone());
        }
        drop(slab);
        assert_eq!(Arc::strong_count(&span), 1, "the slab dropped its spans");
    }
}
