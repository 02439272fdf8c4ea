//! What the batch processor shares with its exporter thread, and the
//! thread.

use crate::config::otel::BatchSettings;
use crate::diag;
use crate::sdk::export::queue::{export_batches, Queue};
use crate::sdk::export::SpanCounters;
use crate::sdk::redact::Redactor;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[derive(Default)]
pub(super) struct State {
    pub(super) queue: Queue,
    /// Incremented by each flush request; the worker copies it to
    /// `flushed` once everything queued before the request is exported.
    pub(super) flush_requested: u64,
    pub(super) flushed: u64,
    pub(super) shutdown: bool,
    pub(super) finished: bool,
    /// Spans in the export call running now.
    pub(super) in_flight: usize,
    /// Set when a shutdown gave up waiting: what was queued or in flight
    /// then was counted as dropped.
    pub(super) abandoned: bool,
    pub(super) resource: Option<Resource>,
    /// Empty export batches made by the exporter thread, with room for a
    /// whole batch, for lens's own span path to fill (see `take_spare`).
    pub(super) spares: Vec<Vec<SpanData>>,
    /// Set once a spare was asked for: only then does the thread make them.
    pub(super) spares_wanted: bool,
}

pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    /// Wakes the exporter thread.
    pub(super) work: Condvar,
    /// Wakes flushers and the shutdown waiting for the exporter thread.
    pub(super) done: Condvar,
    pub(super) settings: BatchSettings,
    pub(super) counters: Arc<SpanCounters>,
    /// Redacts the spans and the resource before the exporter sees them.
    pub(super) redactor: Redactor,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits on `done` until `ready` holds, at most until `deadline`.
    pub(super) fn wait_done(
        &self,
        mut st: MutexGuard<'_, State>,
        deadline: Instant,
        ready: impl Fn(&State) -> bool,
    ) -> Result<(), ()> {
        while !ready(&st) {
            let now = Instant::now();
            if now >= deadline {
                return Err(());
            }
            st = self
                .done
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        Ok(())
    }
}

/// The exporter thread: waits for a full batch, the scheduled delay, a flush
/// or shutdown; exports without holding the queue's lock.
pub(super) fn run<E: SpanExporter>(mut exporter: E, shared: &Shared) {
    let settings = shared.settings;
    let mut spare: VecDeque<SpanData> = VecDeque::new();
    let mut last_export = Instant::now();
    loop {
        let mut st = shared.lock();
        loop {
            let due = last_export + settings.scheduled_delay;
            let now = Instant::now();
            if st.shutdown
                || st.flush_requested > st.flushed
                || st.queue.len() >= settings.max_export_batch_size
                || (now >= due && !st.queue.is_empty())
            {
                break;
            }
            let wait = if st.queue.is_empty() {
                // nothing to export: sleep until woken (a long timeout only
                // guards against a lost wake-up)
                settings.scheduled_delay.max(Duration::from_millis(100))
            } else {
                due.saturating_duration_since(now)
            };
            st = shared
                .work
                .wait_timeout(st, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            if st.queue.is_empty() {
                last_export = Instant::now();
            }
        }
        let resource = st.resource.take();
        // the single spans' deque and `spare` trade allocations, as before
        std::mem::swap(&mut st.queue.single, &mut spare);
        let batches = st.queue.take_batches();
        let ticket = st.flush_requested;
        let shutting_down = st.shutdown;
        drop(st);
        // the SDK path's spans; lens's buffers came redacted
        for span in &mut spare {
            shared.redactor.redact_span(span);
        }
        let mut ready = export_batches(&mut spare, batches, settings.max_export_batch_size);
        let mut left: usize = ready.iter().map(Vec::len).sum();

        if let Some(r) = resource {
            shared
                .redactor
                .with_resource(&r, |r| exporter.set_resource(r));
        }
        while let Some(batch) = ready.pop_front() {
            if shared.lock().abandoned {
                // a shutdown gave up on these (and counted them): free them
                // rather than export spans reported lost
                ready.clear();
                break;
            }
            let n = batch.len();
            shared.lock().in_flight = left;
            left -= n;
            // the result is counted by the `Counting` wrapper; a panicking
            // exporter loses its batch (counted) but not the thread
            let export =
                std::panic::AssertUnwindSafe(|| futures_executor::block_on(exporter.export(batch)));
            if std::panic::catch_unwind(export).is_err() {
                shared
                    .counters
                    .failed
                    .fetch_add(n as u64, Ordering::Relaxed);
                diag::warn(format_args!(
                    "the span exporter panicked; {n} spans were lost"
                ));
            }
        }
        shared.lock().in_flight = 0;
        last_export = Instant::now();
        make_spares(shared);

        let mut st = shared.lock();
        st.flushed = st.flushed.max(ticket);
        if shutting_down {
            // spans that raced the shutdown flag are dropped and counted
            let late = if st.abandoned {
                0
            } else {
                st.queue.len() as u64
            };
            st.queue = Queue::default();
            st.spares = Vec::new();
            drop(st);
            shared.counters.dropped.fetch_add(late, Ordering::Relaxed);
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| exporter.shutdown()));
            drop(exporter);
            let mut st = shared.lock();
            st.finished = true;
            shared.done.notify_all();
            return;
        }
        // keep at most one batch of spare capacity: memory follows use
        if spare.capacity() > settings.max_export_batch_size * 2 {
            spare = VecDeque::new();
        }
        shared.done.notify_all();
    }
}

/// Spare batches kept ready for lens's span collector, at most.
pub(super) const SPARES: usize = 2;

/// Tops up the spare batches, if they are used, on this thread: right
/// after an export freed a batch of the same size, which the allocator
/// hands back.
fn make_spares(shared: &Shared) {
    let missing = {
        let st = shared.lock();
        match st.spares_wanted && !st.shutdown {
            true => SPARES.saturating_sub(st.spares.len()),
            false => 0,
        }
    };
    if missing > 0 {
        let max = shared.settings.max_export_batch_size;
        let fresh = (0..missing).map(|_| Vec::with_capacity(max));
        shared.lock().spares.extend(fresh);
    }
}
