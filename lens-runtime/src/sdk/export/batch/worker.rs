//! What the batch processor shares with its exporter thread, and the
//! thread.

use crate::config::otel::BatchSettings;
use crate::diag;
use crate::engine::record::FinishedBatch;
use crate::engine::to_span_data;
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
}

/// What the batch processor's handles and its exporter thread share:
/// the queue and its state, the conditions they wait on, the settings,
/// the counters and the redactor.
pub(super) struct ProcessorCore {
    pub(super) state: Mutex<State>,
    /// Wakes the exporter thread.
    pub(super) work: Condvar,
    /// Wakes flushers and the shutdown waiting for the exporter thread.
    pub(super) done: Condvar,
    pub(super) settings: BatchSettings,
    pub(super) counters: Arc<SpanCounters>,
    /// Redacts the spans and the resource before the exporter sees them.
    pub(super) redactor: Redactor,
    /// The fork epoch it was built in ([`crate::sdk::fork::epoch`]).
    pub(super) epoch: u64,
}

impl ProcessorCore {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts `lost` spans as failed after `what` panicked, and says so.
    fn panicked(&self, what: &str, lost: usize) {
        self.counters
            .failed
            .fetch_add(lost as u64, Ordering::Relaxed);
        diag::warn(format_args!("{what} panicked; {lost} spans were lost"));
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
pub(super) fn run<E: SpanExporter>(mut exporter: E, shared: &ProcessorCore) {
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
        let records = st.queue.take_records();
        // what this round takes out of the queue is in flight until
        // exported (a shutdown that gives up counts it as lost)
        let taken = spare.len() + records.iter().map(FinishedBatch::len).sum::<usize>();
        st.in_flight = taken;
        let ticket = st.flush_requested;
        let shutting_down = st.shutdown;
        drop(st);
        // the SDK path's spans (lens's are redacted as they are built)
        for span in &mut spare {
            shared.redactor.redact_span(span);
        }
        let mut ready = export_batches(&mut spare, settings.max_export_batch_size);
        // spans of this round not exported yet
        let left = std::cell::Cell::new(taken);

        if let Some(r) = resource {
            shared
                .redactor
                .with_resource(&r, |r| exporter.set_resource(r));
        }
        // false once a shutdown gave up on what is left
        let mut export = |batch: Vec<SpanData>| -> bool {
            let n = batch.len();
            {
                let mut st = shared.lock();
                if st.abandoned {
                    // a shutdown gave up on these (and counted them): free
                    // them rather than export spans reported lost
                    return false;
                }
                st.in_flight = left.get();
            }
            left.set(left.get().saturating_sub(n));
            // the result is counted by the `Counting` wrapper; a panicking
            // exporter loses its batch (counted) but not the thread
            let export =
                std::panic::AssertUnwindSafe(|| futures_executor::block_on(exporter.export(batch)));
            if std::panic::catch_unwind(export).is_err() {
                shared.panicked("the span exporter", n);
            }
            // exported (or failed, counted): no longer in flight
            let mut st = shared.lock();
            if !st.abandoned {
                st.in_flight = left.get();
            }
            true
        };
        let mut go_on = true;
        while let Some(batch) = ready.pop_front() {
            go_on = export(batch);
            if !go_on {
                ready.clear();
                break;
            }
        }
        if go_on && !records.is_empty() {
            // lens's records, built one export batch at a time just before
            // its export (the records left are dropped once a shutdown gave
            // up on them)
            let redact = |span: &mut SpanData| {
                shared.redactor.redact_span(span);
            };
            let builder = to_span_data::Builder::new(settings.max_export_batch_size, &redact);
            let build = std::panic::AssertUnwindSafe(|| builder.build(records, &mut export));
            match std::panic::catch_unwind(build) {
                // counted as ended when queued: not spans after all
                Ok(unsampled) => {
                    shared
                        .counters
                        .ended
                        .fetch_sub(unsampled, Ordering::Relaxed);
                }
                // a panic loses the spans of the round not exported: counted
                // (unless a shutdown gave up on them: counted lost then)
                Err(_) if shared.lock().abandoned => {}
                Err(_) => shared.panicked("building lens's spans for export", left.replace(0)),
            }
        }
        shared.lock().in_flight = 0;
        last_export = Instant::now();

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
