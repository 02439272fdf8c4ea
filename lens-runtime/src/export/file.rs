//! OTLP JSON lines: each line one `Export{Trace,Metrics,Logs}ServiceRequest`
//! in the OTLP/JSON encoding, as the OpenTelemetry file-exporter
//! specification describes (readable by the Collector's `otlpjsonfile`
//! receiver). The `console` exporter writes the same encoding to stdout, one
//! record (span, metric, log record) per line.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::logs::tonic::group_logs_by_resource_and_scope;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::logs::{LogBatch, LogExporter};
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where JSON lines go.
#[derive(Debug)]
pub(crate) enum Sink {
    File(Mutex<File>),
    Stdout,
}

impl Sink {
    /// Opens `path` for appending (creating parent folders).
    pub(crate) fn file(path: &Path) -> std::io::Result<Arc<Sink>> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Arc::new(Sink::File(Mutex::new(file))))
    }

    /// Writes whole lines with one `write_all` (appends from several
    /// processes do not interleave inside a line).
    fn write_lines(&self, lines: &[String]) -> OTelSdkResult {
        if lines.is_empty() {
            return Ok(());
        }
        let mut buf = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
        for l in lines {
            buf.push_str(l);
            buf.push('\n');
        }
        let r = match self {
            Sink::File(file) => {
                let mut f = file.lock().unwrap_or_else(|e| e.into_inner());
                f.write_all(buf.as_bytes()).and_then(|()| f.flush())
            }
            Sink::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(buf.as_bytes()).and_then(|()| out.flush())
            }
        };
        r.map_err(|e| OTelSdkError::InternalFailure(format!("cannot write telemetry: {e}")))
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, OTelSdkError> {
    serde_json::to_string(value)
        .map_err(|e| OTelSdkError::InternalFailure(format!("cannot encode OTLP JSON: {e}")))
}

/// A JSON-lines exporter for all three signals. `per_record` splits each
/// request into one line per span / metric / log record (the console form).
#[derive(Debug)]
pub(crate) struct JsonLines {
    sink: Arc<Sink>,
    per_record: bool,
    resource: ResourceAttributesWithSchema,
}

impl JsonLines {
    pub(crate) fn new(sink: Arc<Sink>, per_record: bool) -> Self {
        JsonLines {
            sink,
            per_record,
            resource: ResourceAttributesWithSchema::default(),
        }
    }

    fn traces(&self, req: ExportTraceServiceRequest) -> Result<Vec<String>, OTelSdkError> {
        if !self.per_record {
            return Ok(vec![to_json(&req)?]);
        }
        let mut lines = Vec::new();
        for rs in &req.resource_spans {
            for ss in &rs.scope_spans {
                for span in &ss.spans {
                    let mut one = rs.clone();
                    let mut scope = ss.clone();
                    scope.spans = vec![span.clone()];
                    one.scope_spans = vec![scope];
                    lines.push(to_json(&ExportTraceServiceRequest {
                        resource_spans: vec![one],
                    })?);
                }
            }
        }
        Ok(lines)
    }
}

impl SpanExporter for JsonLines {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let resource_spans = group_spans_by_resource_and_scope(batch, &self.resource);
        let lines = self.traces(ExportTraceServiceRequest { resource_spans })?;
        self.sink.write_lines(&lines)
    }
    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
    fn set_resource(&mut self, resource: &Resource) {
        self.resource = resource.into();
    }
}

impl PushMetricExporter for JsonLines {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let req = ExportMetricsServiceRequest::from(metrics);
        let lines = if self.per_record {
            let mut lines = Vec::new();
            for rm in &req.resource_metrics {
                for sm in &rm.scope_metrics {
                    for m in &sm.metrics {
                        let mut one = rm.clone();
                        let mut scope = sm.clone();
                        scope.metrics = vec![m.clone()];
                        one.scope_metrics = vec![scope];
                        lines.push(to_json(&ExportMetricsServiceRequest {
                            resource_metrics: vec![one],
                        })?);
                    }
                }
            }
            lines
        } else {
            vec![to_json(&req)?]
        };
        self.sink.write_lines(&lines)
    }
    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }
    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
    fn temporality(&self) -> Temporality {
        Temporality::Cumulative
    }
}

impl LogExporter for JsonLines {
    async fn export(&self, batch: LogBatch<'_>) -> OTelSdkResult {
        let resource_logs = group_logs_by_resource_and_scope(&batch, &self.resource);
        let req = ExportLogsServiceRequest { resource_logs };
        let lines = if self.per_record {
            let mut lines = Vec::new();
            for rl in &req.resource_logs {
                for sl in &rl.scope_logs {
                    for r in &sl.log_records {
                        let mut one = rl.clone();
                        let mut scope = sl.clone();
                        scope.log_records = vec![r.clone()];
                        one.scope_logs = vec![scope];
                        lines.push(to_json(&ExportLogsServiceRequest {
                            resource_logs: vec![one],
                        })?);
                    }
                }
            }
            lines
        } else {
            vec![to_json(&req)?]
        };
        self.sink.write_lines(&lines)
    }
    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
    fn set_resource(&mut self, resource: &Resource) {
        self.resource = resource.into();
    }
}
