//! OTLP/JSON for spans, written straight from `SpanData` into one reusable
//! buffer: no `opentelemetry_proto` message built per span, no serde pass
//! over it. The output is the one the serde path of `file.rs` writes
//! (the same fields in the same order, ids in lowercase hex, times and
//! integers as strings, non-finite doubles as the proto3 strings); a test
//! compares the two on the same spans after parsing. The parts shared by
//! every span of a batch (the resource, each scope) are encoded once, by
//! the serde path, and copied.

mod scalars;

use crate::sdk::export::proto3;
use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceState};
use opentelemetry::{Array, InstrumentationScope, KeyValue, Value};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::AnyValue;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans};
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_sdk::trace::SpanData;
use scalars::{hex, ids, int, nanos, string, uint, Memo};
use serde::Serialize;

/// `value` through the serde path (proto3 doubles), appended to `buf`.
fn serde_into<T: Serialize>(buf: &mut Vec<u8>, value: &T) -> Result<(), serde_json::Error> {
    let mut ser = serde_json::Serializer::new(buf);
    value.serialize(proto3::Doubles(&mut ser))
}

/// `json` cut around the empty list `"<field>":[]`: the part up to and
/// including `[`, and the part from `]`. (An unescaped `"<field>":[]` can
/// only be the field itself: quotes inside strings are escaped.)
fn split_at_list(json: &[u8], field: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    let needle = format!("\"{field}\":[]");
    let at = json
        .windows(needle.len())
        .rposition(|w| w == needle.as_bytes())?;
    let open = at + needle.len() - 1;
    Some((json[..open].to_vec(), json[open..].to_vec()))
}

/// The parts of a line around its scopes: `{"resourceSpans":[{"resource":
/// …,"scopeSpans":[` and `],"schemaUrl":…}]}`.
#[derive(Debug, Clone, Default)]
pub(super) struct ResourcePart {
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl ResourcePart {
    pub(super) fn new(resource: &ResourceAttributesWithSchema) -> Result<Self, serde_json::Error> {
        let req = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(opentelemetry_proto::tonic::resource::v1::Resource {
                    attributes: resource.attributes.0.clone(),
                    dropped_attributes_count: 0,
                    entity_refs: vec![],
                }),
                scope_spans: vec![],
                schema_url: resource.schema_url.clone().unwrap_or_default(),
            }],
        };
        let mut json = Vec::new();
        serde_into(&mut json, &req)?;
        let (head, tail) = split_at_list(&json, "scopeSpans").ok_or_else(|| {
            serde::ser::Error::custom("no scopeSpans list in the encoded resource")
        })?;
        Ok(ResourcePart { head, tail })
    }
}

/// The parts of a scope around its spans.
struct ScopePart {
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl ScopePart {
    fn new(scope: &InstrumentationScope) -> Result<Self, serde_json::Error> {
        let ss = ScopeSpans {
            scope: Some((scope, None).into()),
            spans: vec![],
            schema_url: scope
                .schema_url()
                .map(ToOwned::to_owned)
                .unwrap_or_default(),
        };
        let mut json = Vec::new();
        serde_into(&mut json, &ss)?;
        let (head, tail) = split_at_list(&json, "spans")
            .ok_or_else(|| serde::ser::Error::custom("no spans list in the encoded scope"))?;
        Ok(ScopePart { head, tail })
    }
}

/// `a == b`, answered first by where their strings live: spans of one
/// scope whose strings are static share them, and then the common case
/// needs no string comparison.
fn same_scope(a: &InstrumentationScope, b: &InstrumentationScope) -> bool {
    fn at(x: Option<&str>, y: Option<&str>) -> bool {
        match (x, y) {
            (None, None) => true,
            (Some(x), Some(y)) => std::ptr::eq(x, y),
            _ => false,
        }
    }
    let quick = at(Some(a.name()), Some(b.name()))
        && at(a.version(), b.version())
        && at(a.schema_url(), b.schema_url())
        && a.attributes().next().is_none()
        && b.attributes().next().is_none();
    quick || a == b
}

/// Appends `spans` to `buf` as OTLP JSON lines: one line for the whole
/// batch (its spans grouped by scope, scopes in the order first seen), or
/// with `per_record` one line per span. Returns the lines written.
pub(super) fn encode_spans(
    buf: &mut Vec<u8>,
    resource: &ResourcePart,
    spans: &[SpanData],
    per_record: bool,
) -> Result<(), serde_json::Error> {
    // scopes are few (usually one): a linear search beats hashing
    let mut scopes: Vec<(&InstrumentationScope, ScopePart, Vec<&SpanData>)> = Vec::new();
    for span in spans {
        let scope = &span.instrumentation_scope;
        match scopes.iter_mut().find(|(s, _, _)| same_scope(s, scope)) {
            Some((_, _, list)) => list.push(span),
            None => scopes.push((scope, ScopePart::new(scope)?, vec![span])),
        }
    }
    let mut memo = Memo::default();
    if per_record {
        for (_, part, list) in &scopes {
            for span in list {
                buf.extend_from_slice(&resource.head);
                buf.extend_from_slice(&part.head);
                write_span(buf, span, &mut memo)?;
                buf.extend_from_slice(&part.tail);
                buf.extend_from_slice(&resource.tail);
                buf.push(b'\n');
            }
        }
        return Ok(());
    }
    if scopes.is_empty() {
        return Ok(());
    }
    buf.extend_from_slice(&resource.head);
    for (i, (_, part, list)) in scopes.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        buf.extend_from_slice(&part.head);
        for (j, span) in list.iter().enumerate() {
            if j > 0 {
                buf.push(b',');
            }
            write_span(buf, span, &mut memo)?;
        }
        buf.extend_from_slice(&part.tail);
    }
    buf.extend_from_slice(&resource.tail);
    buf.push(b'\n');
    Ok(())
}

/// A double: a JSON number, or the proto3 string of a non-finite one.
fn double(buf: &mut Vec<u8>, v: f64) -> Result<(), serde_json::Error> {
    serde_into(buf, &v)
}

/// The trace state header as a JSON string (`""` without one, the
/// common case, without building the header).
fn trace_state(buf: &mut Vec<u8>, cx: &SpanContext) -> Result<(), serde_json::Error> {
    if *cx.trace_state() == TraceState::NONE {
        buf.extend_from_slice(b"\"\"");
        Ok(())
    } else {
        string(buf, &cx.trace_state().header())
    }
}

/// The span's flags field: its trace flags, and whether its parent is
/// remote (the proto's `SpanFlags` masks).
fn flags(cx: &SpanContext, remote: bool) -> u64 {
    let mut f = u64::from(cx.trace_flags().to_u8()) | 0x100;
    if remote {
        f |= 0x200;
    }
    f
}

fn write_span(
    buf: &mut Vec<u8>,
    span: &SpanData,
    memo: &mut Memo,
) -> Result<(), serde_json::Error> {
    let cx = &span.span_context;
    ids(buf, cx.trace_id().to_bytes(), cx.span_id().to_bytes());
    trace_state(buf, cx)?;
    match span.parent_span_id {
        SpanId::INVALID => buf.extend_from_slice(b",\"parentSpanId\":\"\""),
        id => {
            buf.extend_from_slice(b",\"parentSpanId\":");
            hex::<8, 18>(buf, id.to_bytes());
        }
    }
    // the common flags as one piece with the fields around them
    match flags(cx, span.parent_span_is_remote) {
        0x100 => buf.extend_from_slice(b",\"flags\":256,\"name\":"),
        0x101 => buf.extend_from_slice(b",\"flags\":257,\"name\":"),
        f => {
            buf.extend_from_slice(b",\"flags\":");
            uint(buf, f);
            buf.extend_from_slice(b",\"name\":");
        }
    }
    memo.string(buf, &span.name)?;
    buf.extend_from_slice(match span.span_kind {
        SpanKind::Internal => b",\"kind\":1,\"startTimeUnixNano\":",
        SpanKind::Server => b",\"kind\":2,\"startTimeUnixNano\":",
        SpanKind::Client => b",\"kind\":3,\"startTimeUnixNano\":",
        SpanKind::Producer => b",\"kind\":4,\"startTimeUnixNano\":",
        SpanKind::Consumer => b",\"kind\":5,\"startTimeUnixNano\":",
    });
    nanos(buf, span.start_time, memo);
    buf.extend_from_slice(b",\"endTimeUnixNano\":");
    nanos(buf, span.end_time, memo);
    buf.extend_from_slice(b",\"attributes\":");
    attributes(buf, &span.attributes, memo)?;
    // the common rest (nothing dropped, no events or links, status unset)
    // as one piece
    if span.dropped_attributes_count == 0
        && span.events.is_empty()
        && span.events.dropped_count == 0
        && span.links.is_empty()
        && span.links.dropped_count == 0
        && span.status == Status::Unset
    {
        buf.extend_from_slice(
            b",\"droppedAttributesCount\":0,\"events\":[],\"droppedEventsCount\":0,\
              \"links\":[],\"droppedLinksCount\":0,\"status\":{\"message\":\"\",\"code\":0}}",
        );
        return Ok(());
    }
    buf.extend_from_slice(b",\"droppedAttributesCount\":");
    uint(buf, u64::from(span.dropped_attributes_count));
    buf.extend_from_slice(b",\"events\":[");
    for (i, e) in span.events.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        buf.extend_from_slice(b"{\"timeUnixNano\":");
        nanos(buf, e.timestamp, memo);
        buf.extend_from_slice(b",\"name\":");
        memo.string(buf, &e.name)?;
        buf.extend_from_slice(b",\"attributes\":");
        attributes(buf, &e.attributes, memo)?;
        buf.extend_from_slice(b",\"droppedAttributesCount\":");
        uint(buf, u64::from(e.dropped_attributes_count));
        buf.push(b'}');
    }
    buf.extend_from_slice(b"],\"droppedEventsCount\":");
    uint(buf, u64::from(span.events.dropped_count));
    buf.extend_from_slice(b",\"links\":[");
    for (i, l) in span.links.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        let lcx = &l.span_context;
        buf.extend_from_slice(b"{\"traceId\":");
        hex::<16, 34>(buf, lcx.trace_id().to_bytes());
        buf.extend_from_slice(b",\"spanId\":");
        hex::<8, 18>(buf, lcx.span_id().to_bytes());
        buf.extend_from_slice(b",\"traceState\":");
        trace_state(buf, lcx)?;
        buf.extend_from_slice(b",\"attributes\":");
        attributes(buf, &l.attributes, memo)?;
        buf.extend_from_slice(b",\"droppedAttributesCount\":");
        uint(buf, u64::from(l.dropped_attributes_count));
        buf.extend_from_slice(b",\"flags\":");
        uint(buf, flags(lcx, lcx.is_remote()));
        buf.push(b'}');
    }
    buf.extend_from_slice(b"],\"droppedLinksCount\":");
    uint(buf, u64::from(span.links.dropped_count));
    buf.extend_from_slice(b",\"status\":{\"message\":");
    match &span.status {
        Status::Error { description } => string(buf, description)?,
        _ => buf.extend_from_slice(b"\"\""),
    }
    buf.extend_from_slice(b",\"code\":");
    buf.push(match span.status {
        Status::Unset => b'0',
        Status::Ok => b'1',
        Status::Error { .. } => b'2',
    });
    buf.extend_from_slice(b"}}");
    Ok(())
}

/// `[{"key":…,"value":{…}}, …]`.
fn attributes(
    buf: &mut Vec<u8>,
    kvs: &[KeyValue],
    memo: &mut Memo,
) -> Result<(), serde_json::Error> {
    for (i, kv) in kvs.iter().enumerate() {
        buf.extend_from_slice(if i == 0 { b"[{\"key\":" } else { b",{\"key\":" });
        memo.string(buf, kv.key.as_str())?;
        if let Value::I64(v) = kv.value {
            // the common value, its field names in one piece
            buf.extend_from_slice(b",\"value\":{\"intValue\":\"");
            int(buf, v);
            buf.extend_from_slice(b"\"}}");
        } else {
            buf.extend_from_slice(b",\"value\":");
            value(buf, &kv.value)?;
            buf.push(b'}');
        }
    }
    buf.extend_from_slice(if kvs.is_empty() { b"[]" } else { b"]" });
    Ok(())
}

/// An `AnyValue`: `{"stringValue":…}`, `{"intValue":"…"}`, ….
fn value(buf: &mut Vec<u8>, v: &Value) -> Result<(), serde_json::Error> {
    match v {
        Value::Bool(b) => buf.extend_from_slice(match b {
            true => b"{\"boolValue\":true}",
            false => b"{\"boolValue\":false}",
        }),
        Value::I64(i) => int_value(buf, *i),
        Value::F64(f) => double_value(buf, *f)?,
        Value::String(s) => {
            buf.extend_from_slice(b"{\"stringValue\":");
            string(buf, s.as_str())?;
            buf.push(b'}');
        }
        Value::Array(a) => {
            buf.extend_from_slice(b"{\"arrayValue\":{\"values\":[");
            let mut first = true;
            let mut sep = |buf: &mut Vec<u8>| {
                if !std::mem::take(&mut first) {
                    buf.push(b',');
                }
            };
            match a {
                Array::Bool(vs) => vs.iter().for_each(|b| {
                    sep(buf);
                    buf.extend_from_slice(match b {
                        true => b"{\"boolValue\":true}",
                        false => b"{\"boolValue\":false}",
                    })
                }),
                Array::I64(vs) => vs.iter().for_each(|i| {
                    sep(buf);
                    int_value(buf, *i)
                }),
                Array::F64(vs) => {
                    for f in vs {
                        sep(buf);
                        double_value(buf, *f)?;
                    }
                }
                Array::String(vs) => {
                    for s in vs {
                        sep(buf);
                        buf.extend_from_slice(b"{\"stringValue\":");
                        string(buf, s.as_str())?;
                        buf.push(b'}');
                    }
                }
                // a kind added after this was written: the serde path
                other => {
                    buf.truncate(buf.len() - b"{\"arrayValue\":{\"values\":[".len());
                    return serde_into(buf, &AnyValue::from(Value::Array(other.clone())));
                }
            }
            buf.extend_from_slice(b"]}}");
        }
        // a kind added after this was written: the serde path
        other => serde_into(buf, &AnyValue::from(other.clone()))?,
    }
    Ok(())
}

fn int_value(buf: &mut Vec<u8>, i: i64) {
    buf.extend_from_slice(b"{\"intValue\":\"");
    int(buf, i);
    buf.extend_from_slice(b"\"}");
}

fn double_value(buf: &mut Vec<u8>, f: f64) -> Result<(), serde_json::Error> {
    buf.extend_from_slice(b"{\"doubleValue\":");
    double(buf, f)?;
    buf.push(b'}');
    Ok(())
}
