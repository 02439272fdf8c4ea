//! Exporters and the runtime they run on.
//!
//! The SDK's batch span processor, periodic metric reader and batch log
//! processor each run on a thread of their own and drive the exporter with a
//! plain `block_on`. gRPC (tonic) and async HTTP (reqwest) need a live tokio
//! reactor, which a plain thread does not have and which a user's runtime
//! must not lend (a current-thread runtime would deadlock). So lens owns one
//! small tokio runtime ("lens-export", one worker) and every OTLP export runs
//! on it: the exporter call is moved to a scoped helper thread that blocks on
//! the runtime's handle. This works from a synchronous `main`, from inside a
//! multi-thread runtime and from inside a current-thread runtime.

pub(crate) mod batch;
mod build_error;
pub(crate) mod console;
mod endpoint;
pub(crate) mod file;
#[cfg(any(feature = "otlp-grpc", feature = "otlp-http"))]
mod headers;
mod hex;
pub(crate) mod log_count;
mod otlp;
mod otlp_json;
pub(crate) mod perfetto;
mod proto3;
mod queue;
mod runtime;
pub(crate) mod sink;
#[cfg(feature = "tls")]
#[cfg_attr(
    not(any(feature = "otlp-grpc", feature = "otlp-http")),
    allow(dead_code)
)]
mod tls;

pub(crate) use build_error::BuildError;
use endpoint::transport_error;
pub(crate) use otlp::{otlp_destinations, otlp_logs, otlp_metrics, otlp_spans};
pub(crate) use runtime::ExportRuntime;

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Counts spans handed to the exporter and spans it accepted, so that spans
/// lost to a full queue or an unreachable collector can be reported.
#[derive(Debug, Default)]
pub(crate) struct SpanCounters {
    pub(crate) ended: AtomicU64,
    /// Dropped before export: queue full, ended after shutdown, or in a
    /// forked child.
    pub(crate) dropped: AtomicU64,
    pub(crate) exported: AtomicU64,
    pub(crate) failed: AtomicU64,
    /// Where spans go, for messages (set once the pipeline knows).
    pub(crate) destination: std::sync::OnceLock<String>,
    /// Set once the first failed export was reported (and at shutdown,
    /// whose report names the failure instead).
    pub(crate) reported: std::sync::atomic::AtomicBool,
    /// The first failed export's error, for the shutdown report.
    pub(crate) first_error: std::sync::OnceLock<String>,
}

/// Wraps a span exporter to count what it exported and what failed.
#[derive(Debug)]
pub(crate) struct Counting<E> {
    inner: E,
    counters: Arc<SpanCounters>,
}

impl<E> Counting<E> {
    pub(crate) fn new(inner: E, counters: Arc<SpanCounters>) -> Self {
        Counting { inner, counters }
    }
}

impl<E: SpanExporter> SpanExporter for Counting<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len() as u64;
        let r = self.inner.export(batch).await;
        let counter = match &r {
            Ok(()) => &self.counters.exported,
            Err(e) => {
                // the first failure is reported when it happens (a wrong
                // endpoint should not stay silent until shutdown); later
                // ones are counted and reported at shutdown
                if self.counters.first_error.get().is_none() {
                    let cause = transport_error().map_or(String::new(), |c| format!(" ({c})"));
                    let _ = self.counters.first_error.set(format!("{e}{cause}"));
                }
                if !self.counters.reported.swap(true, Ordering::Relaxed) {
                    let to = self
                        .counters
                        .destination
                        .get()
                        .map_or("the exporter", |d| d);
                    let e = self.counters.first_error.get().map_or("", |e| e);
                    crate::diag::warn(format_args!(
                        "exporting spans to {to} failed: {e} (further failures are counted and reported at shutdown)"
                    ));
                }
                &self.counters.failed
            }
        };
        counter.fetch_add(n, Ordering::Relaxed);
        r
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }
    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// Counts metric exports begun, and those that succeeded, and keeps the
/// first failure's error: the SDK's periodic reader logs a failure only
/// through its internal logs, and answers its shutdown with "Failed to
/// shutdown", which names no cause.
#[derive(Debug, Default)]
pub(crate) struct MetricCounters {
    pub(crate) started: AtomicU64,
    pub(crate) exported: AtomicU64,
    pub(crate) first_error: std::sync::OnceLock<String>,
}

/// Wraps a metric exporter to count its exports ([`MetricCounters`]).
#[derive(Debug)]
pub(crate) struct CountMetricExports<E> {
    inner: E,
    counters: Arc<MetricCounters>,
}

impl<E> CountMetricExports<E> {
    pub(crate) fn new(inner: E, counters: &Arc<MetricCounters>) -> Self {
        CountMetricExports {
            inner,
            counters: counters.clone(),
        }
    }
}

impl<E: opentelemetry_sdk::metrics::exporter::PushMetricExporter>
    opentelemetry_sdk::metrics::exporter::PushMetricExporter for CountMetricExports<E>
{
    async fn export(
        &self,
        metrics: &opentelemetry_sdk::metrics::data::ResourceMetrics,
    ) -> OTelSdkResult {
        self.counters.started.fetch_add(1, Ordering::Relaxed);
        let r = self.inner.export(metrics).await;
        match &r {
            Ok(()) => {
                self.counters.exported.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) if self.counters.first_error.get().is_none() => {
                let cause = transport_error().map_or(String::new(), |c| format!(" ({c})"));
                let _ = self.counters.first_error.set(format!("{e}{cause}"));
            }
            Err(_) => {}
        }
        r
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }
    fn temporality(&self) -> opentelemetry_sdk::metrics::Temporality {
        self.inner.temporality()
    }
}
