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
        if let Some(place) = self.vacant(slot) {
            place.write(span);
            // SAFETY: the span was written into the slot just above
            unsafe { self.occupy(slot, id) };
        }
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
                    // built here, not a constant: a constant's
                    // uninitialised bytes are written as zeros (11 stores
                    // a span)
                    self.slots.push(Slot {
                        id: 0,
                        span: MaybeUninit::uninit(),
                    });
                    return self.slots.len() - 1;
                }
            }
        }
    }

    /// Where the span of `slot`, a free slot [`reserve`](Self::reserve)
    /// returned, is written before [`occupy`](Self::occupy); `None` if
    /// the slot is not free.
    #[inline(always)]
    pub(super) fn vacant(&mut self, slot: usize) -> Option<&mut MaybeUninit<T>> {
        self.slots
            .get_mut(slot)
            .filter(|s| s.id == 0)
            .map(|s| &mut s.span)
    }

    /// Marks the free `slot` as holding the span with `id` (never 0).
    ///
    /// # Safety
    ///
    /// The span was written into the slot (through
    /// [`vacant`](Self::vacant)) after it was reserved.
    #[inline(always)]
    pub(super) unsafe fn occupy(&mut self, slot: usize, id: u64) {
        debug_assert!(id != 0, "span ids start at 1");
        debug_assert!(
            self.slots.get(slot).is_some_and(|s| s.id == 0),
            "slot {slot} is not free"
        );
        if let Some(entry) = self.slots.get_mut(slot).filter(|s| s.id == 0) {
            entry.id = id;
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
            copy_inline(entry.span.as_ptr(), out.as_mut_ptr().add(out.len()));
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

    /// Takes every span out, with its id. Consume the iterator: spans it
    /// has not handed out when it is dropped are leaked, not dropped (every
    /// caller collects it or runs it to the end).
    pub(super) fn take_all(&mut self) -> impl Iterator<Item = (u64, T)> {
        self.free.clear();
        std::mem::take(&mut self.slots).into_iter().filter_map(|s| {
            // SAFETY: a slot with an id holds an initialised span, read
            // out once (the slot itself is dropped without dropping it)
            (s.id != 0).then(|| (s.id, unsafe { s.span.assume_init_read() }))
        })
    }
}

/// Asks the CPU to own, for writing, the cache lines that hold `out`'s
/// next element (if it has room for one), so that the next span to end
/// does not wait for them: `out` was last read by another thread (the
/// collector and the export thread), and a store to a line another core
/// holds stalls the next locked instruction until that core gives the
/// line up. The first and last line may hold the neighbouring bytes too
/// (the previous element, or the allocator's header before the first).
/// Only where the CPU has `PREFETCHW` (CPUID `0x8000_0001`, ECX bit 8),
/// and never under Miri, which runs no inline assembly.
#[cfg(feature = "sdk-core")]
#[inline(always)]
pub(super) fn prefetch_next<T>(out: &Vec<T>) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if out.len() < out.capacity() && has_prefetchw() {
        let first = out.as_ptr().wrapping_add(out.len()).cast::<u8>();
        let mut line = (first as usize) & !63;
        let end = first as usize + std::mem::size_of::<T>();
        while line < end {
            // SAFETY: a prefetch is a hint: it never faults, whatever the
            // address, and changes no memory the program can see
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
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = out;
}

/// Copies one `T` from `src` to `dst` (which do not overlap) bit for
/// bit, as `copy_nonoverlapping` does, in 16-byte pieces written out by
/// the compiler: a copy of a constant size over 128 bytes (a record is
/// 160) is otherwise a `memcpy` call, ~35 instructions a span where the
/// pieces are ~20.
///
/// # Safety
///
/// As `std::ptr::copy_nonoverlapping(src, dst, 1)`.
#[cfg(feature = "sdk-core")]
#[inline(always)]
unsafe fn copy_inline<T>(src: *const T, dst: *mut T) {
    type Piece = [MaybeUninit<u8>; 16];
    let (s, d) = (src.cast::<MaybeUninit<u8>>(), dst.cast::<MaybeUninit<u8>>());
    let n = std::mem::size_of::<T>();
    let whole = n / 16 * 16;
    let mut i = 0;
    // SAFETY: every piece lies within the `T` at `src` and at `dst` (the
    // caller's promise); `MaybeUninit` bytes may be uninitialised (padding)
    unsafe {
        while i < whole {
            s.add(i)
                .cast::<Piece>()
                .copy_to_nonoverlapping(d.add(i).cast::<Piece>(), 1);
            i += 16;
        }
        s.add(whole).copy_to_nonoverlapping(d.add(whole), n - whole);
    }
}

/// Whether the CPU has `PREFETCHW`: asked once, then one relaxed load.
#[cfg(all(feature = "sdk-core", target_arch = "x86_64", not(miri)))]
#[inline(always)]
fn has_prefetchw() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    // 0: not asked yet, 1: yes, 2: no
    static HAS: AtomicU8 = AtomicU8::new(0);
    match HAS.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let yes = detect_prefetchw();
            HAS.store(if yes { 1 } else { 2 }, Ordering::Relaxed);
            yes
        }
    }
}

#[cfg(all(feature = "sdk-core", target_arch = "x86_64", not(miri)))]
#[cold]
fn detect_prefetchw() -> bool {
    use std::arch::x86_64::__cpuid;
    // SAFETY: CPUID is on every x86-64 CPU (a safe function in newer
    // compilers, hence the allow)
    #[allow(unused_unsafe)]
    let (max, ecx) = unsafe { (__cpuid(0x8000_0000).eax, __cpuid(0x8000_0001).ecx) };
    max >= 0x8000_0001 && (ecx >> 8) & 1 == 1
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
        let slot = slab.reserve();
        slab.vacant(slot)
            .expect("a reserved slot is vacant")
            .write(span.clone());
        // SAFETY: the span was written into the slot just above
        unsafe { slab.occupy(slot, 2) };
        assert!(slab.vacant(slot).is_none(), "occupied");
        assert!(slab.vacant(below).is_none(), "occupied");
        assert!(slab.get_mut(slot, 2).is_some());
        assert_eq!((slab.live(), count()), (2, 2));
        assert!(slab.remove(slot, 2).is_some());
        assert_eq!(count(), 1, "removed once");
        drop(slab);
        assert_eq!(count(), 0);
    }

    /// A span moved to a list leaves its slot free: dropped by the list,
    /// not by the slab; a moved span cannot be moved or removed again.
    #[cfg(feature = "sdk-core")]
    #[test]
    fn a_moved_span_is_owned_by_the_list_only() {
        let span = Arc::new(());
        let count = || Arc::strong_count(&span) - 1;
        let mut slab = Slab::default();
        let a = slab.insert(1, span.clone());
        let b = slab.insert(2, span.clone());
        let mut out = Vec::with_capacity(1);
        assert!(slab.move_into(a, 1, &mut out, |_| {}));
        assert!(!slab.move_into(a, 1, &mut out, |_| {}), "moved once");
        assert!(slab.remove(a, 1).is_none());
        assert!(!slab.move_into(b, 9, &mut out, |_| {}), "another span's id");
        assert!(slab.move_into(b, 2, &mut out, |_| {}), "grows the list");
        assert_eq!((out.len(), count()), (2, 2));
        assert_eq!(slab.len(), 0, "nothing open: started over");
        drop(slab);
        assert_eq!(count(), 2, "the slab held none of them");
        drop(out);
        assert_eq!(count(), 0);
    }
}
