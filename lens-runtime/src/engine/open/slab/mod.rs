//! The slab a thread's open spans live in.

#[cfg(feature = "sdk-core")]
mod finished;
mod slot;
#[cfg(test)]
mod tests;

#[cfg(feature = "sdk-core")]
pub(crate) use finished::Finished;
use slot::Slot;
#[cfg(feature = "sdk-core")]
use slot::DONE;
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
/// Where the slab holds more other slots (open or free) than finished
/// ones, the finished records are moved out instead, by the slots they
/// ended in: a hand-over costs O(finished spans) either way, never
/// O(open spans), however many spans the thread holds open.
pub(super) struct Slab<T> {
    /// The span in each slot, with its id; a free slot has id 0 (ids
    /// start at 1) and no span; a finished span's id has [`DONE`] set.
    slots: Vec<Slot<T>>,
    /// The free slots (all below `slots.len()`), most recently freed last.
    free: Vec<usize>,
    /// How many slots hold a finished span.
    #[cfg(feature = "sdk-core")]
    finished: usize,
    /// The slots of the finished spans, in the order they ended (as many
    /// as `finished`).
    #[cfg(feature = "sdk-core")]
    ended: Vec<usize>,
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
            #[cfg(feature = "sdk-core")]
            ended: Vec::new(),
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
        self.ended.push(slot);
        true
    }

    /// How many finished spans the slab holds.
    #[cfg(feature = "sdk-core")]
    #[inline(always)]
    pub(super) fn finished(&self) -> usize {
        self.finished
    }

    /// Takes every finished span out, leaving each open span in its slot
    /// (its registration still finds it) and the rest free. O(finished
    /// spans), once per batch of them: the slots are taken whole where
    /// at most as many others (open or free) lie among them, else the
    /// finished spans are moved out of theirs.
    #[cfg(feature = "sdk-core")]
    pub(super) fn take_finished(&mut self) -> Finished<T> {
        if self.slots.len() > 2 * self.finished {
            return self.move_finished();
        }
        self.ended.clear();
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

    /// [`take_finished`](Self::take_finished) where other slots outnumber
    /// the finished ones (many spans held open): each finished span is
    /// moved out of its slot, in the order they ended, and its slot freed;
    /// the other slots are not touched.
    #[cfg(feature = "sdk-core")]
    #[cold]
    #[inline(never)]
    fn move_finished(&mut self) -> Finished<T> {
        self.finished = 0;
        let mut out: Vec<Slot<T>> = Vec::with_capacity(self.ended.len());
        for slot in self.ended.drain(..) {
            let Some(s) = self.slots.get_mut(slot).filter(|s| s.id & DONE != 0) else {
                continue; // never: `ended` holds finished slots only
            };
            s.id = 0;
            // SAFETY: a finished slot holds an initialised span, read out
            // once: its id is cleared, so the slab neither reads nor drops
            // it again (the span is owned by the new slot only)
            let span = unsafe { s.span.assume_init_read() };
            out.push(Slot {
                id: DONE | out.len() as u64,
                span: MaybeUninit::new(span),
            });
            self.free.push(slot);
        }
        if self.free.len() == self.slots.len() {
            // nothing open: start over (keeps the capacity)
            self.slots.clear();
            self.free.clear();
        }
        let n = out.len();
        Finished(out, n)
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
            self.ended.clear();
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
