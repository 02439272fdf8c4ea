use super::*;
use opentelemetry::trace::{Tracer as _, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use std::time::Duration;

/// The tests share the global registry and tracking switch.
static SERIAL: Mutex<()> = Mutex::new(());

struct Fixture {
    exporter: InMemorySpanExporter,
    provider: SdkTracerProvider,
    _serial: MutexGuard<'static, ()>,
}

impl Fixture {
    fn new() -> Self {
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        truncate_all("earlier test");
        set_tracking(true);
        Fixture {
            exporter,
            provider,
            _serial: serial,
        }
    }

    /// A started span (not ended), as a context.
    fn start(&self, name: &str) -> Context {
        let span = self.provider.tracer("t").start(name.to_owned());
        Context::new().with_span(span)
    }

    fn finished(&self) -> Vec<String> {
        let spans = self.exporter.get_finished_spans().unwrap();
        spans.iter().map(|s| s.name.to_string()).collect()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        set_tracking(false);
    }
}

/// This thread's list and how many slots it has.
fn my_slots() -> (usize, usize) {
    let g = mine().expect("this thread's list").lock();
    (g.contexts.live(), g.contexts.len())
}

#[test]
fn ending_oldest_first_unregisters_everything() {
    let f = Fixture::new();
    let spans: Vec<(Context, Registration)> = (0..20_000)
        .map(|i| {
            let cx = f.start(&format!("s{i}"));
            let reg = register(&cx).expect("tracking is on");
            (cx, reg)
        })
        .collect();
    assert_eq!(my_slots(), (20_000, 20_000));
    for (i, (cx, reg)) in spans.into_iter().enumerate() {
        cx.span().end();
        reg.unregister();
        if i == 9_999 {
            // the freed slots wait for reuse; nothing moved
            assert_eq!(my_slots(), (10_000, 20_000));
        }
    }
    assert_eq!(my_slots(), (0, 0), "all unregistered, slab started over");
    assert_eq!(truncate_all("test"), 0);
    assert_eq!(f.finished().len(), 20_000);
}

#[test]
fn freed_slots_are_reused_and_truncation_is_innermost_first() {
    let f = Fixture::new();
    let a = f.start("a");
    let _ra = register(&a).unwrap();
    let b = f.start("b");
    let rb = register(&b).unwrap();
    let c = f.start("c");
    let _rc = register(&c).unwrap();
    b.span().end();
    rb.unregister();
    let d = f.start("d"); // takes b's slot
    let rd = register(&d).unwrap();
    assert_eq!(rd.slot, 1);
    assert_eq!(my_slots(), (3, 3));
    assert_eq!(truncate_all("test"), 3);
    assert_eq!(f.finished(), ["b", "d", "c", "a"]);
    // a registration whose slot was taken by truncation: a no-op,
    // also once a new span has the slot
    let e = f.start("e");
    let re = register(&e).unwrap();
    assert_eq!(re.slot, 0);
    _ra.unregister();
    assert_eq!(my_slots(), (1, 1), "e is still registered");
    re.unregister();
    assert_eq!(my_slots(), (0, 0));
    e.span().end();
}

#[test]
fn any_end_order_keeps_the_slab_at_the_most_open() {
    let f = Fixture::new();
    let mut open: Vec<Registration> = Vec::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..5_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if open.len() < 64 && (open.is_empty() || x.is_multiple_of(2)) {
            let cx = f.start(&format!("s{i}"));
            open.push(register(&cx).unwrap());
        } else {
            let reg = open.swap_remove((x % open.len() as u64) as usize);
            reg.unregister();
        }
        let (live, slots) = my_slots();
        assert_eq!(live, open.len());
        assert!(slots <= 64, "{slots}");
    }
    let n = open.len();
    assert_eq!(truncate_all("test"), n);
}

#[test]
fn reset_after_fork_forgets_without_ending() {
    let f = Fixture::new();
    let cx = f.start("parent.open");
    let reg = register(&cx).unwrap();
    reset_after_fork();
    assert!(register(&cx).is_none(), "tracking is off");
    assert_eq!(truncate_all("child"), 0);
    assert!(cx.span().is_recording(), "not ended");
    reg.unregister(); // a no-op
                      // tracking on again: this thread gets a new list
    set_tracking(true);
    let child = f.start("child.open");
    let _rc = register(&child).unwrap();
    assert_eq!(my_slots(), (1, 1));
    assert_eq!(truncate_all("child"), 1);
    assert_eq!(f.finished(), ["child.open"]);
    cx.span().end();
}

#[test]
fn reset_after_fork_never_blocks_on_held_locks() {
    let f = Fixture::new();
    let cx = f.start("parent.open");
    let reg = register(&cx).unwrap();
    // as in a child forked while other threads held the registry
    // and a list: both stay locked for ever
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let held_registry = registry();
        let held_list = reg.list.lock();
        reset_after_fork();
        reg.unregister(); // must not lock the list
        let _ = tx.send(());
        drop((held_list, held_registry));
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("reset_after_fork and unregister do not block");
    // the new registry works
    set_tracking(true);
    let child = f.start("child.open");
    let _rc = register(&child).unwrap();
    assert_eq!(truncate_all("child"), 1);
    assert_eq!(f.finished(), ["child.open"]);
    assert!(cx.span().is_recording(), "the parent's span is not ended");
    cx.span().end();
}

/// A record written through a new slot's place and committed is open in
/// this thread's list, is ended once into its finished records, and is
/// gone from the open ones after (the recorder's way). Passes under Miri,
/// with Stacked and with Tree Borrows: `MIRIFLAGS=-Zmiri-disable-isolation
/// cargo +nightly miri test -p nemo-lens-runtime --features sdk-core --lib
/// open::tests::a_record_written` (isolation off for the clock).
#[cfg(feature = "sdk-core")]
#[test]
fn a_record_written_through_a_new_slot_is_open_then_finished_once() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    use opentelemetry::trace::{SpanId, TraceId};
    // `for_test(i)`: trace id 1, span id i + 1
    let is_ours = |r: &Record| r.is(TraceId::from(1u128), SpanId::from(9001u64));
    let mut slot = record_slots::NewSlot::take().expect("a list for this thread");
    slot.place().write(Record::for_test(9000, true));
    // SAFETY: the record was written through `place` just above
    let reg = unsafe { slot.commit() };
    assert_eq!(reg.with_record(|r| is_ours(r)), Some(true), "open");
    let mut finished = 0;
    let done = reg
        .mark_finished(1, |_| finished += 1)
        .expect("made in this process")
        .expect("handed back at a threshold of 1")
        .0
        .into_records();
    assert_eq!(finished, 1, "finish ran once");
    assert_eq!(
        done.iter().filter(|r| is_ours(r)).count(),
        1,
        "finished once"
    );
    assert!(reg.with_record(|_| ()).is_none(), "no longer open");
    assert!(
        reg.mark_finished(1, |_| ()).unwrap().is_none(),
        "not ended twice"
    );
}

/// Starts the record `Record::for_test(i, sampled)` (trace id 1, span id
/// i + 1) in this thread's list.
#[cfg(feature = "sdk-core")]
fn start_record(i: u64, sampled: bool) -> Registration {
    let mut slot = record_slots::NewSlot::take().expect("a list for this thread");
    slot.place().write(Record::for_test(i, sampled));
    // SAFETY: the record was written through `place` just above
    unsafe { slot.commit() }
}

/// Records that a truncation ended come out of the list's batch ahead of
/// those that ended after it (in their slots): the order spans ended in.
#[cfg(feature = "sdk-core")]
#[test]
fn a_batch_hands_out_records_in_the_order_they_ended_across_a_truncation() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    use opentelemetry::trace::{SpanId, TraceId};
    let start = |i: u64| start_record(i, true);
    // `for_test(i)`: trace id 1, span id i + 1
    let ours = |r: &Record| {
        [9101u64, 9102]
            .into_iter()
            .position(|id| r.is(TraceId::from(1u128), SpanId::from(id)))
    };
    let _truncated = start(9100);
    assert!(truncate_all("test") >= 1);
    let ended = start(9101);
    assert!(ended.mark_finished(usize::MAX, |_| ()).unwrap().is_none());
    let order: Vec<usize> = record_slots::take_all_finished()
        .into_iter()
        .flat_map(|b| b.into_records())
        .filter_map(|r| ours(&r))
        .collect();
    assert_eq!(order, [0, 1], "the truncated record first");
}

/// A batch whose records ended in their slots, in another order than the
/// slots': counted, tested and handed out where they lie in the order
/// they ended, also after a split.
#[cfg(feature = "sdk-core")]
#[test]
fn a_batch_of_slots_hands_out_its_records_in_the_order_they_ended() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    use opentelemetry::trace::{SpanId, TraceId};
    let start = start_record;
    // `for_test(i)`: trace id 1, span id i + 1
    let ids: Vec<u64> = (9200..9205).collect();
    let ours = |r: &Record| {
        ids.iter()
            .position(|&i| r.is(TraceId::from(1u128), SpanId::from(i + 1)))
    };
    let regs: Vec<Registration> = ids.iter().map(|&i| start(i, i != 9203)).collect();
    for k in [2, 0, 4, 1, 3] {
        assert!(regs[k].mark_finished(usize::MAX, |_| ()).unwrap().is_none());
    }
    let batch = record_slots::take_all_finished()
        .into_iter()
        .find(|b| b.sampled() > 0 && !b.all(|r| ours(r).is_none()))
        .expect("this thread's batch");
    assert_eq!(batch.len(), 5, "{}", batch.len());
    assert_eq!(batch.sampled(), 4, "9203 is not sampled");
    assert!(batch.all(|r| ours(r).is_some()));
    let mut order = Vec::new();
    // SAFETY: each record is moved out once
    unsafe { batch.consume(|r| order.extend(ours(&std::ptr::read(r)))) };
    assert_eq!(order, [2, 0, 4, 1, 3], "the order they ended in");
    // split: the first records stay
    let regs: Vec<Registration> = ids.iter().map(|&i| start(i, true)).collect();
    for k in [3, 1, 0, 2, 4] {
        assert!(regs[k].mark_finished(usize::MAX, |_| ()).unwrap().is_none());
    }
    let mut batch = record_slots::take_all_finished()
        .into_iter()
        .find(|b| !b.all(|r| ours(r).is_none()))
        .expect("this thread's batch");
    let rest = batch.split_off(2);
    let positions = |b: crate::engine::record::FinishedBatch| -> Vec<usize> {
        b.into_records().iter().filter_map(&ours).collect()
    };
    assert_eq!(
        (positions(batch), positions(rest)),
        (vec![3, 1], vec![0, 2, 4])
    );
}

/// A batch taken from a list that keeps many spans open, with few ended,
/// holds its records only, moved out of their slots (the open spans stay
/// where they are, and no emptied slot is queued with the batch); a batch
/// of slots mostly finished stays as it is.
#[cfg(feature = "sdk-core")]
#[test]
fn a_batch_whose_slots_are_mostly_not_its_records_is_compacted() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let start = |i: u64| start_record(i, true);
    let open: Vec<Registration> = (9300..9400).map(start).collect();
    let ended = start(9400);
    assert!(ended.mark_finished(usize::MAX, |_| ()).unwrap().is_none());
    let mine = |b: &crate::engine::record::FinishedBatch| {
        use opentelemetry::trace::{SpanId, TraceId};
        !b.all(|r| !r.is(TraceId::from(1u128), SpanId::from(9401)))
    };
    let batch = record_slots::take_all_finished()
        .into_iter()
        .find(mine)
        .expect("this thread's batch");
    assert_eq!(batch.len(), 1);
    assert_eq!(batch.slot_room(), 1, "1 record among 101 slots: moved out");
    drop(batch);
    for (k, r) in open.iter().enumerate() {
        assert_eq!(r.with_record(|_| ()), Some(()), "{k} is still open");
    }
    // now all ended: the batch is its slots, kept as they are
    for r in &open {
        assert!(r.mark_finished(usize::MAX, |_| ()).unwrap().is_none());
    }
    let batch = record_slots::take_all_finished()
        .into_iter()
        .find(|b| b.len() == 100)
        .expect("the 100");
    assert!(
        !batch.compact().is_compact(),
        "100 records in their slots: kept there"
    );
}
