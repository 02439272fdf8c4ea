//! Counting log records: the SDK's batch log processor drops records
//! silently when its queue is full, so lens counts what it was handed and
//! what was exported, and reports the difference.

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::logs::LogExporter;
use opentelemetry_sdk::Resource;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Log records offered to the batch log processor, and those exported: the
/// SDK's processor drops records silently when its queue is full, so lens
/// counts the difference (reported by flush and shutdown).
#[derive(Debug, Default)]
pub(crate) struct LogCounters {
    emitted: AtomicU64,
    exported: AtomicU64,
    /// Losses already reported by a flush.
    reported: AtomicU64,
    /// The first failed export's error, for the shutdown report.
    pub(crate) first_error: std::sync::OnceLock<String>,
}

impl LogCounters {
    /// Records lost among those emitted before `emitted_then` (a snapshot
    /// taken before a flush), not reported yet.
    pub(crate) fn newly_lost(&self, emitted_then: u64) -> u64 {
        let lost = emitted_then.saturating_sub(self.exported.load(Ordering::Relaxed));
        let before = self.reported.fetch_max(lost, Ordering::AcqRel);
        lost.saturating_sub(before)
    }
}

/// Counts the records the logger provider hands to the processor.
#[derive(Debug)]
pub(crate) struct CountEmitted<P> {
    inner: P,
    counters: Arc<LogCounters>,
}

impl<P: opentelemetry_sdk::logs::LogProcessor> opentelemetry_sdk::logs::LogProcessor
    for CountEmitted<P>
{
    fn emit(
        &self,
        data: &mut opentelemetry_sdk::logs::SdkLogRecord,
        scope: &opentelemetry::InstrumentationScope,
    ) {
        self.counters.emitted.fetch_add(1, Ordering::Relaxed);
        self.inner.emit(data, scope);
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }
    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// Counts the records an exporter accepted.
#[derive(Debug)]
pub(crate) struct CountExported<E> {
    inner: E,
    counters: Arc<LogCounters>,
}

impl<E: LogExporter> LogExporter for CountExported<E> {
    async fn export(&self, batch: opentelemetry_sdk::logs::LogBatch<'_>) -> OTelSdkResult {
        let n = batch.iter().count() as u64;
        let r = self.inner.export(batch).await;
        match &r {
            Ok(()) => {
                self.counters.exported.fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => {
                let _ = self.counters.first_error.set(e.to_string());
            }
        }
        r
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }
    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

impl LogCounters {
    /// Records handed to the processor so far.
    pub(crate) fn emitted(&self) -> u64 {
        self.emitted.load(Ordering::Relaxed)
    }
    /// Records the exporter accepted so far.
    pub(crate) fn exported(&self) -> u64 {
        self.exported.load(Ordering::Relaxed)
    }
}

impl<P> CountEmitted<P> {
    pub(crate) fn new(inner: P, counters: &Arc<LogCounters>) -> Self {
        CountEmitted {
            inner,
            counters: counters.clone(),
        }
    }
}

impl<E> CountExported<E> {
    pub(crate) fn new(inner: E, counters: &Arc<LogCounters>) -> Self {
        CountExported {
            inner,
            counters: counters.clone(),
        }
    }
}
