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
pub(crate) mod console;
pub(crate) mod file;
pub(crate) mod log_count;
mod otlp;
pub(crate) mod perfetto;
mod proto3;
pub(crate) mod sink;
#[cfg(feature = "tls")]
mod tls;

pub(crate) use otlp::{otlp_destination, otlp_logs, otlp_metrics, otlp_spans, transport_error};

pub(crate) use crate::config::otel::OtlpProtocol;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::logs::{LogBatch, LogExporter};
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Handle;

/// The tokio runtime OTLP exports run on. Shut down in the background on
/// drop, so dropping it inside a user's runtime never panics.
pub(crate) struct ExportRuntime {
    rt: Option<tokio::runtime::Runtime>,
}

impl fmt::Debug for ExportRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ExportRuntime")
    }
}

impl ExportRuntime {
    pub(crate) fn new() -> std::io::Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("lens-export")
            .enable_all()
            .build()?;
        Ok(ExportRuntime { rt: Some(rt) })
    }

    pub(crate) fn handle(&self) -> Handle {
        self.rt
            .as_ref()
            .map(|r| r.handle().clone())
            .expect("runtime present until drop")
    }
}

impl Drop for ExportRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// Runs `fut` to completion on `handle` from any thread (also from inside
/// another tokio runtime) by blocking a scoped helper thread on it, giving
/// up after `timeout` when one is set.
fn run_on<F>(handle: &Handle, timeout: Option<Duration>, fut: F) -> OTelSdkResult
where
    F: Future<Output = OTelSdkResult> + Send,
{
    let fut = async move {
        match timeout {
            Some(t) => tokio::time::timeout(t, fut)
                .await
                .unwrap_or(Err(OTelSdkError::Timeout(t))),
            None => fut.await,
        }
    };
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("lens-export-call".into())
            .spawn_scoped(s, || handle.block_on(fut))
            .map_err(|e| OTelSdkError::InternalFailure(format!("cannot start export thread: {e}")))?
            .join()
            .unwrap_or_else(|_| Err(OTelSdkError::InternalFailure("exporter panicked".into())))
    })
}

/// An exporter whose calls run on the lens export runtime.
#[derive(Debug)]
pub(crate) struct OnRuntime<E> {
    inner: E,
    handle: Handle,
    /// Deadline of one export call (`OTEL_BSP_EXPORT_TIMEOUT` for spans).
    timeout: Option<Duration>,
}

#[cfg_attr(
    not(any(feature = "otlp-grpc", feature = "otlp-http")),
    allow(dead_code)
)]
impl<E> OnRuntime<E> {
    pub(crate) fn new(inner: E, handle: Handle) -> Self {
        OnRuntime {
            inner,
            handle,
            timeout: None,
        }
    }

    /// Gives up each export call after `timeout`.
    pub(crate) fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

impl<E: SpanExporter> SpanExporter for OnRuntime<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        run_on(&self.handle, self.timeout, self.inner.export(batch))
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        run_on(&self.handle, self.timeout, async {
            self.inner.shutdown_with_timeout(timeout)
        })
    }
    fn force_flush(&self) -> OTelSdkResult {
        run_on(&self.handle, self.timeout, async {
            self.inner.force_flush()
        })
    }
    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

impl<E: PushMetricExporter> PushMetricExporter for OnRuntime<E> {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        run_on(&self.handle, self.timeout, self.inner.export(metrics))
    }
    fn force_flush(&self) -> OTelSdkResult {
        run_on(&self.handle, self.timeout, async {
            self.inner.force_flush()
        })
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        run_on(&self.handle, self.timeout, async {
            self.inner.shutdown_with_timeout(timeout)
        })
    }
    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

impl<E: LogExporter> LogExporter for OnRuntime<E> {
    async fn export(&self, batch: LogBatch<'_>) -> OTelSdkResult {
        run_on(&self.handle, self.timeout, self.inner.export(batch))
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        run_on(&self.handle, self.timeout, async {
            self.inner.shutdown_with_timeout(timeout)
        })
    }
    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

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
    /// Set once the first failed export was reported.
    pub(crate) reported: std::sync::atomic::AtomicBool,
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
                if !self.counters.reported.swap(true, Ordering::Relaxed) {
                    let to = self
                        .counters
                        .destination
                        .get()
                        .map_or("the exporter", |d| d);
                    let cause = transport_error().map_or(String::new(), |c| format!(" ({c})"));
                    crate::diag::warn(format_args!(
                        "exporting spans to {to} failed: {e}{cause} (further failures are counted and reported at shutdown)"
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
