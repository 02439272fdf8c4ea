//! The queue of batches ending threads hand over, how batches reach the
//! sink, and the drain of every list.

use crate::engine::fork_fresh::ForkFresh;
use crate::engine::open::record_slots as records;
use crate::engine::record::FinishedBatch;
use crate::engine::record::SpanSink;
use crate::engine::sync::{Mutex, MutexGuard};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, TryLockError};
use std::time::{Duration, Instant};

/// Finished spans a thread's list holds at most before the thread hands
/// them over.
pub(crate) const HAND_OVER_AT: usize = 512;

/// Batches handed over at most, waiting for the collector.
pub(super) const MAX_WAITING: usize = 16;

/// Set in a child forked while lens's path was on, until it sets up again.
pub(super) static IN_CHILD: AtomicBool = AtomicBool::new(false);
/// Sampled spans that ended in such a child (never exported).
pub(super) static DROPPED_IN_CHILD: AtomicU64 = AtomicU64::new(0);
/// The sink in use: null, or a leaked box never freed.
pub(super) static SINK: AtomicPtr<Arc<dyn SpanSink>> = AtomicPtr::new(std::ptr::null_mut());
pub(super) static INTERVAL_MS: AtomicU64 = AtomicU64::new(100);
/// The process whose collector thread runs (0: none yet).
pub(super) static COLLECTOR_PID: AtomicU32 = AtomicU32::new(0);

/// The locks between ending threads, the collector and drains. A child
/// forked while a parent thread held one gets fresh ones when it sets up
/// again.
///
/// The protocol is written as methods of an instance ([`drain_into`](Self::drain_into),
/// [`submit_waiting`](Self::submit_waiting), and the queueing half of
/// `hand_over`), over any batch type and with the sink, the lists and the
/// wait for batches in flight passed in, so that the model tests
/// (`--cfg lens_loom`) run the same code on instances of their own; the process
/// uses one instance, [`locks`], with [`FinishedBatch`]es and the real
/// sink and lists.
pub(super) struct HandOverLocks<B = FinishedBatch> {
    /// Batches handed over by ending threads.
    pub(super) waiting: Mutex<Vec<B>>,
    /// Held while batches are handed to the sink: a drain that holds it
    /// knows no batch is half-way there, and the sink changes only under
    /// it.
    pub(super) submitting: Mutex<()>,
    /// Wakes the collector from its nap (the waiting queue half full, or
    /// its pipeline shut down). `std`'s also under `loom`: the nap is a
    /// matter of timing, not of what reaches the sink, and is not modeled.
    pub(super) wake: std::sync::Mutex<bool>,
    pub(super) wake_cv: Condvar,
}

/// [`HandOverLocks::new`]'s value (`const` with `std`'s locks, not with
/// `loom`'s).
macro_rules! fresh_hand_over_locks {
    () => {
        HandOverLocks {
            waiting: Mutex::new(Vec::new()),
            submitting: Mutex::new(()),
            wake: std::sync::Mutex::new(false),
            wake_cv: Condvar::new(),
        }
    };
}

impl<B> HandOverLocks<B> {
    #[cfg(not(all(test, lens_loom)))]
    pub(super) const fn new() -> Self {
        fresh_hand_over_locks!()
    }

    #[cfg(all(test, lens_loom))]
    pub(super) fn new() -> Self {
        fresh_hand_over_locks!()
    }
}

/// The locks in use: those a process starts with, else fresh ones a
/// set-up in a forked child made.
#[cfg(not(all(test, lens_loom)))]
static HAND_OVER_LOCKS: ForkFresh<HandOverLocks> = ForkFresh::new(HandOverLocks::new());
/// Under `loom` (whose locks have no `const` constructor) made on first
/// use, which no model test makes: they use instances of their own.
#[cfg(all(test, lens_loom))]
static HAND_OVER_LOCKS: std::sync::LazyLock<ForkFresh<HandOverLocks>> =
    std::sync::LazyLock::new(|| ForkFresh::new(<HandOverLocks>::new()));

pub(super) fn locks() -> &'static HandOverLocks {
    ForkFresh::get(&HAND_OVER_LOCKS)
}

/// Puts fresh locks in use (a set-up in a forked child).
pub(super) fn fresh_locks() {
    ForkFresh::replace(&HAND_OVER_LOCKS, <HandOverLocks>::new());
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn sink() -> Option<&'static Arc<dyn SpanSink>> {
    // SAFETY: null or a leaked `Box<Arc<dyn SpanSink>>`, never freed.
    unsafe { SINK.load(Ordering::Acquire).as_ref() }
}

/// Hands the batches to the sink in use, which builds them where it
/// exports them.
pub(super) fn submit(batches: Vec<FinishedBatch>) {
    if let Some(s) = sink() {
        submit_to(&**s, batches);
    }
}

// never inlined: scripts/callgrind.sh leaves what it does (natively, on
// the collector thread) out of the calling thread's count by its name.
// The records stay in the slots they ended in (the sink builds them
// there), unless the slots take much more room than the records.
#[inline(never)]
pub(super) fn submit_to(s: &dyn SpanSink, batches: Vec<FinishedBatch>) {
    let batches: Vec<FinishedBatch> = batches
        .into_iter()
        .filter(|b| !b.is_empty())
        .map(FinishedBatch::compact)
        .collect();
    if !batches.is_empty() {
        s.submit(batches);
    }
}

/// `m` locked, if nobody holds it (never waits).
pub(super) fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// Hands every thread's finished spans, and the batches waiting, to the
/// sink; returns once they are all there, with the number of batches.
/// With `until`, the batches ending threads had taken out of their lists
/// and not yet handed over when it looked are waited for, until then at
/// most (the last drains of a flush and a shutdown: every span that ended
/// before it began reaches the sink).
pub(crate) fn drain(until: Option<Instant>) -> usize {
    if IN_CHILD.load(Ordering::Relaxed) || sink().is_none() {
        return 0;
    }
    let sh = locks();
    let _submitting = lock(&sh.submitting);
    drain_into(sh, until)
}

/// [`drain`], for a caller that holds `submitting`.
pub(super) fn drain_into(sh: &HandOverLocks, until: Option<Instant>) -> usize {
    let in_flight = until.map(|until| move || wait_in_flight(until));
    sh.drain_into(records::take_all_finished, in_flight, &submit)
}

/// [`HandOverLocks::submit_waiting`] into the sink in use.
pub(super) fn submit_waiting(sh: &HandOverLocks) -> usize {
    sh.submit_waiting(&submit)
}

impl<B> HandOverLocks<B> {
    /// [`drain`], for a caller that holds `submitting`: the batches
    /// waiting and those `take_lists` takes out of every list go to
    /// `submit`. With `wait_in_flight` (the last drains), the batches
    /// that ending threads had taken out of their lists when it looked are
    /// waited for, and taken from the queue once handed over.
    pub(super) fn drain_into(
        &self,
        take_lists: impl FnOnce() -> Vec<B>,
        wait_in_flight: Option<impl FnOnce()>,
        submit: &impl Fn(Vec<B>),
    ) -> usize {
        let waiting = self.submit_waiting(submit);
        // the batches handed over last and every list's finished records,
        // taken together: a batch handed over in between would reach the sink
        // after newer spans of its thread
        let (mut last, done) = {
            let mut waiting = lock(&self.waiting);
            (std::mem::take(&mut *waiting), take_lists())
        };
        // a batch taken out of its list before `take_all_finished` looked, and not yet
        // queued then, is in neither: once its thread has handed it over it
        // is queued (or was given to the sink by that thread). Those go ahead
        // of the lists' records, which ended after them (a batch handed over
        // while this waited goes with them: its order against its thread's
        // records set aside may be lost; it is not lost). The queue is taken
        // again also when the wait found none in flight: a thread may have
        // handed its batch over between the first take and the wait's
        // first look (the model test `loom_shutdown_drain_loses_no_span`
        // found it, and such a batch stayed queued after a shutdown)
        if let Some(wait_in_flight) = wait_in_flight {
            wait_in_flight();
            last.append(&mut lock(&self.waiting));
        }
        let n = waiting + last.len() + done.len();
        submit(last);
        submit(done);
        n
    }

    /// Submits the batches handed over (the caller holds `submitting`);
    /// returns how many there were.
    pub(super) fn submit_waiting(&self, submit: &impl Fn(Vec<B>)) -> usize {
        let mut n = 0;
        loop {
            let batches = std::mem::take(&mut *lock(&self.waiting));
            if batches.is_empty() {
                return n;
            }
            n += batches.len();
            submit(batches);
        }
    }
}

/// Waits until no ending thread holds a batch taken out of its list and
/// not yet handed over, or until `until`.
/// Such a thread holds no lock this waits on, and hands its batch over
/// without waiting for `submitting` (it never blocks on a drain); the
/// window is a few instructions, unless its thread is preempted.
#[cold]
fn wait_in_flight(until: Instant) {
    let mut looks = 0u32;
    while records::in_flight() > 0 {
        looks += 1;
        if Instant::now() >= until {
            crate::diag::warn(format_args!(
                "a thread still held a batch of finished spans at the deadline; they may not be exported"
            ));
            return;
        }
        match looks < 64 {
            true => std::thread::yield_now(),
            false => std::thread::sleep(Duration::from_micros(50)),
        }
    }
}
