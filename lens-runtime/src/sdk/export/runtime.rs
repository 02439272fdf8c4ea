//! The runtime OTLP exports run on (see the module docs of
//! [`super`]): lens's own small tokio runtime, and the wrapper that moves
//! each exporter call onto it.

use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::logs::{LogBatch, LogExporter};
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use std::fmt;
use std::future::Future;
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
