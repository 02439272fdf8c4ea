//! Lens's batch span processor, and the point where spans are redacted.
//!
//! The SDK's `BatchSpanProcessor` reserves its whole queue up front (a
//! `sync_channel` of `OTEL_BSP_MAX_QUEUE_SIZE` slots, about 23 MB at lens's
//! default of 65,536) and keeps it for as long as anything references the
//! provider, which lens's lock-free tracer slot does for the life of the
//! process. This processor keeps the same contract (bounded queue, batches of
//! at most `max_export_batch_size`, a scheduled delay, one exporter thread)
//! with memory that grows with use and is released at shutdown, a counted
//! drop when the queue is full, deadlines on flush and shutdown, and inert
//! behaviour in a forked child (whose exporter thread does not exist).
//!
//! It is also where spans are redacted ([`Redactor::redact_span`]), every
//! span once before any exporter sees it, on the exporter thread, just
//! before export (as an exporter wrapper would). Lens's own span path hands
//! over batches of finished records ([`on_end_records`](BatchProcessor::on_end_records)),
//! which the exporter thread builds into spans one export batch at a time
//! and redacts as it builds them, while each span is in its cache.

mod worker;

use super::SpanCounters;
pub(crate) use crate::config::otel::BatchSettings;
use crate::diag;
use crate::engine::record::FinishedBatch;
use crate::sdk::redact::Redactor;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter, SpanProcessor};
use opentelemetry_sdk::Resource;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use worker::{run, ProcessorCore, State};

/// A batch span processor whose exporter runs on a thread of its own.
/// Clones are handles to the same queue and thread.
#[derive(Clone)]
pub(crate) struct BatchProcessor {
    shared: Arc<ProcessorCore>,
}

impl fmt::Debug for BatchProcessor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchProcessor")
            .field("settings", &self.shared.settings)
            .finish()
    }
}

impl BatchProcessor {
    /// Starts the exporter thread, exporting spans redacted by `redactor`.
    /// If it cannot start, every span is dropped (and counted) rather than
    /// failing the job.
    pub(crate) fn new<E: SpanExporter + 'static>(
        exporter: E,
        settings: BatchSettings,
        counters: Arc<SpanCounters>,
        redactor: Redactor,
    ) -> Self {
        let shared = Arc::new(ProcessorCore {
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            done: Condvar::new(),
            settings,
            counters,
            redactor,
            epoch: crate::sdk::fork::epoch(),
        });
        let worker = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("lens-span-export".into())
            .spawn(move || run(exporter, &worker));
        if let Err(e) = spawned {
            diag::warn(format_args!(
                "cannot start the span export thread ({e}); spans will be dropped"
            ));
            let mut st = shared.lock();
            st.shutdown = true;
            st.finished = true;
        }
        BatchProcessor { shared }
    }

    /// Whether this processor was built by an ancestor of this process (a
    /// forked child, which may have set lens up again since): its exporter
    /// thread is not here, and its lock may have been held at the fork.
    #[inline]
    fn foreign(&self) -> bool {
        self.shared.epoch != crate::sdk::fork::epoch()
    }

    /// Waits until everything queued now is exported, at most `timeout`.
    pub(crate) fn flush_within(&self, timeout: Duration) -> OTelSdkResult {
        if self.foreign() {
            return Ok(());
        }
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        if st.finished {
            return Ok(());
        }
        st.flush_requested += 1;
        let ticket = st.flush_requested;
        let counters = &self.shared.counters;
        let lost =
            || counters.failed.load(Ordering::Relaxed) + counters.dropped.load(Ordering::Relaxed);
        let lost_before = lost();
        self.shared.work.notify_one();
        self.shared
            .wait_done(st, deadline, |st| st.flushed >= ticket || st.finished)
            .map_err(|()| OTelSdkError::Timeout(timeout))?;
        // the flush is over, but what it exported may have been refused
        match lost() - lost_before {
            0 => Ok(()),
            n => Err(OTelSdkError::InternalFailure(format!(
                "{n} spans were lost during the flush (the exporter failed or the queue was full)"
            ))),
        }
    }
}

impl BatchProcessor {
    /// Queues batches of lens's finished records under one lock (lens's
    /// own span path), as far as the queue has room, counted as ended; the
    /// sampled records of the rest are dropped and counted (as ended and
    /// dropped). Never blocks. The exporter thread builds and redacts them
    /// before export (and takes back the count of those it finds are not
    /// this pipeline's: unsampled, or another pipeline's).
    pub(crate) fn on_end_records(&self, batches: Vec<FinishedBatch>) {
        let counters = &self.shared.counters;
        let lost = |b: &FinishedBatch| {
            let n = b.sampled();
            counters.ended.fetch_add(n, Ordering::Relaxed);
            counters.dropped.fetch_add(n, Ordering::Relaxed);
        };
        if self.foreign() {
            batches.iter().for_each(&lost);
            return;
        }
        let settings = &self.shared.settings;
        let mut st = self.shared.lock();
        let before = st.queue.len();
        let mut room = match st.shutdown {
            true => 0,
            false => settings.max_queue_size.saturating_sub(before),
        };
        let mut late = Vec::new();
        for mut batch in batches {
            if batch.len() > room {
                late.push(batch.split_off(room));
            }
            room -= batch.len();
            if !batch.is_empty() {
                counters
                    .ended
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                st.queue.push_records(batch);
            }
        }
        let wake = before < settings.max_export_batch_size
            && st.queue.len() >= settings.max_export_batch_size;
        drop(st);
        late.iter().for_each(lost);
        drop(late);
        if wake {
            self.shared.work.notify_one();
        }
    }
}

impl SpanProcessor for BatchProcessor {
    fn on_start(&self, _span: &mut opentelemetry_sdk::trace::Span, _cx: &opentelemetry::Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        let counters = &self.shared.counters;
        // In a forked child the exporter thread does not exist, and the
        // queue's lock may have been held by a parent thread at fork time.
        if self.foreign() {
            counters.dropped.fetch_add(1, Ordering::Relaxed);
            crate::sdk::fork::note_dropped();
            return;
        }
        let settings = &self.shared.settings;
        let mut st = self.shared.lock();
        if st.shutdown || st.queue.len() >= settings.max_queue_size {
            drop(st);
            counters.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        st.queue.push_back(span);
        let full_batch = st.queue.len() == settings.max_export_batch_size;
        drop(st);
        if full_batch {
            self.shared.work.notify_one();
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.flush_within(self.shared.settings.flush_timeout)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        if self.foreign() {
            return Ok(());
        }
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        if st.abandoned {
            return Err(OTelSdkError::Timeout(timeout));
        }
        st.shutdown = true;
        self.shared.work.notify_one();
        let r = self.shared.wait_done(st, deadline, |st| st.finished);
        if r.is_err() {
            // what is still queued or in flight will not make it in time:
            // count it now, so the shutdown report is complete
            let mut st = self.shared.lock();
            if !st.finished && !st.abandoned {
                st.abandoned = true;
                let lost = (st.queue.len() + st.in_flight) as u64;
                self.shared
                    .counters
                    .dropped
                    .fetch_add(lost, Ordering::Relaxed);
            }
        }
        r.map_err(|()| OTelSdkError::Timeout(timeout))
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.shared.lock().resource = Some(resource.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{Tracer as _, TracerProvider as _};
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};

    fn settings(queue: usize, batch: usize) -> BatchSettings {
        BatchSettings {
            max_queue_size: queue,
            max_export_batch_size: batch,
            scheduled_delay: Duration::from_millis(50),
            flush_timeout: Duration::from_secs(5),
        }
    }

    /// A processor into an in-memory exporter, counted.
    fn counted(s: BatchSettings) -> (BatchProcessor, InMemorySpanExporter, Arc<SpanCounters>) {
        let exporter = InMemorySpanExporter::default();
        let counters = Arc::new(SpanCounters::default());
        let p = BatchProcessor::new(
            super::super::Counting::new(exporter.clone(), counters.clone()),
            s,
            counters.clone(),
            Redactor::default(),
        );
        (p, exporter, counters)
    }

    #[test]
    fn exports_in_batches_and_flushes() {
        let (p, exporter, counters) = counted(settings(100, 7));
        let provider = SdkTracerProvider::builder().with_span_processor(p).build();
        let tracer = provider.tracer("t");
        for i in 0..50 {
            tracer.in_span(format!("s{i}"), |_| {});
        }
        provider.force_flush().unwrap();
        assert_eq!(exporter.get_finished_spans().unwrap().len(), 50);
        assert_eq!(counters.exported.load(Ordering::Relaxed), 50);
        provider.shutdown().unwrap();
    }

    use crate::engine::record::Record;
    use crate::sdk::export::queue::tests::finished;

    /// Lens's records, built on the exporter thread, and the SDK path's
    /// spans are all exported, without unsampled records, each path's in
    /// order.
    #[test]
    fn records_are_exported_in_order_without_unsampled_spans() {
        let (p, exporter, counters) = counted(settings(100, 7));
        let rec = Record::for_test;
        p.on_end_records(vec![(0..10).map(|i| rec(i, i != 3)).collect()]);
        p.on_end(finished(10, true));
        p.on_end_records(vec![(11..15).map(|i| rec(i, true)).collect()]);
        p.on_end_records(vec![(15..20).map(|i| rec(i, true)).collect()]);
        p.flush_within(Duration::from_secs(5)).unwrap();
        let spans = exporter.get_finished_spans().unwrap();
        let names = |lens: bool| -> Vec<String> {
            let lens_span = |s: &&SpanData| s.name != "s10";
            spans
                .iter()
                .filter(|s| lens_span(s) == lens)
                .map(|s| s.name.to_string())
                .collect()
        };
        let want: Vec<String> = (0..20)
            .filter(|i| *i != 3 && *i != 10)
            .map(|i| format!("s{i}"))
            .collect();
        assert_eq!(names(true), want);
        assert_eq!(names(false), ["s10"]);
        assert_eq!(counters.dropped.load(Ordering::Relaxed), 0);
        // the unsampled record is not counted as ended; the SDK span is
        // counted by the provider's wrapper, not here
        assert_eq!(counters.ended.load(Ordering::Relaxed), 18);
        p.shutdown_with_timeout(Duration::from_secs(5)).unwrap();
    }

    /// An SDK span and lens's records are redacted before export.
    #[test]
    fn sdk_spans_and_records_are_redacted() {
        use opentelemetry::KeyValue;
        let (p, exporter, _) = counted(settings(100, 50));
        let secret = |i| {
            let mut s = finished(i, true);
            s.attributes.push(KeyValue::new("api_key", "k"));
            s
        };
        let secret_record = |i| {
            let mut r = Record::for_test(i, true);
            r.set_attribute(KeyValue::new("api_key", "k"));
            r
        };
        p.on_end(secret(0));
        p.on_end_records(vec![FinishedBatch::from(vec![secret_record(1)])]);
        p.on_end(secret(2));
        p.on_end_records(vec![FinishedBatch::from(vec![secret_record(3)])]);
        p.flush_within(Duration::from_secs(5)).unwrap();
        let spans = exporter.get_finished_spans().unwrap();
        assert_eq!(spans.len(), 4);
        for s in &spans {
            assert_eq!(s.attributes[0].value.as_str(), "[REDACTED]", "{}", s.name);
        }
        p.shutdown_with_timeout(Duration::from_secs(5)).unwrap();
    }

    #[test]
    fn a_buffer_larger_than_the_room_left_drops_and_counts_the_excess() {
        let exporter = InMemorySpanExporter::default();
        let counters = Arc::new(SpanCounters::default());
        let p = BatchProcessor::new(
            exporter.clone(),
            settings(10, 100),
            counters.clone(),
            Redactor::default(),
        );
        let rec = Record::for_test;
        p.on_end_records(vec![(0..8).map(|i| rec(i, true)).collect()]);
        p.on_end_records(vec![(8..25).map(|i| rec(i, true)).collect()]);
        assert_eq!(counters.dropped.load(Ordering::Relaxed), 15);
        assert_eq!(counters.ended.load(Ordering::Relaxed), 25);
        p.flush_within(Duration::from_secs(5)).unwrap();
        assert_eq!(exporter.get_finished_spans().unwrap().len(), 10);
        p.shutdown_with_timeout(Duration::from_secs(5)).unwrap();
    }

    #[test]
    fn a_full_queue_drops_and_counts() {
        #[derive(Debug)]
        struct Slow;
        impl SpanExporter for Slow {
            async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
                std::thread::sleep(Duration::from_millis(200));
                Ok(())
            }
        }
        let counters = Arc::new(SpanCounters::default());
        let p = BatchProcessor::new(
            Slow,
            settings(10, 10),
            counters.clone(),
            Redactor::default(),
        );
        let provider = SdkTracerProvider::builder().with_span_processor(p).build();
        let tracer = provider.tracer("t");
        for _ in 0..100 {
            tracer.in_span("s", |_| {});
        }
        assert!(counters.dropped.load(Ordering::Relaxed) >= 70);
        provider.shutdown().unwrap();
    }

    #[test]
    fn flush_and_shutdown_meet_their_deadline_with_a_hung_exporter() {
        #[derive(Debug)]
        struct Hung;
        impl SpanExporter for Hung {
            async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
                std::thread::sleep(Duration::from_secs(3));
                Ok(())
            }
        }
        let counters = Arc::new(SpanCounters::default());
        let p = BatchProcessor::new(Hung, settings(10, 1), counters, Redactor::default());
        let provider = SdkTracerProvider::builder().with_span_processor(p).build();
        provider.tracer("t").in_span("s", |_| {});
        let t = Instant::now();
        // the SDK returns the processor's error through the provider
        let _ = provider.shutdown_with_timeout(Duration::from_millis(300));
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    }
}
