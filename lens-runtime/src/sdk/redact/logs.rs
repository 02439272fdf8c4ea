//! Log records: redacted in the exporter wrapper, rebuilding only the records that need it.

use super::rule::Redactor;
use opentelemetry::InstrumentationScope;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::logs::{LogBatch, LogExporter, SdkLogRecord};
use opentelemetry_sdk::Resource;
use std::borrow::Cow;
use std::time::Duration;

/// A log exporter that redacts log record attributes (and map-valued body
/// entries; a string body is not scanned) and the resource before handing
/// them to `inner`. A batch with nothing sensitive is passed through as is;
/// otherwise the affected records are rebuilt (the SDK's records cannot be
/// edited in place) and the batch re-assembled in order.
#[derive(Debug)]
pub(crate) struct RedactLogs<E> {
    inner: E,
    redactor: Redactor,
}

impl<E> RedactLogs<E> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: E, redactor: Redactor) -> Self {
        RedactLogs { inner, redactor }
    }
}

impl<E: LogExporter> LogExporter for RedactLogs<E> {
    async fn export(&self, batch: LogBatch<'_>) -> OTelSdkResult {
        let scope_needs = |s: &InstrumentationScope| {
            s.attributes()
                .any(|kv| self.redactor.is_redacted(kv.key.as_str()))
        };
        if !batch
            .iter()
            .any(|(r, s)| self.redactor.record_needs(r) || scope_needs(s))
        {
            return self.inner.export(batch).await;
        }
        type Owned<'a> = (Cow<'a, SdkLogRecord>, Cow<'a, InstrumentationScope>);
        let records: Vec<Owned<'_>> = batch
            .iter()
            .map(|(record, scope)| {
                let record = if self.redactor.record_needs(record) {
                    Cow::Owned(self.redactor.redact_record(record))
                } else {
                    Cow::Borrowed(record)
                };
                let scope = match self.redactor.redact_scope(scope) {
                    Some(s) => Cow::Owned(s),
                    None => Cow::Borrowed(scope),
                };
                (record, scope)
            })
            .collect();
        let refs: Vec<(&SdkLogRecord, &InstrumentationScope)> = records
            .iter()
            .map(|(r, s)| (r.as_ref(), s.as_ref()))
            .collect();
        self.inner.export(LogBatch::new(&refs)).await
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn shutdown(&self) -> OTelSdkResult {
        self.inner.shutdown()
    }

    fn event_enabled(
        &self,
        level: opentelemetry::logs::Severity,
        target: &str,
        name: Option<&str>,
    ) -> bool {
        self.inner.event_enabled(level, target, name)
    }

    fn set_resource(&mut self, resource: &Resource) {
        let inner = &mut self.inner;
        self.redactor
            .with_resource(resource, |r| inner.set_resource(r));
    }
}
