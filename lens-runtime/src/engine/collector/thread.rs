//! The collector thread (`lens-span-collect`): its start, its loop of
//! naps and looks, and the wake-up an ending thread may give it.

use super::queue::{drain, lock, locks, sink, submit_waiting, HandOverLocks};
use super::queue::{COLLECTOR_PID, HAND_OVER_AT, INTERVAL_MS};
use crate::engine::clock;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Starts the collector thread if this process has none.
pub(super) fn start_collector() {
    let pid = std::process::id();
    if COLLECTOR_PID.swap(pid, Ordering::AcqRel) == pid {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("lens-span-collect".into())
        .spawn(move || collector(pid));
    if let Err(e) = spawned {
        COLLECTOR_PID.store(0, Ordering::Release);
        crate::diag::warn(format_args!(
            "cannot start the span collector thread ({e}); spans are handed over every {HAND_OVER_AT} per thread and at flush"
        ));
    }
}

/// The collector's shortest nap between two looks.
const NAP_MIN: Duration = Duration::from_micros(100);

/// Batches' time the collector naps for between looks (see `WAKE_AT`).
const NAP_BATCHES: u32 = 4;

/// The collector thread: takes handed-over batches, and drains every list
/// once per interval (also under load, so a thread that records a few
/// spans and sleeps still has them exported); exits once no sink is set
/// (the pipeline shut down), so no thread outlives it. Between looks it
/// naps for the time [`NAP_BATCHES`] batches take to come, as measured so
/// far, and at most until the next drain.
fn collector(pid: u32) {
    clock::anchor();
    let mut anchored = Instant::now();
    let mut drained = Instant::now();
    let mut looked = Instant::now();
    // the time between two handed-over batches, smoothed
    let mut per_batch = NAP_MIN;
    loop {
        if anchored.elapsed() >= clock::REANCHOR {
            clock::anchor();
            anchored = Instant::now();
        }
        let interval = Duration::from_millis(INTERVAL_MS.load(Ordering::Relaxed));
        let sh = locks();
        let left = interval.saturating_sub(drained.elapsed());
        nap(sh, (per_batch * NAP_BATCHES).max(NAP_MIN).min(left));
        if sink().is_none() {
            let _ = COLLECTOR_PID.compare_exchange(pid, 0, Ordering::AcqRel, Ordering::Acquire);
            // a set-up that came in meanwhile found this thread still
            // running: keep serving it
            if sink().is_none()
                || COLLECTOR_PID
                    .compare_exchange(0, pid, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
            {
                return;
            }
        }
        let batches = match drained.elapsed() >= interval {
            true => {
                drained = Instant::now();
                drain(None)
            }
            false => {
                let _submitting = lock(&sh.submitting);
                submit_waiting(sh)
            }
        };
        let since = std::mem::replace(&mut looked, Instant::now()).elapsed();
        per_batch = match u32::try_from(batches) {
            Ok(n) if n > 0 => (per_batch + since / n) / 2,
            _ => per_batch.max(since),
        };
    }
}

/// Naps for at most `wait`, or until woken (half the queue waiting, or the
/// pipeline shut down).
fn nap(sh: &HandOverLocks, wait: Duration) {
    let woken = sh.wake.lock().unwrap_or_else(|e| e.into_inner());
    let (mut woken, _) = sh
        .wake_cv
        .wait_timeout_while(woken, wait, |w| !*w)
        .unwrap_or_else(|e| e.into_inner());
    *woken = false;
}

#[cold]
#[inline(never)]
pub(super) fn wake_collector() {
    // never waits: if the collector holds the lock it is about to look
    let sh = locks();
    if let Ok(mut woken) = sh.wake.try_lock() {
        *woken = true;
        sh.wake_cv.notify_one();
    }
}
