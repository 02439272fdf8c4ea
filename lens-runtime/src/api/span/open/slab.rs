//! The slab a thread's open spans live in.

/// A slab of open spans: a span keeps its slot until it ends, so ending
/// one is O(1) whatever the order spans end in. A freed slot is reused
/// by the next span, and the top slot is popped, so spans that end
/// innermost first use the slab as a stack; no allocation once the slab
/// has grown to the most spans open at once.
#[derive(Debug)]
pub(super) struct Slab<T> {
    /// `(id, span)` of the span in each slot; `None` for a free slot.
    pub(super) slots: Vec<Option<(u64, T)>>,
    /// The free slots (all below `slots.len()`), most recently freed last.
    free: Vec<usize>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slab<T> {
    /// Stores `span` under `id`; returns its slot.
    pub(super) fn insert(&mut self, id: u64, span: T) -> usize {
        let slot = self.reserve();
        self.put(slot, id, span);
        slot
    }

    /// A free slot for the next span (its entry is `None`).
    #[inline]
    pub(super) fn reserve(&mut self) -> usize {
        loop {
            match self.free.pop() {
                Some(slot) if matches!(self.slots.get(slot), Some(None)) => return slot,
                Some(_) => continue,
                None => {
                    self.slots.push(None);
                    return self.slots.len() - 1;
                }
            }
        }
    }

    /// Stores `span` under `id` in `slot`, a slot [`reserve`](Self::reserve)
    /// returned.
    pub(super) fn put(&mut self, slot: usize, id: u64, span: T) {
        self.put_with(slot, id, || span);
    }

    /// Stores the span `make` makes under `id` in `slot`, made in the slot
    /// rather than on the stack and copied there.
    #[inline(always)]
    pub(super) fn put_with(&mut self, slot: usize, id: u64, make: impl FnOnce() -> T) {
        if let Some(entry) = self.slots.get_mut(slot) {
            if entry.is_none() {
                // assigned, not `get_or_insert_with`: the span is then made
                // in the slot rather than on the stack and copied there
                *entry = Some((id, make()));
            }
        }
    }

    /// The span with `id` in `slot`, if it is still there.
    #[cfg(feature = "sdk-core")]
    pub(super) fn get_mut(&mut self, slot: usize, id: u64) -> Option<&mut T> {
        match self.slots.get_mut(slot) {
            Some(Some((i, span))) if *i == id => Some(span),
            _ => None,
        }
    }

    /// Takes the span with `id` in `slot` out, if it is still there (not
    /// taken by [`truncate_all`](super::truncate_all)).
    pub(super) fn remove(&mut self, slot: usize, id: u64) -> Option<T> {
        let entry = self.slots.get_mut(slot)?;
        if !matches!(entry, Some((i, _)) if *i == id) {
            return None;
        }
        let taken = entry.take();
        self.free_slot(slot);
        taken.map(|(_, span)| span)
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
        let Some((i, span)) = entry.as_mut() else {
            return false;
        };
        if *i != id {
            return false;
        }
        finish(span);
        out.reserve(1);
        // SAFETY: `out` has room for one more (reserved above); the span is
        // copied there bit for bit and counted in `out`, and its slot is
        // overwritten with `None` without dropping it, so it is owned once.
        unsafe {
            std::ptr::copy_nonoverlapping(
                std::ptr::from_mut(span),
                out.as_mut_ptr().add(out.len()),
                1,
            );
            out.set_len(out.len() + 1);
            std::ptr::write(entry, None);
        }
        self.free_slot(slot);
        true
    }

    /// Frees `slot` (its entry is `None`): popped if it is the top one.
    fn free_slot(&mut self, slot: usize) {
        if slot + 1 == self.slots.len() {
            // not `pop`: it would copy the (empty) entry out
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

    /// Takes every span out, with its id.
    pub(super) fn take_all(&mut self) -> impl Iterator<Item = (u64, T)> {
        self.free.clear();
        std::mem::take(&mut self.slots).into_iter().flatten()
    }
}
