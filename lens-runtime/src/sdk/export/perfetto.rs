//! `NEMO_LENS_EXPORTER=perfetto`: spans written straight into a native
//! Perfetto trace, `<run>-rank<N>.pftrace`, through the same batch processor
//! and file sink as the JSON-lines exporter (whole batches or nothing, mode
//! 0600, failures counted).
//!
//! * One process track per rank, named `rank N @ host` (from the resource),
//!   and under it as many `spans` thread tracks as overlapping spans need
//!   (the lane packing `lens perfetto` uses: slices on a track always nest).
//! * Each span is a slice (BEGIN at its start, END at its end) with its
//!   attributes, trace id and span id as debug annotations; ERROR spans carry
//!   `status` and `status.message`.
//! * Files rotate by size: once a file holds `NEMO_LENS_PERFETTO_MAX_BYTES`
//!   (default 256 MiB) the next batch opens `<run>-rank<N>.1.pftrace`, then
//!   `.2.pftrace`, …; every file is a complete trace on its own (its own
//!   track descriptors, no interning), because very large traces do not
//!   load in the Perfetto UI.
//! * Track uuids derive from the run id and rank, so the files of all ranks
//!   concatenate into one valid trace (`lens perfetto --merge DIR`).

use super::hex::HEX;
use crate::sdk::export::sink::{EncodedBatch, Sink};
use lens_perfetto::packing::Packing;
use lens_perfetto::proto::{
    ProcessDescriptor, ThreadDescriptor, TracePacket, TrackDescriptor,
    SEQ_INCREMENTAL_STATE_CLEARED, TYPE_SLICE_BEGIN, TYPE_SLICE_END,
};
use opentelemetry::{Array, Value};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use prost::Message;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use wire::Varint;

/// The rotating `.pftrace` files of one process.
pub(crate) struct PerfettoFiles {
    /// `<dir>/<run>-rank<N>` (the first file adds `.pftrace`, later ones
    /// `.<k>.pftrace`).
    stem: PathBuf,
    max_bytes: u64,
    state: Mutex<Files>,
}

impl fmt::Debug for PerfettoFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PerfettoFiles")
            .field("stem", &self.stem)
            .field("max_bytes", &self.max_bytes)
            .finish()
    }
}

struct Files {
    sink: Arc<Sink>,
    /// Rotation index of the open file (0: `<stem>.pftrace`).
    index: u32,
    /// Bytes written to the open file.
    written: u64,
    /// Per thread-track lane, whether the open file holds its descriptor.
    described: Vec<bool>,
    /// Whether the open file holds the process descriptor.
    process_described: bool,
    packing: Packing,
    /// The encoding buffer, kept from one batch to the next (at most
    /// [`KEEP_BUFFER`] bytes of it).
    buf: Vec<u8>,
    /// Scratch space for one `TrackEvent`.
    event: Vec<u8>,
}

/// The path of rotation `index` of `stem`.
pub(crate) fn rotated(stem: &Path, index: u32) -> PathBuf {
    let mut name = stem.as_os_str().to_owned();
    if index > 0 {
        name.push(format!(".{index}"));
    }
    name.push(".pftrace");
    PathBuf::from(name)
}

impl PerfettoFiles {
    /// Opens the first file, `<stem>.pftrace`.
    pub(crate) fn open(stem: PathBuf, max_bytes: u64) -> std::io::Result<Arc<Self>> {
        let sink = Sink::file(&rotated(&stem, 0))?;
        Ok(Arc::new(PerfettoFiles {
            stem,
            max_bytes,
            state: Mutex::new(Files {
                sink,
                index: 0,
                written: 0,
                described: Vec::new(),
                process_described: false,
                packing: Packing::default(),
                buf: Vec::new(),
                event: Vec::new(),
            }),
        }))
    }

    /// The first file's path.
    pub(crate) fn path(&self) -> PathBuf {
        rotated(&self.stem, 0)
    }

    /// Spans dropped because a write failed, over every file.
    pub(crate) fn dropped_records(&self) -> u64 {
        let f = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f.sink.dropped_records()
    }
}

/// The span exporter writing into [`PerfettoFiles`].
#[derive(Debug)]
pub(crate) struct PerfettoExporter {
    files: Arc<PerfettoFiles>,
    process: Process,
}

/// The process track of this rank.
#[derive(Debug, Clone)]
struct Process {
    uuid: u64,
    pid: i32,
    name: String,
    sequence: u32,
}

impl Process {
    fn new(run_id: &str, rank: u32, host: &str) -> Self {
        // FNV-1a over run and rank: the same on every start of this rank,
        // different between ranks, so the files of a run concatenate.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in run_id.bytes().chain(rank.to_le_bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        Process {
            uuid: h & !0xffff, // the low 16 bits number the lanes
            pid: i32::try_from(rank).map_or(i32::MAX, |r| r.saturating_add(1)),
            name: format!("rank {rank} @ {host}"),
            sequence: (h >> 33) as u32 | 1,
        }
    }
}

impl PerfettoExporter {
    /// An exporter for `rank` of run `run_id` on `host`.
    pub(crate) fn new(files: Arc<PerfettoFiles>, run_id: &str, rank: u32, host: &str) -> Self {
        PerfettoExporter {
            files,
            process: Process::new(run_id, rank, host),
        }
    }
}

fn ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The protobuf wire format, written by hand: the bytes prost writes for
/// the same message (fields in tag order, optional fields present when
/// set), without building one.
mod wire {
    /// The bytes of `v` as a varint.
    #[inline]
    pub(super) fn varint_len(v: u64) -> usize {
        // 1 + one byte per 7 bits above the first 7
        (((v | 1).leading_zeros() ^ 63) as usize * 9 + 73) / 64
    }

    /// Appends `v` as a varint.
    #[inline]
    pub(super) fn varint(buf: &mut Vec<u8>, v: u64) {
        if v < 0x80 {
            buf.push(v as u8);
        } else {
            Varint::new(v).put(buf);
        }
    }

    /// A varint, encoded once and appended where needed (a sequence id or
    /// track uuid written in every packet).
    #[derive(Debug, Clone, Copy)]
    pub(super) struct Varint {
        bytes: [u8; 16],
        len: usize,
    }

    impl Varint {
        /// Builds the varint in a register without a loop: the seven-bit
        /// groups spread one to a byte, the continuation bits set on all
        /// but the last byte.
        #[inline]
        pub(super) fn new(v: u64) -> Self {
            let len = varint_len(v);
            let mut word = 0u128;
            for i in 0..10 {
                word |= u128::from((v >> (7 * i)) & 0x7f) << (8 * i);
            }
            let more = (1u128 << (8 * (len - 1))) - 1;
            word |= more & 0x8080_8080_8080_8080_8080;
            Varint {
                bytes: word.to_le_bytes(),
                len,
            }
        }

        /// Its length in bytes.
        #[inline]
        pub(super) fn len(&self) -> usize {
            self.len
        }

        /// Appends it: one fixed-size copy, cut to length.
        #[inline]
        pub(super) fn put(&self, buf: &mut Vec<u8>) {
            let len = buf.len() + self.len;
            buf.extend_from_slice(&self.bytes);
            buf.truncate(len);
        }
    }

    /// A field key of a one-byte tag (`tag` < 16).
    #[inline]
    pub(super) const fn key(tag: u8, wire_type: u8) -> u8 {
        tag << 3 | wire_type
    }

    pub(super) const VARINT: u8 = 0;
    pub(super) const FIXED64: u8 = 1;
    pub(super) const BYTES: u8 = 2;

    /// A length-delimited field of a one-byte tag.
    #[inline]
    pub(super) fn bytes(buf: &mut Vec<u8>, tag: u8, v: &[u8]) {
        buf.push(key(tag, BYTES));
        varint(buf, v.len() as u64);
        buf.extend_from_slice(v);
    }

    /// The bytes of [`bytes`] for `len` bytes of content.
    #[inline]
    pub(super) fn bytes_len(len: usize) -> usize {
        1 + varint_len(len as u64) + len
    }
}

/// `bytes` in lowercase hex (what `TraceId`/`SpanId` display as) into
/// `out` (twice as long).
fn hex(out: &mut [u8], bytes: &[u8]) {
    for (pair, &b) in out.chunks_exact_mut(2).zip(bytes) {
        pair.copy_from_slice(&HEX[usize::from(b)]);
    }
}

/// The annotations `trace_id` and `span_id` (their ids in hex), written
/// as one fixed-size block each: the bytes [`annotation`] writes for them.
fn id_annotations(event: &mut Vec<u8>, trace_id: [u8; 16], span_id: [u8; 8]) {
    use wire::{key, BYTES};
    // field 4 { field 6: 32 hex digits, field 10: "trace_id" }
    let mut t = [0u8; 46];
    t[..4].copy_from_slice(&[key(4, BYTES), 44, key(6, BYTES), 32]);
    hex(&mut t[4..36], &trace_id);
    t[36..].copy_from_slice(b"\x52\x08trace_id");
    // field 4 { field 6: 16 hex digits, field 10: "span_id" }
    let mut s = [0u8; 29];
    s[..4].copy_from_slice(&[key(4, BYTES), 27, key(6, BYTES), 16]);
    hex(&mut s[4..20], &span_id);
    s[20..].copy_from_slice(b"\x52\x07span_id");
    event.extend_from_slice(&t);
    event.extend_from_slice(&s);
}

/// The value of a `DebugAnnotation`: the field it takes.
enum Note<'a> {
    Bool(bool),
    Int(i64),
    Double(f64),
    Str(&'a [u8]),
}

/// Appends a `TrackEvent.debug_annotations` entry (field 4):
/// `DebugAnnotation { <value>, name }`.
fn annotation(ev: &mut Vec<u8>, name: &str, value: Note<'_>) {
    use wire::{bytes, bytes_len, key, varint, varint_len, BYTES, FIXED64, VARINT};
    let value_len = match value {
        Note::Bool(_) => 2,
        Note::Int(i) => 1 + varint_len(i as u64),
        Note::Double(_) => 9,
        Note::Str(s) => bytes_len(s.len()),
    };
    ev.push(key(4, BYTES));
    varint(ev, (value_len + bytes_len(name.len())) as u64);
    match value {
        Note::Bool(b) => ev.extend_from_slice(&[key(2, VARINT), u8::from(b)]),
        Note::Int(i) => {
            ev.push(key(4, VARINT));
            varint(ev, i as u64);
        }
        Note::Double(d) => {
            ev.push(key(5, FIXED64));
            ev.extend_from_slice(&d.to_le_bytes());
        }
        Note::Str(s) => bytes(ev, 6, s),
    }
    bytes(ev, 10, name.as_bytes());
}

/// An attribute's annotation: scalars as themselves, a string array as
/// `[a, b]`, any other value as its display form.
fn attribute(ev: &mut Vec<u8>, name: &str, value: &Value) {
    match value {
        Value::Bool(b) => annotation(ev, name, Note::Bool(*b)),
        Value::I64(i) => annotation(ev, name, Note::Int(*i)),
        Value::F64(f) => annotation(ev, name, Note::Double(*f)),
        Value::String(s) => annotation(ev, name, Note::Str(s.as_str().as_bytes())),
        Value::Array(Array::String(v)) => {
            let items: Vec<&str> = v.iter().map(|s| s.as_str()).collect();
            let s = format!("[{}]", items.join(", "));
            annotation(ev, name, Note::Str(s.as_bytes()));
        }
        other => annotation(ev, name, Note::Str(other.to_string().as_bytes())),
    }
}

/// Appends `Trace.packet` (field 1) with `TracePacket { timestamp,
/// trusted_packet_sequence_id, track_event }`, the event's fields already
/// encoded in `event`.
fn event_packet(buf: &mut Vec<u8>, sequence: &Varint, ts: u64, event: &[u8]) {
    use wire::{key, varint, varint_len, BYTES, VARINT};
    let ts = Varint::new(ts);
    let len = 1 + ts.len() + 1 + sequence.len() + 1 + varint_len(event.len() as u64) + event.len();
    buf.push(key(1, BYTES));
    varint(buf, len as u64);
    buf.push(key(8, VARINT));
    ts.put(buf);
    buf.push(key(10, VARINT));
    sequence.put(buf);
    buf.push(key(11, BYTES));
    varint(buf, event.len() as u64);
    buf.extend_from_slice(event);
}

/// Appends the slice END packet at `ts` on `track`: `TracePacket {
/// timestamp, trusted_packet_sequence_id, track_event { type, track_uuid }
/// }`.
fn slice_end(buf: &mut Vec<u8>, sequence: &Varint, ts: u64, track: &Varint) {
    use wire::{key, BYTES, VARINT};
    let ts = Varint::new(ts);
    let event_len = 3 + track.len();
    // under 128 bytes: one-byte lengths
    let len = 1 + ts.len() + 1 + sequence.len() + 2 + event_len;
    buf.extend_from_slice(&[key(1, BYTES), len as u8, key(8, VARINT)]);
    ts.put(buf);
    buf.push(key(10, VARINT));
    sequence.put(buf);
    buf.extend_from_slice(&[
        key(11, BYTES),
        event_len as u8,
        key(9, VARINT),
        TYPE_SLICE_END as u8,
        key(11, VARINT),
    ]);
    track.put(buf);
}

/// Appends the slice BEGIN and END packets of `s` on `track`: its
/// attributes, trace id and span id (and an ERROR status) as debug
/// annotations, then type, track and name (`TrackEvent` fields 4, 9, 11,
/// 23). `event` is scratch space.
fn slice(
    buf: &mut Vec<u8>,
    event: &mut Vec<u8>,
    sequence: &Varint,
    track: &Varint,
    (start, end): (u64, u64),
    s: &SpanData,
) {
    use wire::{key, varint, VARINT};
    event.clear();
    for kv in &s.attributes {
        attribute(event, kv.key.as_str(), &kv.value);
    }
    let sc = &s.span_context;
    id_annotations(event, sc.trace_id().to_bytes(), sc.span_id().to_bytes());
    if let opentelemetry::trace::Status::Error { description } = &s.status {
        annotation(event, "status", Note::Str(b"ERROR"));
        annotation(event, "status.message", Note::Str(description.as_bytes()));
    }
    event.extend_from_slice(&[key(9, VARINT), TYPE_SLICE_BEGIN as u8, key(11, VARINT)]);
    track.put(event);
    // field 23: a two-byte key
    event.extend_from_slice(&[0xba, 0x01]);
    varint(event, s.name.len() as u64);
    event.extend_from_slice(s.name.as_bytes());
    event_packet(buf, sequence, start, event);
    slice_end(buf, sequence, end, track);
}

/// Appends `packet` as one `Trace.packet` field.
fn push(buf: &mut Vec<u8>, packet: &TracePacket) {
    buf.push(0x0a);
    // encoding into a Vec cannot fail (it grows as needed)
    let _ = packet.encode_length_delimited(buf);
}

/// The largest encoding buffer kept between batches.
const KEEP_BUFFER: usize = 4 << 20;

/// The largest event scratch space kept between batches.
const KEEP_EVENT: usize = 64 << 10;

impl Files {
    /// Starts the next file when the open one is full.
    fn rotate_if_full(&mut self, stem: &Path, max_bytes: u64) -> std::io::Result<()> {
        if self.written < max_bytes {
            return Ok(());
        }
        let next = self.index + 1;
        self.sink = Sink::file(&rotated(stem, next))?;
        self.index = next;
        self.written = 0;
        self.described.clear();
        self.process_described = false;
        Ok(())
    }

    /// Encodes `spans` for the open file into `buf` (cleared first).
    fn encode(&mut self, p: &Process, spans: &[SpanData], buf: &mut Vec<u8>) {
        buf.clear();
        buf.reserve(spans.len() * 176);
        if !self.process_described {
            self.process_described = true;
            push(
                buf,
                &TracePacket {
                    trusted_packet_sequence_id: Some(p.sequence),
                    first_packet_on_sequence: Some(true),
                    sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
                    track_descriptor: Some(TrackDescriptor {
                        uuid: Some(p.uuid),
                        process: Some(ProcessDescriptor {
                            pid: Some(p.pid),
                            cmdline: vec![format!("pid={}", std::process::id())],
                            process_name: Some(p.name.clone()),
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            );
        }
        let mut event = std::mem::take(&mut self.event);
        let sequence = Varint::new(u64::from(p.sequence));
        for s in spans {
            let (start, end) = (ns(s.start_time), ns(s.end_time));
            let lane = self.packing.lane(0, 0, start, end.max(start));
            let track = p.uuid | (lane as u64 + 1).min(0xffff);
            if self.described.len() <= lane {
                self.described.resize(lane + 1, false);
            }
            if !std::mem::replace(&mut self.described[lane], true) {
                let tid = i32::try_from(lane + 1).unwrap_or(i32::MAX);
                push(
                    buf,
                    &TracePacket {
                        trusted_packet_sequence_id: Some(p.sequence),
                        track_descriptor: Some(TrackDescriptor {
                            uuid: Some(track),
                            parent_uuid: Some(p.uuid),
                            thread: Some(ThreadDescriptor {
                                pid: Some(p.pid),
                                tid: Some(tid),
                                thread_name: Some(match lane {
                                    0 => "spans".to_owned(),
                                    n => format!("spans ({})", n + 1),
                                }),
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                );
            }
            let track = Varint::new(track);
            slice(
                buf,
                &mut event,
                &sequence,
                &track,
                (start, end.max(start)),
                s,
            );
        }
        // a span with huge attributes does not keep its space
        if event.capacity() <= KEEP_EVENT {
            self.event = event;
        }
    }
}

impl SpanExporter for PerfettoExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        if batch.is_empty() {
            return Ok(());
        }
        let files = &self.files;
        let mut f = files.state.lock().unwrap_or_else(|e| e.into_inner());
        let records = batch.len() as u64;
        if let Err(e) = f.rotate_if_full(&files.stem, files.max_bytes) {
            return Err(f.sink.drop_batch(records, &e));
        }
        let mut buf = std::mem::take(&mut f.buf);
        f.encode(&self.process, &batch, &mut buf);
        let len = buf.len() as u64;
        let out = EncodedBatch { buf, records };
        let result = f.sink.write(&out);
        if out.buf.capacity() <= KEEP_BUFFER {
            f.buf = out.buf;
        }
        result?;
        f.written += len;
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }

    fn set_resource(&mut self, _resource: &Resource) {}
}

/// The JSON lines file path without its `.otlp.jsonl` / `.jsonl` ending: where the
/// `perfetto` exporter's `.pftrace` files go.
pub(crate) fn stem(json_path: &Path) -> PathBuf {
    let s = json_path.to_string_lossy();
    let stem = s
        .strip_suffix(".otlp.jsonl")
        .or_else(|| s.strip_suffix(".jsonl"))
        .unwrap_or(&s);
    PathBuf::from(stem)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lens_perfetto::proto::{DebugAnnotation, TrackEvent};
    use opentelemetry::trace::{
        SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
    };
    use opentelemetry::{InstrumentationScope, KeyValue};
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};

    /// The prost encoding of a span that the exporter wrote before the hand
    /// encoder (the reference the hand encoder must match byte for byte).
    fn reference(sequence: u32, track: u64, (start, end): (u64, u64), s: &SpanData) -> Vec<u8> {
        fn note(name: &str, value: &Value) -> DebugAnnotation {
            let mut a = DebugAnnotation {
                name: Some(name.to_owned()),
                ..Default::default()
            };
            match value {
                Value::Bool(b) => a.bool_value = Some(*b),
                Value::I64(i) => a.int_value = Some(*i),
                Value::F64(f) => a.double_value = Some(*f),
                Value::String(s) => a.string_value = Some(s.as_str().to_owned()),
                Value::Array(Array::String(v)) => {
                    let items: Vec<&str> = v.iter().map(|s| s.as_str()).collect();
                    a.string_value = Some(format!("[{}]", items.join(", ")));
                }
                other => a.string_value = Some(other.to_string()),
            }
            a
        }
        let mut notes: Vec<DebugAnnotation> = s
            .attributes
            .iter()
            .map(|kv| note(kv.key.as_str(), &kv.value))
            .collect();
        let sc = &s.span_context;
        notes.push(note("trace_id", &Value::from(sc.trace_id().to_string())));
        notes.push(note("span_id", &Value::from(sc.span_id().to_string())));
        if let Status::Error { description } = &s.status {
            notes.push(note("status", &Value::from("ERROR")));
            notes.push(note(
                "status.message",
                &Value::from(description.to_string()),
            ));
        }
        let packet = |event, ts| TracePacket {
            timestamp: Some(ts),
            trusted_packet_sequence_id: Some(sequence),
            track_event: Some(event),
            ..Default::default()
        };
        let mut buf = Vec::new();
        push(
            &mut buf,
            &packet(
                TrackEvent {
                    r#type: Some(TYPE_SLICE_BEGIN),
                    track_uuid: Some(track),
                    name: Some(s.name.to_string()),
                    debug_annotations: notes,
                    ..Default::default()
                },
                start,
            ),
        );
        push(
            &mut buf,
            &packet(
                TrackEvent {
                    r#type: Some(TYPE_SLICE_END),
                    track_uuid: Some(track),
                    ..Default::default()
                },
                end,
            ),
        );
        buf
    }

    fn span(i: u64) -> SpanData {
        let statuses = [
            Status::Unset,
            Status::Ok,
            Status::error("bad \"thing\"\n\u{1}é"),
        ];
        let mut attributes = vec![
            KeyValue::new("b", i.is_multiple_of(2)),
            KeyValue::new("i", -(i as i64) * 1_000_000_007),
            KeyValue::new("imax", i64::MIN),
            KeyValue::new("f", 1.0 / (i as f64 + 3.0)),
            KeyValue::new("nan", f64::NAN),
            KeyValue::new("s", "plain ü"),
            KeyValue::new("empty", ""),
            KeyValue::new("ab", Value::Array(Array::Bool(vec![true, false]))),
            KeyValue::new("ai", Value::Array(Array::I64(vec![1, -2, i64::MAX]))),
            KeyValue::new(
                "as",
                Value::Array(Array::String(vec!["x".into(), "\"".into()])),
            ),
        ];
        // strings past one-byte lengths: an annotation, then the event
        // and the packet past 127 and 16,383 bytes
        attributes.truncate(if i == 3 { 0 } else { attributes.len() });
        attributes.push(KeyValue::new("long", "x".repeat((i as usize * 37) % 300)));
        if i == 7 {
            attributes.push(KeyValue::new("huge", "y".repeat(20_000)));
        }
        SpanData {
            span_context: SpanContext::new(
                TraceId::from(0xabcdef_u128 << (i * 4)),
                SpanId::from(u64::MAX - i),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: format!("s{i} \"q\"\t{}", "n".repeat(i as usize * 20)).into(),
            start_time: UNIX_EPOCH + Duration::from_nanos(i * 1_000_003),
            end_time: UNIX_EPOCH + Duration::from_nanos(i * 1_000_003 + 77),
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: statuses[i as usize % 3].clone(),
            instrumentation_scope: InstrumentationScope::builder("t").build(),
        }
    }

    /// The hand encoder writes the bytes prost wrote for the same span.
    #[test]
    fn the_hand_encoder_matches_prost() {
        let mut event = Vec::new();
        for i in 0..12 {
            let s = span(i);
            let times = (ns(s.start_time), ns(s.end_time));
            for (sequence, track) in [(1, 1), (u32::MAX, u64::MAX), (0x1234_5679, 0xfedc_0003)] {
                let mut got = vec![7]; // appends after what is there
                let (seq, trk) = (Varint::new(u64::from(sequence)), Varint::new(track));
                slice(&mut got, &mut event, &seq, &trk, times, &s);
                let want = reference(sequence, track, times, &s);
                assert_eq!(got[0], 7);
                assert!(got[1..] == want[..], "span {i}, track {track}");
            }
        }
    }

    /// Varints as prost writes them, at every length.
    #[test]
    fn varints_match_prost() {
        let mut values = vec![0, 1, 127, 128, 16_383, 16_384, u64::MAX >> 1, u64::MAX];
        values.extend((0..64).flat_map(|b| [1u64 << b, (1u64 << b) - 1, (1 << b) | 0x55]));
        for v in values {
            let mut got = vec![9];
            wire::varint(&mut got, v);
            let mut want = vec![9];
            prost::encoding::encode_varint(v, &mut want);
            assert_eq!(got, want, "{v}");
            assert_eq!(got.len() - 1, wire::varint_len(v), "{v}");
        }
    }
}
