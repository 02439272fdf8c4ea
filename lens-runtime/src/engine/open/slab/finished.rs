//! What a slab hands over of its finished spans: their slots, taken whole.

use super::slot::{Slot, DONE};

/// The slots of a slab's finished spans, taken by
/// [`Slab::take_finished`](super::Slab::take_finished), and how many
/// there are: its finished spans are handed out by
/// [`consume`](Finished::consume), or dropped with it.
pub(crate) struct Finished<T>(pub(super) Vec<Slot<T>>, pub(super) usize);

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
    pub(crate) fn into_vec(self) -> Vec<T> {
        self.into_vec_in(Vec::new())
    }
}

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
