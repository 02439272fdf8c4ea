//! Lens's own span path: the open records and finished batches of each
//! thread's list.

use super::lock::SpinGuard;
use super::slab::Vacant;
use super::{registry, OpenList, Record, Registration, Spans};
use crate::engine::record::FinishedBatch;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Full batches that ending threads have taken out of their lists and not
/// yet handed over (queued for the collector, or given to the sink): such
/// a batch is in neither place a drain looks, so the last drain of a
/// shutdown waits for them ([`in_flight`]). Counted up under the list's
/// lock, as the batch is taken: a drain that then locks the list sees it.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// Batches taken out of their lists and not yet handed over: once it
/// reads 0, every batch taken before the caller last locked a list (in
/// [`take_all_finished`]) has been handed over, and what the ending thread did to
/// hand it over is visible.
pub(crate) fn in_flight() -> usize {
    IN_FLIGHT.load(Ordering::Acquire)
}

/// In a forked child (fork handler: an atomic store): threads that had
/// batches in flight in the parent do not exist here.
pub(crate) fn reset_after_fork() {
    IN_FLIGHT.store(0, Ordering::Relaxed);
}

/// A full batch's place in [`IN_FLIGHT`] from when its ending thread took
/// it out of its list until the thread has handed it over (dropped after,
/// or as the thread unwinds).
#[must_use = "the batch is in flight until this is dropped, after its hand-over"]
pub(crate) struct InFlight(());

impl InFlight {
    /// Counts one batch in flight: called under the list's lock.
    fn count() -> InFlight {
        IN_FLIGHT.fetch_add(1, Ordering::Relaxed);
        InFlight(())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // a drain that reads what this leaves sees the hand-over made
        IN_FLIGHT.fetch_sub(1, Ordering::Release);
    }
}

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
        let (slot, vacant) = spans.records.reserve_vacant();
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
        self.list.lock().records.get_mut(self.slot, self.id).map(f)
    }

    /// Ends the record (`finish` sets its end), if it is still open: it
    /// stays where it is, one of the list's finished records. Returns
    /// them all once there are `threshold`, counted in flight until the
    /// [`InFlight`] is dropped (after the batch is handed over); `Err(())`
    /// if the span was made before a fork (never exported).
    #[inline(always)]
    pub(crate) fn mark_finished(
        &self,
        threshold: usize,
        finish: impl FnOnce(&mut Record),
    ) -> Result<Option<(FinishedBatch, InFlight)>, ()> {
        if !self.list.is_current() {
            return Err(());
        }
        let mut spans = self.list.lock();
        if !spans.records.finish(self.slot, self.id, finish) {
            return Ok(None);
        }
        Ok((spans.records.finished() >= threshold).then(|| spans.take_in_flight()))
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
        let found = spans.records.iter_mut().find_map(|(slot, id, r)| {
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
pub(crate) fn take_all_finished() -> Vec<FinishedBatch> {
    let lists: Vec<&'static OpenList> = registry().all.clone();
    lists
        .into_iter()
        .filter(|l| l.is_current())
        .filter_map(|l| {
            let mut spans = l.lock();
            let any = spans.records.finished() > 0 || !spans.set_aside.is_empty();
            any.then(|| spans.take_batch())
        })
        .collect()
}

impl Spans {
    /// [`take_batch`](Self::take_batch), counted in flight (the list is
    /// locked).
    #[cold]
    #[inline(never)]
    fn take_in_flight(&mut self) -> (FinishedBatch, InFlight) {
        let in_flight = InFlight::count();
        (self.take_batch(), in_flight)
    }

    /// Takes the list's finished records out (out of line: once a batch,
    /// and the end of a span needs fewer registers without it).
    #[cold]
    #[inline(never)]
    fn take_batch(&mut self) -> FinishedBatch {
        FinishedBatch::new(
            (self.records.finished() > 0).then(|| self.records.take_finished()),
            std::mem::take(&mut self.set_aside),
        )
    }
}
