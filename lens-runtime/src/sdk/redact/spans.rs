//! Spans, events and links: redacted in the exporter wrapper.

use super::rule::Redactor;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use std::time::Duration;

/// A span exporter that redacts every span ([`Redactor::redact_span`]) and
/// the resource before handing them to `inner`.
#[derive(Debug)]
pub(crate) struct RedactSpans<E> {
    inner: E,
    redactor: Redactor,
}

impl<E> RedactSpans<E> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: E, redactor: Redactor) -> Self {
        RedactSpans { inner, redactor }
    }

    #[cfg(test)]
    /// The wrapped exporter.
    pub(crate) fn inner(&self) -> &E {
        &self.inner
    }
}

impl<E: SpanExporter> SpanExporter for RedactSpans<E> {
    async fn export(&self, mut batch: Vec<SpanData>) -> OTelSdkResult {
        for span in &mut batch {
            self.redactor.redact_span(span);
        }
        self.inner.export(batch).await
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn shutdown(&self) -> OTelSdkResult {
        self.inner.shutdown()
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        let inner = &mut self.inner;
        self.redactor
            .with_resource(resource, |r| inner.set_resource(r));
    }
}
