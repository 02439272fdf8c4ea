//! OTLP JSON lines: each line one `Export{Trace,Metrics,Logs}ServiceRequest`
//! in the OTLP/JSON encoding, as the OpenTelemetry file-exporter
//! specification describes (readable by the Collector's `otlpjsonfile`
//! receiver). The `console` exporter writes the same encoding to stdout, one
//! record (span, metric, log record) per line.
//!
//! What a reader can rely on:
//! * every double follows the proto3 JSON mapping: NaN and the infinities are
//!   the strings `"NaN"`, `"Infinity"` and `"-Infinity"` (serde_json alone
//!   would write `null`), wherever they occur (attribute values, log bodies,
//!   metric points);
//! * a batch's lines reach the file whole or not at all: a failed write (full
//!   disk, file-size limit) is undone by truncating the file back to where the
//!   batch began, so the file always ends with a complete line;
//! * files are created with mode 0600 (telemetry may hold private data);
//! * a write failure never panics or stalls the application: the batch's
//!   records are dropped and counted (`Sink::dropped_records`), export
//!   returns an error, and one warning (the first failure) goes to stderr.

use crate::sdk::export::otlp_json;
use crate::sdk::export::sink::EncodedBatch;
pub(crate) use crate::sdk::export::sink::Sink;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::logs::v1::{ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::metrics::v1::{ResourceMetrics as ProtoMetrics, ScopeMetrics};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans};
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
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A JSON-lines exporter for all three signals. `per_record` splits each
/// request into one line per span / metric / log record (the console form).
/// Where the `file` exporter of `rank` writes: `NEMO_LENS_FILE_PATH` with
/// `{rank}` replaced, else `lens-telemetry/<run_id>-rank<rank>.otlp.jsonl`,
/// the run id made safe for a file name as a launcher's is (a character
/// other than `A-Z a-z 0-9 . _ -` becomes `-`, so `NEMO_LENS_RUN_ID=../x`
/// stays inside `lens-telemetry/`). The `nemo.run.id` attribute keeps the
/// run id as configured, as the Python library writes it.
pub(crate) fn path_for(cfg: &crate::config::LensConfig, run_id: &str, rank: u32) -> PathBuf {
    match &cfg.file_path {
        Some(p) => PathBuf::from(p.replace("{rank}", &rank.to_string())),
        None => {
            let id = crate::host::launcher::file_safe(run_id);
            Path::new("lens-telemetry").join(format!("{id}-rank{rank}.otlp.jsonl"))
        }
    }
}

#[derive(Debug)]
pub(crate) struct JsonLines {
    sink: Arc<Sink>,
    per_record: bool,
    resource: ResourceAttributesWithSchema,
    /// The resource's part of every span line, encoded once (`None` if it
    /// could not be: spans then take the serde path).
    span_resource: Option<otlp_json::ResourcePart>,
    /// The span lines' buffer, kept from one batch to the next (at most
    /// [`KEEP_BUFFER`] bytes of it).
    span_buf: Mutex<Vec<u8>>,
}

/// The largest span buffer kept between batches (a batch of 2,048 spans
/// with one attribute is ~0.9 MB).
const KEEP_BUFFER: usize = 4 << 20;

impl JsonLines {
    /// An exporter writing to `sink`, one request per line or (with
    /// `per_record`) one record per line.
    pub(crate) fn new(sink: Arc<Sink>, per_record: bool) -> Self {
        let resource = ResourceAttributesWithSchema::default();
        JsonLines {
            sink,
            per_record,
            span_resource: otlp_json::ResourcePart::new(&resource).ok(),
            resource,
            span_buf: Mutex::new(Vec::new()),
        }
    }

    /// Spans straight from `SpanData` into the reused buffer, written with
    /// one append (see [`otlp_json`]).
    fn export_spans(&self, part: &otlp_json::ResourcePart, spans: &[SpanData]) -> OTelSdkResult {
        let records = count(spans.len());
        if records == 0 {
            return Ok(());
        }
        let mut kept = self.span_buf.lock().unwrap_or_else(|e| e.into_inner());
        let mut batch = EncodedBatch {
            buf: std::mem::take(&mut *kept),
            records,
        };
        batch.buf.clear();
        let result = match otlp_json::encode_spans(&mut batch.buf, part, spans, self.per_record) {
            Ok(()) => self.sink.write(&batch),
            Err(e) => Err(self
                .sink
                .drop_batch(records, &format!("cannot encode OTLP JSON: {e}"))),
        };
        if batch.buf.capacity() <= KEEP_BUFFER {
            *kept = batch.buf;
        }
        result
    }

    /// Encodes, then writes; an encoding failure drops the records too. A
    /// request without records writes nothing.
    fn export_with(
        &self,
        records: u64,
        encode: impl FnOnce(&mut EncodedBatch) -> Result<(), OTelSdkError>,
    ) -> OTelSdkResult {
        if records == 0 {
            return Ok(());
        }
        let mut batch = EncodedBatch {
            buf: Vec::new(),
            records,
        };
        if let Err(e) = encode(&mut batch) {
            return Err(self.sink.drop_batch(records, &e));
        }
        self.sink.write(&batch)
    }
}

/// Counts as `u64` (saturating; lengths always fit).
fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

fn encode_traces(
    req: ExportTraceServiceRequest,
    per_record: bool,
    batch: &mut EncodedBatch,
) -> Result<(), OTelSdkError> {
    if !per_record {
        return batch.push(&req);
    }
    for rs in req.resource_spans {
        for ss in rs.scope_spans {
            for span in ss.spans {
                batch.push(&ExportTraceServiceRequest {
                    resource_spans: vec![ResourceSpans {
                        resource: rs.resource.clone(),
                        scope_spans: vec![ScopeSpans {
                            scope: ss.scope.clone(),
                            spans: vec![span],
                            schema_url: ss.schema_url.clone(),
                        }],
                        schema_url: rs.schema_url.clone(),
                    }],
                })?;
            }
        }
    }
    Ok(())
}

fn encode_metrics(
    req: ExportMetricsServiceRequest,
    per_record: bool,
    batch: &mut EncodedBatch,
) -> Result<(), OTelSdkError> {
    if !per_record {
        return batch.push(&req);
    }
    for rm in req.resource_metrics {
        for sm in rm.scope_metrics {
            for metric in sm.metrics {
                batch.push(&ExportMetricsServiceRequest {
                    resource_metrics: vec![ProtoMetrics {
                        resource: rm.resource.clone(),
                        scope_metrics: vec![ScopeMetrics {
                            scope: sm.scope.clone(),
                            metrics: vec![metric],
                            schema_url: sm.schema_url.clone(),
                        }],
                        schema_url: rm.schema_url.clone(),
                    }],
                })?;
            }
        }
    }
    Ok(())
}

fn encode_logs(
    req: ExportLogsServiceRequest,
    per_record: bool,
    batch: &mut EncodedBatch,
) -> Result<(), OTelSdkError> {
    if !per_record {
        return batch.push(&req);
    }
    for rl in req.resource_logs {
        for sl in rl.scope_logs {
            for record in sl.log_records {
                batch.push(&ExportLogsServiceRequest {
                    resource_logs: vec![ResourceLogs {
                        resource: rl.resource.clone(),
                        scope_logs: vec![ScopeLogs {
                            scope: sl.scope.clone(),
                            log_records: vec![record],
                            schema_url: sl.schema_url.clone(),
                        }],
                        schema_url: rl.schema_url.clone(),
                    }],
                })?;
            }
        }
    }
    Ok(())
}

impl SpanExporter for JsonLines {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        if let Some(part) = &self.span_resource {
            return self.export_spans(part, &batch);
        }
        let records = count(batch.len());
        let resource_spans = group_spans_by_resource_and_scope(batch, &self.resource);
        let req = ExportTraceServiceRequest { resource_spans };
        self.export_with(records, |b| encode_traces(req, self.per_record, b))
    }
    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
    fn set_resource(&mut self, resource: &Resource) {
        self.resource = resource.into();
        self.span_resource = otlp_json::ResourcePart::new(&self.resource).ok();
    }
}

impl PushMetricExporter for JsonLines {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let req = ExportMetricsServiceRequest::from(metrics);
        let records = req
            .resource_metrics
            .iter()
            .flat_map(|rm| &rm.scope_metrics)
            .map(|sm| count(sm.metrics.len()))
            .sum();
        self.export_with(records, |b| encode_metrics(req, self.per_record, b))
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
        let records = req
            .resource_logs
            .iter()
            .flat_map(|rl| &rl.scope_logs)
            .map(|sl| count(sl.log_records.len()))
            .sum();
        self.export_with(records, |b| encode_logs(req, self.per_record, b))
    }
    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
    fn set_resource(&mut self, resource: &Resource) {
        self.resource = resource.into();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::{write_all_counted, write_all_with};
    use crate::sdk::export::sink::append_whole;
    use opentelemetry::trace::{
        SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
    };
    use opentelemetry::{Array, InstrumentationScope, KeyValue, Value as OtelValue};
    use opentelemetry_proto::tonic::common::v1::{
        any_value, AnyValue, ArrayValue, KeyValue as ProtoKv, KeyValueList,
    };
    use opentelemetry_proto::tonic::logs::v1::LogRecord;
    use opentelemetry_proto::tonic::metrics::v1::{
        metric, number_data_point, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    };
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};
    use serde::Serialize;
    use serde_json::{json, Value as Json};
    use std::fs::OpenOptions;
    use std::future::Future;
    use std::io::{self, Write};
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::Ordering;
    use std::task::{Context, Poll, Waker};
    use std::time::SystemTime;

    /// A fresh, empty folder for one test.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("lens-file-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Runs an export future; the file exporter never waits.
    fn ready<F: Future>(fut: F) -> F::Output {
        let mut fut = std::pin::pin!(fut);
        match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(out) => out,
            Poll::Pending => panic!("the file exporter waited"),
        }
    }

    fn lines(path: &Path) -> Vec<Json> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// The OTLP/JSON value of `key` in a `[{key, value}]` list.
    fn attr<'a>(list: &'a Json, key: &str) -> &'a Json {
        list.as_array()
            .and_then(|kvs| kvs.iter().find(|kv| kv["key"] == key))
            .map(|kv| &kv["value"])
            .unwrap_or_else(|| panic!("no {key} in {list}"))
    }

    fn non_finite_attrs() -> Vec<KeyValue> {
        vec![
            KeyValue::new("loss", f64::NAN),
            KeyValue::new("grad_norm", f64::INFINITY),
            KeyValue::new("floor", f64::NEG_INFINITY),
            KeyValue::new("lr", 0.25),
            KeyValue::new(
                "history",
                OtelValue::Array(Array::F64(vec![
                    f64::NAN,
                    1.5,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                ])),
            ),
        ]
    }

    /// Checks the attributes written for [`non_finite_attrs`].
    fn assert_non_finite(attrs: &Json) {
        assert_eq!(attr(attrs, "loss"), &json!({"doubleValue": "NaN"}));
        assert_eq!(
            attr(attrs, "grad_norm"),
            &json!({"doubleValue": "Infinity"})
        );
        assert_eq!(attr(attrs, "floor"), &json!({"doubleValue": "-Infinity"}));
        assert_eq!(attr(attrs, "lr"), &json!({"doubleValue": 0.25}));
        assert_eq!(
            attr(attrs, "history"),
            &json!({"arrayValue": {"values": [
                {"doubleValue": "NaN"},
                {"doubleValue": 1.5},
                {"doubleValue": "Infinity"},
                {"doubleValue": "-Infinity"},
            ]}})
        );
    }

    fn span(name: &'static str) -> SpanData {
        let cx = SpanContext::new(
            TraceId::from(1),
            SpanId::from(2),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        );
        let mut events = SpanEvents::default();
        events.events.push(opentelemetry::trace::Event::new(
            "step",
            SystemTime::now(),
            non_finite_attrs(),
            0,
        ));
        let mut links = SpanLinks::default();
        links.links.push(opentelemetry::trace::Link::new(
            cx.clone(),
            non_finite_attrs(),
            0,
        ));
        SpanData {
            span_context: cx,
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: name.into(),
            start_time: SystemTime::now(),
            end_time: SystemTime::now(),
            attributes: non_finite_attrs(),
            dropped_attributes_count: 0,
            events,
            links,
            status: Status::Unset,
            instrumentation_scope: InstrumentationScope::builder(crate::api::span::SCOPE_NAME)
                .with_attributes(non_finite_attrs())
                .build(),
        }
    }

    #[test]
    fn non_finite_doubles_round_trip_in_spans() {
        let dir = scratch("nan-spans");
        for per_record in [false, true] {
            let path = dir.join(format!("per-record-{per_record}.jsonl"));
            let mut exporter = JsonLines::new(Sink::file(&path).unwrap(), per_record);
            SpanExporter::set_resource(
                &mut exporter,
                &Resource::builder_empty()
                    .with_attributes(non_finite_attrs())
                    .build(),
            );
            ready(SpanExporter::export(&exporter, vec![span("a"), span("b")])).unwrap();
            let lines = lines(&path);
            assert_eq!(lines.len(), if per_record { 2 } else { 1 });
            for line in &lines {
                let rs = &line["resourceSpans"][0];
                assert_non_finite(&rs["resource"]["attributes"]);
                let ss = &rs["scopeSpans"][0];
                assert_non_finite(&ss["scope"]["attributes"]);
                for span in ss["spans"].as_array().unwrap() {
                    assert_non_finite(&span["attributes"]);
                    assert_non_finite(&span["events"][0]["attributes"]);
                    assert_non_finite(&span["links"][0]["attributes"]);
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Spans of every shape the direct encoder writes: kinds, statuses,
    /// parents (none, local, remote), trace state, every attribute kind
    /// (escapes, unicode, non-finite doubles, arrays), events, links, drop
    /// counts, times before the epoch, and two scopes interleaved.
    fn varied_spans() -> Vec<SpanData> {
        use opentelemetry::trace::{Event, Link};
        let other_scope = InstrumentationScope::builder("other")
            .with_version("1.2")
            .with_schema_url("https://example.com/s")
            .build();
        let kinds = [
            SpanKind::Internal,
            SpanKind::Server,
            SpanKind::Client,
            SpanKind::Producer,
            SpanKind::Consumer,
        ];
        let statuses = [
            Status::Unset,
            Status::Ok,
            Status::error("bad \"thing\"\n\u{1}é"),
        ];
        (0..12u64)
            .map(|i| {
                let mut s = span("a");
                s.name = format!("s{i} \"q\"\t\u{7f}ü").into();
                s.span_kind = kinds[i as usize % 5].clone();
                s.status = statuses[i as usize % 3].clone();
                let state = TraceState::from_key_value([("k", "v"), ("x", "y")]).unwrap();
                s.span_context = SpanContext::new(
                    TraceId::from(0xabcdef_u128 << (i * 4)),
                    SpanId::from(u64::MAX - i),
                    if i % 2 == 0 {
                        TraceFlags::SAMPLED
                    } else {
                        TraceFlags::default()
                    },
                    false,
                    if i % 3 == 0 {
                        state
                    } else {
                        TraceState::default()
                    },
                );
                s.parent_span_id = if i % 4 == 0 {
                    SpanId::INVALID
                } else {
                    SpanId::from(i + 7)
                };
                s.parent_span_is_remote = i % 5 == 1;
                s.dropped_attributes_count = i as u32;
                s.events.dropped_count = (i * 2) as u32;
                s.links.dropped_count = (i * 3) as u32;
                if i == 5 {
                    s.start_time = SystemTime::UNIX_EPOCH - Duration::from_secs(1);
                    s.events.events.clear();
                    s.links.links.clear();
                    s.attributes.clear();
                }
                s.attributes.extend([
                    KeyValue::new("b", i % 2 == 0),
                    KeyValue::new("i", -(i as i64) * 1_000_000_007),
                    KeyValue::new("imax", i64::MIN),
                    KeyValue::new("f", 1.0 / (i as f64 + 3.0)),
                    KeyValue::new("whole", 3.0),
                    KeyValue::new("s", "plain"),
                    KeyValue::new("esc \"\\", "line\nbreak\u{0}\u{1f}"),
                    KeyValue::new("empty", ""),
                    KeyValue::new("ab", OtelValue::Array(Array::Bool(vec![true, false]))),
                    KeyValue::new("ai", OtelValue::Array(Array::I64(vec![1, -2, i64::MAX]))),
                    KeyValue::new(
                        "as",
                        OtelValue::Array(Array::String(vec!["x".into(), "\"".into()])),
                    ),
                    KeyValue::new("ae", OtelValue::Array(Array::I64(vec![]))),
                ]);
                if i % 3 == 1 {
                    s.events
                        .events
                        .push(Event::new("e2", SystemTime::now(), vec![], 3));
                    let lcx = SpanContext::new(
                        TraceId::from(9),
                        SpanId::from(8),
                        TraceFlags::default(),
                        true,
                        TraceState::from_key_value([("a", "b")]).unwrap(),
                    );
                    s.links
                        .links
                        .push(Link::new(lcx, vec![KeyValue::new("l", 1)], 2));
                }
                if i % 2 == 1 {
                    s.instrumentation_scope = other_scope.clone();
                }
                s
            })
            .chain((0..2u64).map(|i| {
                // the common span: nothing dropped, no events or links,
                // status unset, flags 256 and 257
                let mut s = span("plain");
                s.events.events.clear();
                s.links.links.clear();
                s.attributes = vec![KeyValue::new("step", i as i64 * 12_345)];
                s.span_context = SpanContext::new(
                    TraceId::from(u128::MAX - u128::from(i)),
                    SpanId::from(0x1234 + i),
                    if i == 0 {
                        TraceFlags::default()
                    } else {
                        TraceFlags::SAMPLED
                    },
                    false,
                    TraceState::default(),
                );
                s.parent_span_id = SpanId::from(i);
                s
            }))
            .collect()
    }

    /// The direct encoder writes what the serde path writes (the same JSON
    /// after parsing, and the same bytes), in one line and per record.
    #[test]
    fn the_direct_span_encoder_matches_the_serde_path() {
        let resource: ResourceAttributesWithSchema = (&Resource::builder_empty()
            .with_attributes(non_finite_attrs())
            .with_attribute(KeyValue::new("service.name", "svc"))
            .with_schema_url(vec![], "https://example.com/r")
            .build())
            .into();
        let part = otlp_json::ResourcePart::new(&resource).unwrap();
        for per_record in [false, true] {
            let spans = varied_spans();
            let mut old = EncodedBatch::default();
            let req = ExportTraceServiceRequest {
                resource_spans: group_spans_by_resource_and_scope(spans.clone(), &resource),
            };
            encode_traces(req, per_record, &mut old).unwrap();
            let mut new = Vec::new();
            otlp_json::encode_spans(&mut new, &part, &spans, per_record).unwrap();
            let parse = |b: &[u8]| -> Vec<Json> {
                std::str::from_utf8(b)
                    .unwrap()
                    .lines()
                    .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
                    .collect()
            };
            let (o, n) = (parse(&old.buf), parse(&new));
            assert_eq!(o.len(), if per_record { 14 } else { 1 });
            assert_eq!(o, n, "per_record {per_record}");
            assert_eq!(
                String::from_utf8(old.buf).unwrap(),
                String::from_utf8(new).unwrap(),
                "per_record {per_record}"
            );
        }
        // no spans: no line
        let mut new = Vec::new();
        otlp_json::encode_spans(&mut new, &part, &[], false).unwrap();
        assert!(new.is_empty());
    }

    fn double(v: f64) -> Option<AnyValue> {
        Some(AnyValue {
            value: Some(any_value::Value::DoubleValue(v)),
        })
    }

    fn kv(key: &str, value: Option<AnyValue>) -> ProtoKv {
        ProtoKv {
            key: key.to_owned(),
            value,
            ..ProtoKv::default()
        }
    }

    fn encode<T: Serialize>(value: &T) -> Json {
        let mut batch = EncodedBatch::default();
        batch.push(value).unwrap();
        assert_eq!(batch.buf.last(), Some(&b'\n'));
        serde_json::from_slice(&batch.buf).unwrap()
    }

    #[test]
    fn non_finite_doubles_in_logs_and_metrics() {
        let kvlist = Some(AnyValue {
            value: Some(any_value::Value::KvlistValue(KeyValueList {
                values: vec![kv("loss", double(f64::NAN)), kv("lr", double(0.5))],
            })),
        });
        let logs = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                scope_logs: vec![ScopeLogs {
                    log_records: vec![LogRecord {
                        body: double(f64::NEG_INFINITY),
                        attributes: vec![kv("nested", kvlist.clone())],
                        ..LogRecord::default()
                    }],
                    ..ScopeLogs::default()
                }],
                ..ResourceLogs::default()
            }],
        };
        let j = encode(&logs);
        let record = &j["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0];
        assert_eq!(record["body"], json!({"doubleValue": "-Infinity"}));
        assert_eq!(
            attr(&record["attributes"], "nested"),
            &json!({"kvlistValue": {"values": [
                {"key": "loss", "value": {"doubleValue": "NaN"}},
                {"key": "lr", "value": {"doubleValue": 0.5}},
            ]}})
        );

        let array = Some(AnyValue {
            value: Some(any_value::Value::ArrayValue(ArrayValue {
                values: vec![double(f64::INFINITY).unwrap_or_default()],
            })),
        });
        let metrics = ExportMetricsServiceRequest {
            resource_metrics: vec![ProtoMetrics {
                scope_metrics: vec![ScopeMetrics {
                    metrics: vec![
                        Metric {
                            name: "loss".into(),
                            data: Some(metric::Data::Gauge(Gauge {
                                data_points: vec![NumberDataPoint {
                                    attributes: vec![kv("bounds", array)],
                                    value: Some(number_data_point::Value::AsDouble(f64::NAN)),
                                    ..NumberDataPoint::default()
                                }],
                            })),
                            ..Metric::default()
                        },
                        Metric {
                            name: "latency".into(),
                            data: Some(metric::Data::Histogram(Histogram {
                                data_points: vec![HistogramDataPoint {
                                    sum: Some(f64::INFINITY),
                                    min: Some(f64::NEG_INFINITY),
                                    max: Some(2.0),
                                    ..HistogramDataPoint::default()
                                }],
                                ..Histogram::default()
                            })),
                            ..Metric::default()
                        },
                    ],
                    ..ScopeMetrics::default()
                }],
                ..ProtoMetrics::default()
            }],
        };
        let j = encode(&metrics);
        let ms = &j["resourceMetrics"][0]["scopeMetrics"][0]["metrics"];
        let point = &ms[0]["gauge"]["dataPoints"][0];
        assert_eq!(point["asDouble"], "NaN");
        assert_eq!(
            attr(&point["attributes"], "bounds"),
            &json!({"arrayValue": {"values": [{"doubleValue": "Infinity"}]}})
        );
        let hist = &ms[1]["histogram"]["dataPoints"][0];
        assert_eq!(
            (&hist["sum"], &hist["min"], &hist["max"]),
            (&json!("Infinity"), &json!("-Infinity"), &json!(2.0))
        );
    }

    #[test]
    fn finite_output_is_plain_serde_json() {
        // the adapter changes nothing but non-finite doubles
        let req = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                scope_logs: vec![ScopeLogs {
                    log_records: vec![LogRecord {
                        body: double(-0.0),
                        attributes: vec![kv("x", double(1e300)), kv("none", None)],
                        severity_text: "INFO\u{1}\"".into(),
                        ..LogRecord::default()
                    }],
                    ..ScopeLogs::default()
                }],
                ..ResourceLogs::default()
            }],
        };
        let mut batch = EncodedBatch::default();
        batch.push(&req).unwrap();
        let plain = serde_json::to_string(&req).unwrap() + "\n";
        assert_eq!(String::from_utf8(batch.buf).unwrap(), plain);
    }

    #[test]
    fn files_are_created_private() {
        let dir = scratch("mode");
        let path = dir.join("sub").join("t.jsonl");
        let _sink = Sink::file(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "mode {mode:o}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn enospc() -> io::Error {
        io::Error::from_raw_os_error(libc::ENOSPC)
    }

    #[test]
    fn a_failed_append_is_undone() {
        let dir = scratch("undo");
        let path = dir.join("t.jsonl");
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        append_whole(&file, b"{\"a\":1}\n", |f, b| (&*f).write(b)).unwrap();
        // the kernel takes 5 bytes, then the disk is full
        let mut budget = 5;
        let err = append_whole(&file, b"{\"b\":2}\n{\"c\":3}\n", |f, b| {
            if budget == 0 {
                return Err(enospc());
            }
            let n = (&*f).write(&b[..b.len().min(budget)])?;
            budget -= n;
            Ok(n)
        })
        .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n");
        // later batches append after the last good line
        append_whole(&file, b"{\"d\":4}\n", |f, b| (&*f).write(b)).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"a\":1}\n{\"d\":4}\n"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failed_append_keeps_lines_others_appended_meanwhile() {
        let dir = scratch("shared");
        let path = dir.join("t.jsonl");
        let open = || {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .unwrap()
        };
        let (ours, theirs) = (open(), open());
        let mut first = true;
        let err = append_whole(&ours, b"{\"ours\":1}\n", |f, b| {
            if first {
                first = false;
                return (&*f).write(&b[..3]);
            }
            (&theirs).write_all(b"{\"theirs\":1}\n")?;
            Err(enospc())
        })
        .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
        // not truncated: that would cut the other writer's line
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"o{\"theirs\":1}\n"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn writes_retry_on_interrupt_and_stop_on_zero() {
        let mut calls = 0;
        write_all_with(b"abcdef", |b| {
            calls += 1;
            match calls {
                1 => Err(io::ErrorKind::Interrupted.into()),
                _ => Ok(b.len().min(4)),
            }
        })
        .unwrap();
        assert_eq!(calls, 3);
        let err = write_all_counted(b"abc", |_| Ok(0)).unwrap_err();
        assert_eq!((err.0, err.1.kind()), (0, io::ErrorKind::WriteZero));
        // a writer claiming more than it was given cannot make us overrun
        write_all_with(b"abc", |_| Ok(100)).unwrap();
    }

    #[test]
    fn a_full_disk_drops_and_counts_and_warns_once() {
        // /dev/full fails every write with ENOSPC
        let sink = Sink::file(Path::new("/dev/full")).unwrap();
        let exporter = JsonLines::new(sink.clone(), false);
        for round in 1..=3u64 {
            let err =
                ready(SpanExporter::export(&exporter, vec![span("a"), span("b")])).unwrap_err();
            assert!(err.to_string().contains("/dev/full"), "{err}");
            assert_eq!(sink.dropped_records(), 2 * round);
            assert!(sink.warned.load(Ordering::Relaxed));
        }
        // an empty batch writes nothing and cannot fail
        ready(SpanExporter::export(&exporter, Vec::new())).unwrap();
        assert_eq!(sink.dropped_records(), 6);
    }
}
