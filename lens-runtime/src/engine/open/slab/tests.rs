//! The slab's tests.

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

/// With more spans open than finished, the finished ones are moved out of
/// their slots, in the order they ended, and the open ones are not
/// touched: the slots stay where they were (not copied), each open span in
/// its slot; the emptied slots are reused; every span is dropped once.
#[cfg(feature = "sdk-core")]
#[test]
fn many_open_spans_stay_in_place_when_the_finished_ones_are_taken() {
    let span = Arc::new(());
    let count = || Arc::strong_count(&span) - 1;
    let mut slab = Slab::default();
    let open: Vec<usize> = (1..=1000)
        .map(|id| slab.insert(id, (id, span.clone())))
        .collect();
    let short: Vec<usize> = (1001..=1004)
        .map(|id| slab.insert(id, (id, span.clone())))
        .collect();
    for (k, id) in [(2, 1003), (0, 1001), (3, 1004)] {
        assert!(slab.finish(short[k], id, |_| ()));
    }
    // and one of the open ones, below them
    assert!(slab.finish(open[10], 11, |_| ()));
    let at = slab.slots.as_ptr();
    let taken = slab.take_finished();
    assert_eq!(slab.slots.as_ptr(), at, "the slots were not copied");
    assert_eq!(taken.room(), 4, "the finished spans only");
    let ids: Vec<u64> = taken.into_vec().into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, [1003, 1001, 1004, 11], "the order they ended");
    assert_eq!(count(), 1000, "handed out, then dropped");
    for (k, &slot) in open.iter().enumerate() {
        let id = k as u64 + 1;
        assert_eq!(slab.get_mut(slot, id).is_some(), id != 11, "{id}");
    }
    assert!(slab.get_mut(short[1], 1002).is_some());
    assert_eq!((slab.live(), slab.finished()), (1000, 0));
    let reused = slab.insert(2000, (2000, span.clone()));
    assert!([open[10], short[0], short[2], short[3]].contains(&reused));
    assert_eq!(slab.len(), 1004, "no slot added");
    // everything ends, outermost first: each take is its batch only
    for (k, &slot) in open.iter().enumerate() {
        let id = k as u64 + 1;
        if id != 11 {
            assert!(slab.finish(slot, id, |_| ()));
        }
        if slab.finished() == 100 {
            assert_eq!(slab.take_finished().room(), 100);
        }
    }
    drop(slab.take_finished());
    assert_eq!((slab.live(), count()), (2, 2));
    drop(slab);
    assert_eq!(count(), 0);
}
