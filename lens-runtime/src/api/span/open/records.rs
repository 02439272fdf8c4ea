//! Lens's own span path: the open records and finished batches of each
//! thread's list.

use super::slab::{Finished, Vacant};
use super::spin::SpinGuard;
use super::{registry, OpenList, Record, Registration, Spans};
use std::mem::MaybeUninit;

/// A free slot of this thread's list for a new open record, with the list
/// locked: the record is written straight into it ([`NewSlot::place`]),
/// then the slot is marked as holding it ([`NewSlot::commit`]).
pub(crate) struct NewSlot {
    /// Held: the list stays locked until the `NewSlot` is committed or
    /// dropped.
    _locked: SpinGuard<'static, Spans>,
    reg: Registration,
    /// The slot in the list: where it was reserved while the guard is held
    /// and the slab unchanged, which is until `commit` (nothing else
    /// reaches the slab of a `NewSlot`; the slab never moves: its list is
    /// leaked).
    vacant: Vacant<Record>,
}

impl NewSlot {
    /// This thread's next slot (`None` while the thread is exiting).
    #[inline(always)]
    pub(crate) fn take() -> Option<NewSlot> {
        let list = super::mine()?;
        let mut spans = list.lock();
        let id = spans.next_id();
        let (slot, vacant) = spans.rec.reserve_vacant();
        Some(NewSlot {
            _locked: spans,
            reg: Registration { list, slot, id },
            vacant,
        })
    }

    /// Where the record is written. Written through this reference, the
    /// record is made where it lies, not on the stack and copied (the copy
    /// reads back stores still on their way to the cache, and stalls on
    /// them; and a closure handed the values would copy them into itself
    /// first).
    #[inline(always)]
    pub(crate) fn place(&mut self) -> &mut MaybeUninit<Record> {
        // SAFETY: the slab is locked and unchanged since `take` (see the
        // field); `&mut self` makes the reference unique
        unsafe { self.vacant.place() }
    }

    /// Marks the slot as holding its record; the list is unlocked. A
    /// `NewSlot` dropped without it leaves the slot free (a record
    /// written there is leaked, never read or dropped).
    ///
    /// # Safety
    ///
    /// The record was written through [`place`](Self::place).
    #[inline(always)]
    pub(crate) unsafe fn commit(self) -> Registration {
        // SAFETY: the record was written into the slot (the caller's
        // promise), reserved by `take` in the slab still locked
        unsafe { self.vacant.occupy(self.reg.id) };
        self.reg
    }
}

impl Registration {
    /// Runs `f` on the record, if it is still open (and was made in
    /// this process).
    pub(crate) fn with_record<R>(&self, f: impl FnOnce(&mut Record) -> R) -> Option<R> {
        if !self.list.is_current() {
            return None;
        }
        self.list.lock().rec.get_mut(self.slot, self.id).map(f)
    }

    /// Ends the record (`finish` sets its end), if it is still open: it
    /// stays where it is, one of the list's finished records. Returns
    /// them all once there are `threshold`; `Err(())` if the span was
    /// made before a fork (never exported).
    #[inline(always)]
    pub(crate) fn end_record(
        &self,
        threshold: usize,
        finish: impl FnOnce(&mut Record),
    ) -> Result<Option<Batch>, ()> {
        if !self.list.is_current() {
            return Err(());
        }
        let mut spans = self.list.lock();
        if !spans.rec.finish(self.slot, self.id, finish) {
            return Ok(None);
        }
        Ok((spans.rec.finished() >= threshold).then(|| spans.take_batch()))
    }
}

/// The open record of the span `trace_id`/`span_id`: looked for in this
/// thread's list first, then in every list (a span current as its ids
/// only, `NEMO_LENS_OTEL_CONTEXT=ids`).
pub(crate) fn find(
    trace_id: opentelemetry::trace::TraceId,
    span_id: opentelemetry::trace::SpanId,
) -> Option<Registration> {
    let in_list = |list: &'static OpenList| {
        if !list.is_current() {
            return None;
        }
        let mut spans = list.lock();
        let found = spans.rec.iter_mut().find_map(|(slot, id, r)| {
            r.is(trace_id, span_id)
                .then_some(Registration { list, slot, id })
        });
        found
    };
    let mine = super::MINE.get();
    if let Some(found) = mine.and_then(in_list) {
        return Some(found);
    }
    let lists: Vec<&'static OpenList> = registry().all.clone();
    lists
        .into_iter()
        .filter(|l| Some(std::ptr::from_ref(*l)) != mine.map(std::ptr::from_ref))
        .find_map(in_list)
}

/// Takes every list's finished records (lists of this process only).
pub(crate) fn take_done() -> Vec<Batch> {
    let lists: Vec<&'static OpenList> = registry().all.clone();
    lists
        .into_iter()
        .filter(|l| l.is_current())
        .filter_map(|l| {
            let mut spans = l.lock();
            let any = spans.rec.finished() > 0 || !spans.done.is_empty();
            any.then(|| spans.take_batch())
        })
        .collect()
}

/// Finished records of one list, handed over together: those that ended
/// where they were recorded, in the slots they were taken with (read out
/// off the ending thread, by whoever hands them to the sink), and the
/// list's `done` records (ended by truncation, and those that had ended
/// in the slab before it: all older than the slots' finished ones, which
/// ended after truncation emptied the slab).
pub(crate) struct Batch {
    slots: Option<Finished<Record>>,
    records: Vec<Record>,
}

impl Batch {
    /// The records in the order they ended: the list's `done` records,
    /// then those of the slots (in the order they ended).
    pub(crate) fn into_records(self) -> Vec<Record> {
        let Batch { slots, records } = self;
        match slots {
            // the usual batch: the slots' records alone, in the vector
            // they are read out into (extending an empty one would copy
            // them all again, into another allocation)
            Some(slots) if records.is_empty() => slots.into_vec_in(spare()),
            Some(slots) => slots.into_vec_in(records),
            None => records,
        }
    }

    /// Whether it holds no record.
    pub(crate) fn is_empty(&self) -> bool {
        self.records.is_empty() && self.slots.as_ref().is_none_or(Finished::is_empty)
    }
}

/// Emptied vectors of finished records, handed back by the sink that
/// built their records ([`give_back`]), for the next batches' records: the
/// memory a batch is read out into is reused, not taken from the
/// allocator on the collector's thread and given back on the exporter's
/// (glibc then trims the collector's heap and faults its pages in again:
/// ~1,900–9,200 page faults per 1M spans with spares, ~6,500–20,000
/// without, in `total_cpu`). At most [`Spares::MAX`] vectors, each with
/// room for half a batch to two batches (~85 KiB for one; ≤ 672 KiB in
/// all), kept for the rest of the process (also after shutdown, and in a
/// forked child: memory the allocator would keep too); never waited for:
/// a lock held elsewhere (or, in a child forked while another thread held
/// it, forever) means the allocator.
pub(crate) struct Spares<T>(std::sync::Mutex<Vec<Vec<T>>>);

impl<T> Spares<T> {
    /// Emptied vectors kept at most.
    pub(crate) const MAX: usize = 4;

    pub(crate) const fn new() -> Self {
        Spares(std::sync::Mutex::new(Vec::new()))
    }

    fn list(&self) -> Option<std::sync::MutexGuard<'_, Vec<Vec<T>>>> {
        match self.0.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// An empty vector: a spare one, else a new one.
    pub(crate) fn take(&self) -> Vec<T> {
        self.list().and_then(|mut l| l.pop()).unwrap_or_default()
    }

    /// Keeps `v` if it is empty, its room is in `room` (a vector grown
    /// far past a batch is not kept), and there is room among the spares;
    /// else frees it.
    pub(crate) fn give_back(&self, v: Vec<T>, room: std::ops::RangeInclusive<usize>) {
        if v.is_empty() && room.contains(&v.capacity()) {
            if let Some(mut l) = self.list() {
                if l.len() < Self::MAX {
                    l.push(v);
                }
            }
        }
    }
}

static SPARE: Spares<Record> = Spares::new();

/// An empty vector for a batch's records.
fn spare() -> Vec<Record> {
    SPARE.take()
}

/// Keeps `records`, whose records were all moved out (its length is 0),
/// for the next batch if its room is in `room`.
pub(crate) fn give_back(records: Vec<Record>, room: std::ops::RangeInclusive<usize>) {
    SPARE.give_back(records, room);
}

impl From<Vec<Record>> for Batch {
    fn from(records: Vec<Record>) -> Self {
        Batch {
            slots: None,
            records,
        }
    }
}

impl Spans {
    /// Takes the list's finished records out (out of line: once a batch,
    /// and the end of a span needs fewer registers without it).
    #[cold]
    #[inline(never)]
    fn take_batch(&mut self) -> Batch {
        Batch {
            slots: (self.rec.finished() > 0).then(|| self.rec.take_finished()),
            records: std::mem::take(&mut self.done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Spares;

    /// Only empty vectors with room enough are kept, at most `MAX`, and
    /// they come back with their room.
    #[test]
    fn spares_keep_empty_roomy_vectors_up_to_a_bound() {
        let s: Spares<u64> = Spares::new();
        s.give_back(vec![1], 0..=64);
        s.give_back(Vec::with_capacity(3), 8..=64);
        s.give_back(Vec::with_capacity(65), 8..=64);
        assert_eq!(
            s.take().capacity(),
            0,
            "a full, small or large vector is freed"
        );
        for _ in 0..Spares::<u64>::MAX + 2 {
            s.give_back(Vec::with_capacity(16), 8..=64);
        }
        let kept: Vec<Vec<u64>> = std::iter::repeat_with(|| s.take())
            .take_while(|v| v.capacity() > 0)
            .collect();
        assert_eq!(kept.len(), Spares::<u64>::MAX);
        assert!(kept.iter().all(|v| v.is_empty() && v.capacity() >= 16));
        // held elsewhere: never waited for
        let held = s.0.lock().unwrap();
        s.give_back(Vec::with_capacity(16), 8..=64);
        assert_eq!(s.take().capacity(), 0);
        drop(held);
        assert_eq!(s.take().capacity(), 0, "given back while held: freed");
    }
}
