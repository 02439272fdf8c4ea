//! The slab a thread's open spans live in.

use std::mem::MaybeUninit;

/// A slab of open spans: a span keeps its slot until it ends, so ending
/// one is O(1) whatever the order spans end in. A freed slot is reused
/// by the next span, and the top slot is popped, so spans that end
/// innermost first use the slab as a stack; no allocation once the slab
/// has grown to the most spans open at once.
///
/// A span of lens's own path that ends stays in its slot, marked finished
/// ([`finish`](Slab::finish)), until its slots are handed over whole
/// ([`take_finished`](Slab::take_finished)): ending it copies nothing.
pub(super) struct Slab<T> {
    /// The span in each slot, with its id; a free slot has id 0 (ids
    /// start at 1) and no span; a finished span's id has [`DONE`] set.
    slots: Vec<Slot<T>>,
    /// The free slots (all below `slots.len()`), most recently freed last.
    free: Vec<usize>,
    /// How many slots hold a finished span.
    #[cfg(feature = "sdk-core")]
    finished: usize,
}

/// Set in the id of a finished span (ids count from 1 and never reach it).
#[cfg(feature = "sdk-core")]
const DONE: u64 = 1 << 63;

/// One slot of a [`Slab`]: `span` is initialised exactly when `id != 0`.
struct Slot<T> {
    id: u64,
    span: MaybeUninit<T>,
}

impl<T> Slot<T> {
    /// The open span in the slot, with its id (not a finished one).
    #[cfg(feature = "sdk-core")]
    fn live(&mut self) -> Option<(u64, &mut T)> {
        // SAFETY: a slot with an id holds an initialised span
        (self.is_open()).then(|| (self.id, unsafe { self.span.assume_init_mut() }))
    }

    #[cfg(feature = "sdk-core")]
    fn is_open(&self) -> bool {
        self.id != 0 && self.id & DONE == 0
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
            #[cfg(feature = "sdk-core")]
            finished: 0,
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
        let (slot, mut vacant) = self.reserve_vacant();
        // SAFETY: the slab is unchanged since the reserve, and the span is
        // written before `occupy`
        unsafe {
            vacant.place().write(span);
            vacant.occupy(id);
        }
        slot
    }

    /// A free slot for the next span, and the slot itself: its span and
    /// then its id are written through it without looking the slot up
    /// again (while the slab is unchanged). A slot past the last is made
    /// in the spare capacity and counted in only when it is occupied: such
    /// a `Vacant` dropped unoccupied leaves the slab as it was (a free slot
    /// reserved and not occupied is taken off the free list, and stays
    /// free).
    #[inline(always)]
    pub(super) fn reserve_vacant(&mut self) -> (usize, Vacant<T>) {
        let len = self.slots.len();
        while let Some(slot) = self.free.pop() {
            if let Some(entry) = self.slots.get_mut(slot).filter(|s| s.id == 0) {
                let entry = std::ptr::NonNull::from(entry);
                let slots = std::ptr::NonNull::from(&mut self.slots);
                return (slot, Vacant { entry, slots, len });
            }
        }
        self.slots.reserve(1);
        // SAFETY: there is spare capacity for one slot at `len`, and a
        // Vec's pointer is never null
        let entry = unsafe { std::ptr::NonNull::new_unchecked(self.slots.as_mut_ptr().add(len)) };
        let slots = std::ptr::NonNull::from(&mut self.slots);
        (
            len,
            Vacant {
                entry,
                slots,
                len: len + 1,
            },
        )
    }

    /// Whether `slot` is a free slot (one past the last is one too).
    #[cfg(test)]
    fn is_vacant(&self, slot: usize) -> bool {
        self.slots.get(slot).is_none_or(|s| s.id == 0)
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

    /// Marks the span with `id` in `slot`, if it is still open, finished
    /// after `finish` ran on it: it stays in its slot until
    /// [`take_finished`](Self::take_finished). Returns whether it was
    /// there.
    #[cfg(feature = "sdk-core")]
    #[inline]
    pub(super) fn finish(&mut self, slot: usize, id: u64, finish: impl FnOnce(&mut T)) -> bool {
        let Some(entry) = self.slots.get_mut(slot) else {
            return false;
        };
        match entry.live() {
            Some((i, span)) if i == id => finish(span),
            _ => return false,
        }
        // its place in the order spans ended, for `Finished::consume`
        entry.id = DONE | self.finished as u64;
        self.finished += 1;
        true
    }

    /// How many finished spans the slab holds.
    #[cfg(feature = "sdk-core")]
    #[inline(always)]
    pub(super) fn finished(&self) -> usize {
        self.finished
    }

    /// Takes the slots with every finished span out, leaving each open
    /// span in a slot of the same number (its registration still finds
    /// it) and the rest free. O(slots), once per batch of finished spans.
    #[cfg(feature = "sdk-core")]
    pub(super) fn take_finished(&mut self) -> Finished<T> {
        let mut old = std::mem::take(&mut self.slots);
        self.free.clear();
        let n = std::mem::take(&mut self.finished);
        let keep = old.iter().rposition(Slot::is_open).map_or(0, |i| i + 1);
        // as many as it held: the slab fills up to a batch again (its
        // capacity may be twice that, having grown past it)
        let mut slots = Vec::with_capacity(old.len());
        for (i, s) in old.iter_mut().take(keep).enumerate() {
            let span = match s.is_open() {
                true => {
                    // SAFETY: an open slot holds an initialised span,
                    // read out once: the old slot is marked free, so the
                    // span is owned by the new slot only
                    let span = unsafe { s.span.assume_init_read() };
                    slots.push(Slot {
                        id: s.id,
                        span: MaybeUninit::new(span),
                    });
                    s.id = 0;
                    continue;
                }
                false => MaybeUninit::uninit(),
            };
            slots.push(Slot { id: 0, span });
            self.free.push(i);
        }
        self.slots = slots;
        Finished(old, n)
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
        let open = self.slots.len().saturating_sub(self.free.len());
        #[cfg(feature = "sdk-core")]
        let open = open - self.finished;
        open
    }

    /// How many slots there are, open or free.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Takes every span out, with its id (finished ones too, their ids
    /// marked). Consume the iterator: spans it has not handed out when it
    /// is dropped are leaked, not dropped (every caller collects it or runs
    /// it to the end).
    pub(super) fn take_all(&mut self) -> impl Iterator<Item = (u64, T)> {
        self.free.clear();
        #[cfg(feature = "sdk-core")]
        {
            self.finished = 0;
        }
        std::mem::take(&mut self.slots).into_iter().filter_map(|s| {
            // SAFETY: a slot with an id holds an initialised span, read
            // out once (the slot itself is dropped without dropping it)
            (s.id != 0).then(|| (s.id, unsafe { s.span.assume_init_read() }))
        })
    }
}

/// A free slot of a slab, reserved by [`Slab::reserve_vacant`]: `entry`,
/// one of `slots` or the one past the last (in their spare capacity), and
/// their length once it is occupied (one more in that case: a length
/// stored either way, not a branch).
pub(super) struct Vacant<T> {
    entry: std::ptr::NonNull<Slot<T>>,
    slots: std::ptr::NonNull<Vec<Slot<T>>>,
    len: usize,
}

impl<T> Vacant<T> {
    /// Where its span is written.
    ///
    /// # Safety
    ///
    /// The slab is unchanged since the slot was reserved and has not moved
    /// (`Vacant` points at its slots' `Vec` itself, to count the slot in),
    /// and nothing else reaches the slot meanwhile.
    #[inline(always)]
    pub(super) unsafe fn place(&mut self) -> &mut MaybeUninit<T> {
        // SAFETY: the slot is where it was reserved (the caller's promise)
        unsafe { &mut (*self.entry.as_ptr()).span }
    }

    /// Marks the slot as holding the span with `id` (never 0).
    ///
    /// # Safety
    ///
    /// As for [`place`](Self::place), and the span was written through
    /// it.
    #[inline(always)]
    pub(super) unsafe fn occupy(self, id: u64) {
        debug_assert!(id != 0, "span ids start at 1");
        // SAFETY: as for `place`; the slot was free (id 0) or past the
        // last, and now holds the span written into it (a slot past the
        // last is at the slots' length, in their capacity: counted in,
        // it is initialised)
        unsafe {
            std::ptr::addr_of_mut!((*self.entry.as_ptr()).id).write(id);
            (*self.slots.as_ptr()).set_len(self.len);
        }
    }
}

/// The slots of a slab's finished spans, taken by
/// [`Slab::take_finished`], and how many there are: its finished spans
/// are handed out by [`consume`](Finished::consume), or dropped with it.
#[cfg(feature = "sdk-core")]
pub(crate) struct Finished<T>(Vec<Slot<T>>, usize);

#[cfg(feature = "sdk-core")]
impl<T> Finished<T> {
    /// `out` with the finished spans pushed onto its end, in the order
    /// they ended.
    pub(crate) fn into_vec_in(self, mut out: Vec<T>) -> Vec<T> {
        out.reserve_exact(self.1);
        // SAFETY: each span is read out (moved into `out`) once
        unsafe { self.consume(|span| out.push(std::ptr::read(span))) };
        out
    }

    /// Hands each finished span to `take`, in the order they ended, where
    /// it lies (not copied out first).
    ///
    /// # Safety
    ///
    /// `take` moves the span it is handed out (`ptr::read`) or drops it in
    /// place, and does not use it after: the slots forget it before the
    /// call (if `take` panics, the span it was handed is leaked, never
    /// dropped twice; the ones not handed yet are dropped with `self`).
    pub(crate) unsafe fn consume(mut self, mut take: impl FnMut(&mut T)) {
        // most often they ended in the order of their slots (spans one
        // after another, not nested): handed out in one pass
        let mut in_order = 0;
        for s in self.0.iter_mut() {
            if s.id & DONE == 0 {
                continue;
            }
            if s.id & !DONE != in_order as u64 {
                break;
            }
            in_order += 1;
            s.id = 0;
            // SAFETY: a finished slot holds an initialised span, handed
            // out once (its id is cleared, so the drop and the pass below
            // skip it)
            take(unsafe { s.span.assume_init_mut() });
        }
        if in_order == self.1 {
            return;
        }
        // else by their place in that order, which a finished slot's id
        // holds (below the count, each once), from the first out of it on
        let mut order = vec![usize::MAX; self.1 - in_order];
        for (i, s) in self.0.iter().enumerate() {
            if s.id & DONE != 0 {
                let at = ((s.id & !DONE) as usize).wrapping_sub(in_order);
                if let Some(o) = order.get_mut(at) {
                    *o = i;
                }
            }
        }
        for i in order {
            if let Some(s) = self.0.get_mut(i).filter(|s| s.id & DONE != 0) {
                s.id = 0;
                // SAFETY: as above
                take(unsafe { s.span.assume_init_mut() });
            }
        }
    }

    /// How many finished spans it holds.
    pub(crate) fn len(&self) -> usize {
        self.1
    }

    /// How many slots it has room for (finished, free and spare).
    pub(crate) fn room(&self) -> usize {
        self.0.capacity()
    }

    /// Each finished span, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.0
            .iter()
            .filter(|s| s.id & DONE != 0)
            // SAFETY: a finished slot holds an initialised span
            .map(|s| unsafe { s.span.assume_init_ref() })
    }

    /// Whether it holds no finished span.
    pub(crate) fn is_empty(&self) -> bool {
        self.1 == 0
    }

    /// [`into_vec_in`](Self::into_vec_in) a new vector.
    #[cfg(test)]
    pub(super) fn into_vec(self) -> Vec<T> {
        self.into_vec_in(Vec::new())
    }
}

#[cfg(feature = "sdk-core")]
impl<T> Drop for Finished<T> {
    fn drop(&mut self) {
        for s in self.0.iter_mut().filter(|s| s.id != 0) {
            s.id = 0;
            // SAFETY: a slot with an id holds an initialised span, dropped
            // once (its id is cleared)
            unsafe { s.span.assume_init_drop() };
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
        let count = || Arc::strong_count(&span) - 1;
        let mut slab = Slab::default();
        let slots: Vec<usize> = (1..=4).map(|id| slab.insert(id, span.clone())).collect();
        assert_eq!(count(), 4);
        assert!(slab.remove(slots[1], 2).is_some());
        assert!(slab.remove(slots[1], 2).is_none(), "removed once");
        assert!(slab.remove(slots[2], 99).is_none(), "another span's id");
        assert_eq!(count(), 3);
        let reused = slab.insert(5, span.clone());
        assert_eq!(reused, slots[1], "a freed slot is reused");
        assert!(slab.remove(slots[2], 3).is_some()); // a hole below the top
        let taken: Vec<u64> = slab.take_all().map(|(id, _)| id).collect();
        assert_eq!(taken, [1, 5, 4], "the free slot is skipped");
        assert_eq!(count(), 0, "taken spans were dropped");
        let again: Vec<usize> = (6..10).map(|id| slab.insert(id, span.clone())).collect();
        assert!(slab.remove(again[1], 7).is_some());
        assert!(slab.remove(again[2], 8).is_some()); // two holes
        assert_eq!((slab.live(), slab.len()), (2, 4));
        drop(slab);
        assert_eq!(count(), 0, "the slab dropped its two spans, and no hole");
    }

    /// A span written through `vacant` and marked by `occupy` (the
    /// recorder's way of storing a record) is live and owned once; a slot
    /// that is not free has no vacant place.
    #[cfg(feature = "sdk-core")]
    #[test]
    fn a_span_written_in_its_vacant_slot_is_live_once_occupied() {
        let span = Arc::new(());
        let count = || Arc::strong_count(&span) - 1;
        let mut slab = Slab::default();
        let below = slab.insert(1, span.clone());
        let (slot, mut vacant) = slab.reserve_vacant();
        assert!(slab.is_vacant(slot), "a reserved slot is vacant");
        // SAFETY: the slab is unchanged since the reserve; the span is
        // written before `occupy`
        unsafe {
            vacant.place().write(span.clone());
            vacant.occupy(2);
        }
        assert!(!slab.is_vacant(slot), "occupied");
        assert!(!slab.is_vacant(below), "occupied");
        assert!(slab.get_mut(slot, 2).is_some());
        assert_eq!((slab.live(), count()), (2, 2));
        assert!(slab.remove(slot, 2).is_some());
        assert_eq!(count(), 1, "removed once");
        // a freed slot is reserved first, then a new one on top
        assert!(slab.remove(below, 1).is_some());
        let top = slab.insert(3, span.clone());
        let (again, _) = slab.reserve_vacant();
        assert_eq!((below, again), (top, below + 1));
        // dropped unoccupied, it leaves the slab as it was
        let (same, _) = slab.reserve_vacant();
        assert_eq!((same, slab.live()), (again, 1));
        drop(slab);
        assert_eq!(count(), 0);
    }

    /// A finished span stays in its slot until the finished slots are
    /// taken, and is then owned by them only; an open span keeps its slot
    /// number through the take; a finished span cannot be finished,
    /// removed or reached again.
    #[cfg(feature = "sdk-core")]
    #[test]
    fn a_finished_span_is_owned_by_the_taken_slots_only() {
        let span = Arc::new(());
        let count = || Arc::strong_count(&span) - 1;
        let mut slab = Slab::default();
        let a = slab.insert(1, span.clone());
        let b = slab.insert(2, span.clone());
        let c = slab.insert(3, span.clone());
        let mut ran = 0;
        assert!(slab.finish(a, 1, |_| ran += 1));
        assert!(!slab.finish(a, 1, |_| ran += 1), "finished once");
        assert!(slab.remove(a, 1).is_none());
        assert!(slab.get_mut(a, 1).is_none(), "not open");
        assert!(!slab.finish(b, 9, |_| ran += 1), "another span's id");
        assert!(slab.finish(c, 3, |_| ran += 1));
        assert_eq!((ran, slab.finished(), count()), (2, 2, 3));
        let taken = slab.take_finished();
        assert_eq!(slab.finished(), 0);
        assert!(slab.get_mut(b, 2).is_some(), "open: same slot");
        assert_eq!((slab.live(), slab.len()), (1, 2), "a free slot below it");
        assert_eq!(slab.insert(4, span.clone()), a, "the free slot is reused");
        assert_eq!(count(), 4);
        assert_eq!(taken.into_vec().len(), 2, "the finished ones only");
        assert_eq!(count(), 2, "handed out, then dropped");
        assert!(slab.finish(b, 2, |_| ()));
        drop(slab.take_finished()); // dropped without being handed out
        assert_eq!(count(), 1);
        assert!(slab.finish(a, 4, |_| ()));
        drop(slab);
        assert_eq!(count(), 0, "the slab dropped its finished span");
    }

    /// Finished spans are handed out in the order they ended, not in the
    /// order of their slots.
    #[cfg(feature = "sdk-core")]
    #[test]
    fn finished_spans_come_out_in_the_order_they_ended() {
        let mut slab = Slab::default();
        let slots: Vec<usize> = (1..=4).map(|id| slab.insert(id, id * 10)).collect();
        for i in [2, 0, 3] {
            assert!(slab.finish(slots[i], i as u64 + 1, |_| ()));
        }
        assert_eq!(slab.take_finished().into_vec(), [30, 10, 40]);
        assert!(slab.finish(slots[1], 2, |_| ()));
        assert_eq!(slab.take_finished().into_vec(), [20]);
        // in slot order for a while, then not
        let slots: Vec<usize> = (5..=7).map(|id| slab.insert(id, id * 10)).collect();
        for (i, id) in [(0, 5), (2, 7), (1, 6)] {
            assert!(slab.finish(slots[i], id, |_| ()));
        }
        assert_eq!(slab.take_finished().into_vec(), [50, 70, 60]);
    }
}
