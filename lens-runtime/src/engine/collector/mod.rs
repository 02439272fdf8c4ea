//! Finished spans of lens's span path, from the threads' lists to the
//! sink, through one collector thread.
//!
//! A span that ends joins its thread's finished records (marked finished
//! where it lies, in the thread's open-span list, under the lock its end
//! takes anyway). When a list holds [`HAND_OVER_AT`] of them the ending
//! thread hands the batch over (the slots they lie in), onto a small
//! queue, and goes on; the collector thread takes the queue on its next
//! look, reads the records out of their slots and hands them to the sink
//! (lens's batch span processor), whose
//! exporter thread builds the SDK's `SpanData` just before each export
//! ([`to_span_data`](crate::engine::to_span_data)). The collector naps between looks for about
//! as long as a few batches take to come, so ending threads do not wake it
//! (only a queue half full does). When that queue is full (the collector
//! is behind) the ending thread hands the oldest batch to the sink itself
//! and queues its own, so memory stays bounded, nothing waits, and batches
//! reach the sink in the order they were handed over. The collector also
//! drains every list on an interval, so a thread that records a few spans
//! and sleeps still exports them within the batch delay. The sink never
//! blocks: a full export queue drops the excess and counts it.

mod queue;
#[cfg(test)]
mod tests;
mod thread;

use crate::engine::record::FinishedBatch;
pub(crate) use crate::engine::record::SpanSink;
pub(crate) use queue::drain;
pub(crate) use queue::HAND_OVER_AT;
use queue::{fresh_locks, lock, locks, submit, try_lock, HandOverLocks};
use queue::{COLLECTOR_PID, DROPPED_IN_CHILD, IN_CHILD};
use queue::{INTERVAL_MS, MAX_WAITING, SINK};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use thread::{start_collector, wake_collector};

/// Sets the sink finished spans go to and the collector's interval;
/// starts the collector thread if this process has none.
pub(crate) fn set_sink(sink: Arc<dyn SpanSink>, interval: Duration) {
    if IN_CHILD.swap(false, Ordering::AcqRel) {
        DROPPED_IN_CHILD.store(0, Ordering::Relaxed);
        fresh_locks();
    }
    // spans that ended under the pipeline being replaced (a re-init) are
    // its own, as on the SDK path: they go to its sink first (and a record
    // of the old pipeline that reaches the new sink later is sent back to
    // its own by the new sink, before it queues it: `to_span_data::sort_out`)
    let sh = locks();
    let submitting = lock(&sh.submitting);
    if queue::sink().is_some() {
        queue::drain_into(sh, None);
    }
    let ms = interval.as_millis().clamp(1, 1000) as u64;
    INTERVAL_MS.store(ms, Ordering::Relaxed);
    SINK.store(Box::into_raw(Box::new(sink)), Ordering::Release);
    drop(submitting);
    start_collector();
}

/// Forgets `sink` if it is still the one in use.
pub(crate) fn release_sink(sink: &Arc<dyn SpanSink>) {
    // the sink is read under the lock it changes under (`set_sink`)
    let submitting = lock(&locks().submitting);
    let current = SINK.load(Ordering::Acquire);
    // SAFETY: as in `sink()`.
    match unsafe { current.as_ref() } {
        Some(c) if Arc::ptr_eq(c, sink) => {
            let (null, ord) = (std::ptr::null_mut(), Ordering::AcqRel);
            let _ = SINK.compare_exchange(current, null, ord, Ordering::Acquire);
        }
        _ => return,
    }
    drop(submitting);
    wake_collector();
}

/// Spans that ended in this forked child since the fork (parent spans
/// still open at the fork), never exported.
pub(crate) fn dropped_in_child() -> u64 {
    DROPPED_IN_CHILD.load(Ordering::Relaxed)
}

/// A sampled span of the parent process ended in this forked child.
pub(crate) fn count_dropped_in_child() {
    DROPPED_IN_CHILD.fetch_add(1, Ordering::Relaxed);
}

/// In a forked child (fork handler: atomic stores only). The parent's
/// lists are forgotten by the open-span registry; batches waiting for the
/// parent's collector are never taken (a set-up in the child starts with
/// fresh locks and an empty queue).
pub(crate) fn reset_after_fork() {
    DROPPED_IN_CHILD.store(0, Ordering::Relaxed);
    IN_CHILD.store(true, Ordering::Relaxed);
    SINK.store(std::ptr::null_mut(), Ordering::Release);
}

/// Batches waiting when an ending thread wakes the collector: half the
/// queue. The collector naps for about four batches' time, so
/// an ending thread makes no wake-up call (a `futex` call and, on a VM, an
/// interrupt to another CPU, microseconds each) unless batches suddenly
/// come twice as fast.
const WAKE_AT: usize = MAX_WAITING / 2;

/// A full batch from an ending thread: queued for the collector. If the
/// collector is behind, the caller hands the oldest batch queued to the
/// sink and queues its own; with no collector thread, it submits its own.
#[inline(never)]
pub(crate) fn hand_over(batch: FinishedBatch) {
    if IN_CHILD.load(Ordering::Relaxed) {
        return;
    }
    if COLLECTOR_PID.load(Ordering::Relaxed) == 0 {
        return submit(vec![batch]);
    }
    locks().queue(batch, &submit, wake_collector);
}

impl<B> HandOverLocks<B> {
    /// [`hand_over`] with a collector thread running: queues `batch`, or,
    /// with the queue full, hands the oldest batch (or `batch`) to
    /// `submit` itself; `wake` wakes the collector.
    #[inline]
    fn queue(&self, batch: B, submit: &impl Fn(Vec<B>), wake: impl Fn()) {
        let mut waiting = lock(&self.waiting);
        if waiting.len() < MAX_WAITING {
            // the collector looks again by itself before the queue fills:
            // only batches coming faster than it measured wake it (each
            // hand-over from half full on, in case a wake-up was missed)
            let wake_now = waiting.len() + 1 >= WAKE_AT;
            waiting.push(batch);
            drop(waiting);
            if wake_now {
                wake();
            }
            return;
        }
        // The collector is behind. Batches reach the sink in the order they
        // were handed over, so that each thread's spans keep their order.
        match try_lock(&self.submitting) {
            Some(_submitting) => {
                // nobody is submitting: this thread does one batch of the
                // collector's work, the oldest, and queues its own
                let oldest = waiting.remove(0);
                waiting.push(batch);
                drop(waiting);
                submit(vec![oldest]);
            }
            None if waiting.len() < MAX_OVER => {
                // the collector (woken) or a drain takes the queue until it
                // is empty
                waiting.push(batch);
                drop(waiting);
                wake();
            }
            None => {
                // far behind and busy: handed over here, ahead of this
                // thread's batches still queued (their order is lost; nothing
                // waits)
                drop(waiting);
                submit(vec![batch]);
            }
        }
    }
}

/// Batches queued at most while another thread submits: past
/// [`MAX_WAITING`], an ending thread queues its batch (rather than hand
/// it to the sink itself) only when it cannot do the collector's work. 128 batches
/// are ~10 MiB of records; past that, order is given up, not memory.
const MAX_OVER: usize = 8 * MAX_WAITING;
