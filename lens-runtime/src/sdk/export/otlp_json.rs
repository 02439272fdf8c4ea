//! OTLP/JSON for spans, written straight from `SpanData` into one reusable
//! buffer: no `opentelemetry_proto` message built per span, no serde pass
//! over it. The output is the one the serde path of `file.rs` writes
//! (the same fields in the same order, ids in lowercase hex, times and
//! integers as strings, non-finite doubles as the proto3 strings); a test
//! compares the two on the same spans after parsing. The parts shared by
//! every span of a batch (the resource, each scope) are encoded once, by
//! the serde path, and copied.

use super::hex::HEX;
use crate::sdk::export::proto3;
use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceState};
use opentelemetry::{Array, InstrumentationScope, KeyValue, Value};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::AnyValue;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans};
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_sdk::trace::SpanData;
use serde::Serialize;
use std::time::{SystemTime, UNIX_EPOCH};

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

/// An id of `N` bytes as a JSON string of lowercase hex (`Q` = 2N + 2
/// bytes with the quotes), one fixed-size append.
fn hex<const N: usize, const Q: usize>(buf: &mut Vec<u8>, bytes: [u8; N]) {
    let mut out = [b'"'; Q];
    for (pair, b) in out[1..Q - 1].chunks_exact_mut(2).zip(bytes) {
        pair.copy_from_slice(&HEX[usize::from(b)]);
    }
    buf.extend_from_slice(&out);
}

/// `{"traceId":"<hex>","spanId":"<hex>","traceState":`, one fixed-size
/// append.
fn ids(buf: &mut Vec<u8>, trace_id: [u8; 16], span_id: [u8; 8]) {
    const HEAD: &[u8; 87] =
        b"{\"traceId\":\"________________________________\",\"spanId\":\"________________\",\"traceState\":";
    let mut out = *HEAD;
    for (pair, b) in out[12..44].chunks_exact_mut(2).zip(trace_id) {
        pair.copy_from_slice(&HEX[usize::from(b)]);
    }
    for (pair, b) in out[56..72].chunks_exact_mut(2).zip(span_id) {
        pair.copy_from_slice(&HEX[usize::from(b)]);
    }
    buf.extend_from_slice(&out);
}

/// Whether `s` needs no escape in a JSON string (serde_json escapes the
/// control characters, `"`, `\\` and DEL). No early exit: the loop
/// vectorizes, and most strings are clean.
fn clean(s: &[u8]) -> bool {
    !s.iter().fold(false, |bad, &b| {
        bad | (b < 0x20) | (b == b'"') | (b == b'\\') | (b == 0x7f)
    })
}

/// A JSON string (serde_json's escaping).
fn string(buf: &mut Vec<u8>, s: &str) -> Result<(), serde_json::Error> {
    if clean(s.as_bytes()) {
        quoted(buf, s);
        Ok(())
    } else {
        serde_json::to_writer(buf, s)
    }
}

/// `s`, known clean, between quotes.
fn quoted(buf: &mut Vec<u8>, s: &str) {
    buf.reserve(s.len() + 2);
    buf.push(b'"');
    buf.extend_from_slice(s.as_bytes());
    buf.push(b'"');
}

/// The decimal digits of each number below 100.
const DECIMAL: [[u8; 2]; 100] = {
    let mut t = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        t[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    t
};

/// The eight decimal digits of `x` (below 10^8), zero-padded, as the
/// bytes of a little-endian word: four independent table lookups, kept in
/// a register.
#[inline]
fn eight(x: u32) -> u64 {
    let (hi, lo) = ((x / 10_000) as usize, (x % 10_000) as usize);
    let pair = |i: usize| u64::from(u16::from_le_bytes(DECIMAL[i]));
    pair(hi / 100) | pair(hi % 100) << 16 | pair(lo / 100) << 32 | pair(lo % 100) << 48
}

/// An unsigned integer in decimal, between `open` and `close` (each
/// written when not 0): three eight-digit blocks (one for a number below
/// 10^8), computed apart, and the significant digits appended.
#[inline]
fn digits(buf: &mut Vec<u8>, v: u64, open: u8, close: u8) {
    let count = v.checked_ilog10().unwrap_or(0) as usize + 1;
    let mut out = [0u8; 24];
    if v < 100_000_000 {
        out[16..].copy_from_slice(&eight(v as u32).to_le_bytes());
    } else {
        let (rest, low) = (v / 100_000_000, (v % 100_000_000) as u32);
        let (high, mid) = ((rest / 100_000_000) as u32, (rest % 100_000_000) as u32);
        out[..8].copy_from_slice(&eight(high).to_le_bytes());
        out[8..16].copy_from_slice(&eight(mid).to_le_bytes());
        out[16..].copy_from_slice(&eight(low).to_le_bytes());
    }
    if open != 0 {
        buf.push(open);
    }
    buf.extend_from_slice(&out[24 - count..]);
    if close != 0 {
        buf.push(close);
    }
}

/// An unsigned integer below 10^8 in decimal: its eight-digit block
/// shifted so that the significant digits come first (their count from
/// the leading zero digits), appended as one word and cut to length.
#[inline]
fn small(buf: &mut Vec<u8>, v: u32) {
    let word = eight(v);
    // a zero digit is a zero byte once `'0'` is taken from each
    let zeros = (word - 0x3030_3030_3030_3030).trailing_zeros() as usize / 8;
    let count = 8 - zeros.min(7);
    let len = buf.len() + count;
    buf.extend_from_slice(&(word >> (8 * (8 - count))).to_le_bytes());
    buf.truncate(len);
}

/// An unsigned integer in decimal.
fn uint(buf: &mut Vec<u8>, v: u64) {
    if v < 10 {
        buf.push(b'0' + v as u8);
    } else if v < 100_000_000 {
        small(buf, v as u32);
    } else {
        digits(buf, v, 0, 0);
    }
}

/// A signed integer in decimal.
fn int(buf: &mut Vec<u8>, v: i64) {
    if v < 0 {
        buf.push(b'-');
    }
    uint(buf, v.unsigned_abs());
}

/// What one batch's encoding remembers from span to span:
/// * the digits of the last time written above its last eight: the times
///   of a batch mostly share them (they change every 0.1 s), so most times
///   only compute their last eight digits;
/// * strings already found clean (no escape needed), by address and
///   length: a call site's name and attribute keys repeat span after span.
///   Only strings borrowed from the batch's spans are remembered: they all
///   live, unchanged, for the whole encoding, so an address and a length
///   name one content.
#[derive(Debug, Default)]
struct Memo {
    /// `nanos / 10^8` of the last time written (0: none yet).
    high: u64,
    /// `"` and its digits, then room: appended whole and cut to length.
    head: [u8; 24],
    /// The length of `"` and its digits.
    len: usize,
    /// (address, length) of strings found clean, the last four.
    clean: [(usize, usize); 4],
    /// Where the next one goes in `clean`.
    next: usize,
}

impl Memo {
    /// A JSON string of a string borrowed from the batch's spans (see
    /// [`Memo`]), its escape check skipped when it was done before.
    fn string(&mut self, buf: &mut Vec<u8>, s: &str) -> Result<(), serde_json::Error> {
        let key = (s.as_ptr() as usize, s.len());
        if !self.clean.contains(&key) {
            if !clean(s.as_bytes()) {
                return serde_json::to_writer(buf, s);
            }
            self.clean[self.next % 4] = key;
            self.next = self.next.wrapping_add(1);
        }
        quoted(buf, s);
        Ok(())
    }
}

/// Nanoseconds since the epoch as a JSON string (0 before the epoch).
fn nanos(buf: &mut Vec<u8>, t: SystemTime, memo: &mut Memo) {
    let n = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let (high, low) = (n / 100_000_000, (n % 100_000_000) as u32);
    if high == 0 {
        return digits(buf, n, b'"', b'"');
    }
    if high != memo.high {
        memo.high = high;
        let mut head = Vec::with_capacity(24);
        digits(&mut head, high, b'"', 0);
        memo.len = head.len();
        head.resize(24, 0);
        memo.head.copy_from_slice(&head);
    }
    // `"` and the high digits (fixed-size copy, cut), the low eight, `"`
    let len = buf.len() + memo.len;
    buf.extend_from_slice(&memo.head);
    buf.truncate(len);
    buf.extend_from_slice(&eight(low).to_le_bytes());
    buf.push(b'"');
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The integer, id and string writers against `format!` and
    /// serde_json, at every digit count and edge.
    #[test]
    fn numbers_ids_and_strings_match_the_std_forms() {
        let mut values = vec![0, 1, 9, 10, 99, 100, 101, u64::MAX, u64::MAX - 1];
        let mut p = 1u64;
        while let Some(q) = p.checked_mul(10) {
            values.extend([p - 1, p, p + 1, q - 1]);
            p = q;
        }
        for v in values {
            let mut b = vec![b'x'];
            uint(&mut b, v);
            assert_eq!(b, format!("x{v}").as_bytes());
            b.clear();
            digits(&mut b, v, b'"', b'"');
            assert_eq!(b, format!("\"{v}\"").as_bytes());
            let i = v as i64;
            b.clear();
            int(&mut b, i);
            assert_eq!(b, i.to_string().as_bytes());
        }
        // times: one cache over a sequence that changes its high digits
        let mut memo = Memo::default();
        let base = 1_796_000_000_099_999_990u64;
        let mut seq = vec![0, 5, 99_999_999, 100_000_000, 123_456_789_012, u64::MAX];
        seq.extend((0..40).map(|i| base + i * 3));
        seq.extend([base, 1, base + 100_000_000, 999_999_999, 1_000_000_000]);
        for n in seq {
            let t = UNIX_EPOCH + std::time::Duration::from_nanos(n);
            let mut b = Vec::new();
            nanos(&mut b, t, &mut memo);
            assert_eq!(b, format!("\"{n}\"").as_bytes(), "{n}");
        }
        let mut b = Vec::new();
        nanos(
            &mut b,
            UNIX_EPOCH - std::time::Duration::from_secs(1),
            &mut memo,
        );
        assert_eq!(b, b"\"0\"");
        let mut b = Vec::new();
        hex::<16, 34>(
            &mut b,
            0x0123_4567_89ab_cdef_fedc_ba98_7654_3210_u128.to_be_bytes(),
        );
        assert_eq!(b, b"\"0123456789abcdeffedcba9876543210\"");
        let mut cases: Vec<String> = [
            "", "plain", "é ü", "a\"b", "a\\b", "\u{0}", "\u{1f}", "\u{7f}", "\n",
        ]
        .map(String::from)
        .to_vec();
        // each bad byte, and the clean ones around them, at every place in
        // strings of 1 to 20 bytes
        for len in 1..=20 {
            for at in 0..len {
                for c in [
                    '\u{0}', '\u{1f}', ' ', '!', '"', '#', '\\', '[', ']', '~', '\u{7f}', 'é',
                ] {
                    let mut t = "x".repeat(len);
                    t.replace_range(at..=at, c.encode_utf8(&mut [0; 4]));
                    cases.push(t);
                }
            }
        }
        // and through the memo, twice each (the second from memory), the
        // strings all alive as in a batch
        let mut memo = Memo::default();
        for s in cases.iter().chain(&cases) {
            let s = s.as_str();
            let want = serde_json::to_vec(s).unwrap();
            let mut b = Vec::new();
            string(&mut b, s).unwrap();
            assert_eq!(b, want, "{s:?}");
            b.clear();
            memo.string(&mut b, s).unwrap();
            assert_eq!(b, want, "{s:?}");
        }
    }
}
