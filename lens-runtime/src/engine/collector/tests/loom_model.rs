//! Model tests of the hand-over (`--cfg lens_loom`, CONTRIBUTING.md):
//! `loom` runs the real protocol, [`HandOverLocks`]'s queueing half of
//! `hand_over`, `submit_waiting` and `drain_into`, on `loom`'s locks, in
//! every interleaving of the threads.
//!
//! Batches are lists of span numbers, and the sink a list of what it was
//! given. The thread's open-span list is modeled by a lock around a list,
//! and the count of batches in flight by an atomic with the orderings of
//! `open::record_slots::InFlight` (a copy: the real ones are process-wide
//! statics); the lists' lock itself has model tests of its own
//! (`open/lock.rs`).

use super::super::queue::{lock, HandOverLocks, MAX_WAITING};
use loom::sync::atomic::{AtomicU64, AtomicUsize};
use loom::sync::{Arc, Mutex};
use loom::thread;
use std::sync::atomic::Ordering;

/// What the sink was given, in order.
type Sunk = Arc<Mutex<Vec<u64>>>;

fn submitter(sunk: &Sunk) -> impl Fn(Vec<Vec<u64>>) {
    let sunk = Arc::clone(sunk);
    move |batches| sunk.lock().unwrap().extend(batches.into_iter().flatten())
}

/// The collector's look (or a flush's drain) with no lists: takes the
/// queue under `submitting`.
fn drain_queue(sh: &HandOverLocks<Vec<u64>>, sunk: &Sunk) {
    let _submitting = lock(&sh.submitting);
    sh.drain_into(Vec::new, None::<fn()>, &submitter(sunk));
}

/// An ending thread hands two batches over onto a queue one short of
/// full (so the second finds it full and, unless the collector is
/// submitting, hands the oldest batch to the sink itself) while the
/// collector takes the queue; after the last drain every batch reached
/// the sink exactly once, in the order they were handed over.
#[test]
fn loom_hand_over_delivers_each_batch_once_in_order() {
    loom::model(|| {
        let sh = Arc::new(HandOverLocks::<Vec<u64>>::new());
        let sunk: Sunk = Arc::default();
        let queued = (0..MAX_WAITING as u64 - 1).map(|i| vec![i]);
        lock(&sh.waiting).extend(queued);
        let ending = {
            let (sh, submit) = (Arc::clone(&sh), submitter(&sunk));
            thread::spawn(move || {
                sh.queue(vec![100], &submit, || {});
                sh.queue(vec![101], &submit, || {});
            })
        };
        let collector = {
            let (sh, submit) = (Arc::clone(&sh), submitter(&sunk));
            thread::spawn(move || {
                let _submitting = lock(&sh.submitting);
                sh.submit_waiting(&submit);
            })
        };
        ending.join().unwrap();
        collector.join().unwrap();
        drain_queue(&sh, &sunk);
        let want: Vec<u64> = (0..MAX_WAITING as u64 - 1).chain([100, 101]).collect();
        assert_eq!(*sunk.lock().unwrap(), want);
    });
}

/// A shutdown's last drain, beside a thread ending spans (a batch every
/// two): every span that had ended when the drain began is in the sink
/// when it returns, also one in a batch its thread had taken out of its
/// list and not yet handed over; and once the thread is done and a last
/// drain ran, every span reached the sink exactly once.
#[test]
fn loom_shutdown_drain_loses_no_span() {
    loom::model(|| {
        let sh = Arc::new(HandOverLocks::<Vec<u64>>::new());
        let sunk: Sunk = Arc::default();
        let list = Arc::new(Mutex::new(Vec::<u64>::new()));
        let in_flight = Arc::new(AtomicUsize::new(0));
        // the last span the thread has ended
        let ended = Arc::new(AtomicU64::new(0));
        let ending = {
            let (sh, submit) = (Arc::clone(&sh), submitter(&sunk));
            let (list, in_flight, ended) = (list.clone(), in_flight.clone(), ended.clone());
            thread::spawn(move || {
                for span in 1..=3 {
                    let batch = {
                        let mut list = list.lock().unwrap();
                        list.push(span);
                        (list.len() >= 2).then(|| {
                            in_flight.fetch_add(1, Ordering::Relaxed);
                            std::mem::take(&mut *list)
                        })
                    };
                    ended.store(span, Ordering::Release);
                    if let Some(batch) = batch {
                        sh.queue(batch, &submit, || {});
                        in_flight.fetch_sub(1, Ordering::Release);
                    }
                }
            })
        };
        let ended_before = ended.load(Ordering::Acquire);
        {
            let _submitting = lock(&sh.submitting);
            let take_lists = || {
                let batch = std::mem::take(&mut *list.lock().unwrap());
                (!batch.is_empty()).then_some(batch).into_iter().collect()
            };
            let wait_in_flight = || {
                while in_flight.load(Ordering::Acquire) > 0 {
                    thread::yield_now();
                }
            };
            sh.drain_into(take_lists, Some(wait_in_flight), &submitter(&sunk));
        }
        {
            let got = sunk.lock().unwrap();
            let missing: Vec<u64> = (1..=ended_before).filter(|s| !got.contains(s)).collect();
            assert!(
                missing.is_empty(),
                "ended before the drain, not in the sink: {missing:?}"
            );
        }
        ending.join().unwrap();
        let _submitting = lock(&sh.submitting);
        let rest = std::mem::take(&mut *list.lock().unwrap());
        sh.drain_into(|| vec![rest], None::<fn()>, &submitter(&sunk));
        // each span once; not always in order: a batch that its thread
        // took out of its list after the drain took the list's older
        // records, and handed over while the drain waited for batches in
        // flight, reaches the sink ahead of them (`drain_into` says so)
        let mut got = sunk.lock().unwrap().clone();
        got.sort_unstable();
        assert_eq!(got, [1, 2, 3]);
    });
}
