//! Lens's own span path: the open records and finished batches of each
//! thread's list.

use super::slab::Vacant;
use super::spin::SpinGuard;
use super::{registry, OpenList, Record, Registration, Spans};
use crate::api::span::record::data::Batch;
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

impl Spans {
    /// Takes the list's finished records out (out of line: once a batch,
    /// and the end of a span needs fewer registers without it).
    #[cold]
    #[inline(never)]
    fn take_batch(&mut self) -> Batch {
        Batch::new(
            (self.rec.finished() > 0).then(|| self.rec.take_finished()),
            std::mem::take(&mut self.done),
        )
    }
}
