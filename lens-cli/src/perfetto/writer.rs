//! The Perfetto protobuf writer: `TracePacket`s streamed one by one on one
//! trusted sequence with interned names, process/thread/counter track
//! descriptors, slices as BEGIN/END pairs, flows on their own edges.

use std::io::Write;

use prost::encoding::{encode_key, encode_varint, WireType};
use prost::Message;
use rustc_hash::FxHashMap as HashMap;

use super::{each_point, flows, process_name, thread_name_of, thread_of, TwoPass, REMOTE_PARENT};
use crate::input::otlp::{span_id_u64, KeyValue, Metric, Span};
use crate::input::{Origin, Sink};
use lens_perfetto::packing::Packing;
use lens_perfetto::proto::{self, DebugAnnotation, TracePacket, TrackDescriptor, TrackEvent};

/// The one packet sequence this writer uses.
const SEQUENCE: u32 = 1;
/// Names interned at most; later new names are written inline.
const MAX_INTERNED: u64 = 100_000;

/// Writes TracePackets as they come (`Trace.packet` is field 1, so the file
/// is a concatenation of tag, length and packet).
pub(super) struct ProtoSink<W: Write> {
    out: W,
    buf: Vec<u8>,
    first: bool,
    next_uuid: u64,
    processes: HashMap<i64, (u64, i32)>,
    threads: HashMap<(i64, i64, usize), u64>,
    packing: Packing,
    counters: HashMap<(i64, String), u64>,
    names: HashMap<String, u64>,
    keys: HashMap<String, u64>,
    error: Option<std::io::Error>,
    flows: flows::Flows,
    /// Second pass: only start the flows whose source spans were not known.
    second_pass: bool,
    /// The iid of the `span_id` annotation name, once interned.
    span_id_iid: Option<u64>,
    /// Reused per span: attribute key iids, flow ids.
    key_iids: Vec<Option<(u64, bool)>>,
    flow_ids: Vec<u64>,
}

impl<W: Write> ProtoSink<W> {
    pub(super) fn new(out: W) -> Self {
        ProtoSink {
            out,
            buf: Vec::with_capacity(4096),
            first: true,
            next_uuid: 1,
            processes: HashMap::default(),
            threads: HashMap::default(),
            packing: Packing::default(),
            counters: HashMap::default(),
            names: HashMap::default(),
            keys: HashMap::default(),
            error: None,
            flows: flows::Flows::default(),
            second_pass: false,
            span_id_iid: None,
            key_iids: Vec::new(),
            flow_ids: Vec::new(),
        }
    }

    fn emit(&mut self, mut p: TracePacket) {
        if self.error.is_some() {
            return;
        }
        p.trusted_packet_sequence_id = Some(SEQUENCE);
        if self.first {
            p.first_packet_on_sequence = Some(true);
            p.sequence_flags = Some(proto::SEQ_INCREMENTAL_STATE_CLEARED);
            self.first = false;
        } else if p.track_event.is_some() {
            p.sequence_flags = Some(proto::SEQ_NEEDS_INCREMENTAL_STATE);
        }
        self.buf.clear();
        self.buf.push(0x0a);
        if p.encode_length_delimited(&mut self.buf).is_ok() {
            if let Err(e) = self.out.write_all(&self.buf) {
                self.error = Some(e);
            }
        }
    }

    fn uuid(&mut self) -> u64 {
        self.next_uuid += 1;
        self.next_uuid
    }

    fn process(&mut self, o: &Origin) -> (u64, i32) {
        if let Some(&p) = self.processes.get(&o.rank) {
            return p;
        }
        let uuid = self.uuid();
        let pid = o
            .rank
            .checked_add(1)
            .and_then(|p| i32::try_from(p).ok())
            .unwrap_or(i32::MAX);
        self.processes.insert(o.rank, (uuid, pid));
        let cmdline = o.pid.map(|p| vec![format!("pid={p}")]).unwrap_or_default();
        self.emit(TracePacket {
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(uuid),
                process: Some(proto::ProcessDescriptor {
                    pid: Some(pid),
                    cmdline,
                    process_name: Some(process_name(o)),
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        (uuid, pid)
    }

    /// The track of lane `lane` of a span's thread (see [`Packing`]).
    fn thread(&mut self, o: &Origin, attrs: &[KeyValue<'_>], lane: usize) -> u64 {
        let tid = thread_of(attrs);
        let key = (o.rank, tid.unwrap_or(-1), lane);
        if let Some(&t) = self.threads.get(&key) {
            return t;
        }
        let (_, pid) = self.process(o);
        let uuid = self.uuid();
        let idx = self.threads.keys().filter(|(r, ..)| *r == o.rank).count() as i32;
        self.threads.insert(key, uuid);
        let mut name = match (thread_name_of(attrs), tid) {
            (Some(n), Some(t)) => format!("{n} ({t})"),
            (Some(n), None) => n.to_owned(),
            (None, Some(t)) => format!("thread {t}"),
            (None, None) => "spans".to_owned(),
        };
        if lane > 0 {
            name.push_str(&format!(" #{}", lane + 1));
        }
        self.emit(TracePacket {
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(uuid),
                thread: Some(proto::ThreadDescriptor {
                    pid: Some(pid),
                    tid: Some(pid.saturating_mul(1 << 12).saturating_add(idx + 1)),
                    thread_name: Some(name),
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        uuid
    }

    /// Interns `s` in `table` (names or annotation keys); returns the iid
    /// and whether it is new (and must be sent in this packet).
    fn intern(table: &mut HashMap<String, u64>, s: &str) -> Option<(u64, bool)> {
        if let Some(&iid) = table.get(s) {
            return Some((iid, false));
        }
        let iid = table.len() as u64 + 1;
        if iid > MAX_INTERNED {
            return None;
        }
        table.insert(s.to_owned(), iid);
        Some((iid, true))
    }

    fn span(&mut self, o: &Origin, s: &Span<'_>) {
        let tid = thread_of(&s.attributes).unwrap_or(-1);
        let end = s.end_time_unix_nano.max(s.start_time_unix_nano);
        let lane = self.packing.lane(o.rank, tid, s.start_time_unix_nano, end);
        let track = self.thread(o, &s.attributes, lane);
        let id = span_id_u64(&s.span_id);
        self.flows.saw(id);
        let mut flow_ids = std::mem::take(&mut self.flow_ids);
        flow_ids.clear();
        if s.flags & REMOTE_PARENT == REMOTE_PARENT {
            flow_ids.extend(self.flows.edge(span_id_u64(&s.parent_span_id), id));
        }
        for l in &s.links {
            flow_ids.extend(self.flows.edge(span_id_u64(&l.span_id), id));
        }
        if self.error.is_none() {
            // the track descriptors came first: never the first packet
            debug_assert!(!self.first);
            self.buf.clear();
            self.begin(s, id, track, &flow_ids);
            proto::encode_slice_end(&mut self.buf, SEQUENCE, end, track);
            if let Err(e) = self.out.write_all(&self.buf) {
                self.error = Some(e);
            }
        }
        self.flow_ids = flow_ids;
    }

    /// Appends the slice BEGIN packet of `s` to `buf`: the bytes prost
    /// writes for the equivalent [`TracePacket`] (see the tests), without
    /// building one.
    fn begin(&mut self, s: &Span<'_>, id: u64, track: u64, flow_ids: &[u64]) {
        // interned first, in the order the packet lists them: the name,
        // the attribute keys, then `span_id`
        let name = Self::intern(&mut self.names, &s.name);
        let mut keys = std::mem::take(&mut self.key_iids);
        keys.clear();
        for kv in s.attributes.iter().filter(|kv| kv.key != "thread.id") {
            keys.push(Self::intern(&mut self.keys, &kv.key));
        }
        let span_id_key = match self.span_id_iid {
            Some(iid) => Some((iid, false)),
            None => {
                let k = Self::intern(&mut self.keys, "span_id");
                self.span_id_iid = k.map(|(iid, _)| iid);
                k
            }
        };
        let buf = &mut self.buf;
        nested(buf, 1, |b| {
            field_varint(b, 8, s.start_time_unix_nano);
            field_varint(b, 10, u64::from(SEQUENCE));
            nested(b, 11, |b| {
                let attrs = s.attributes.iter().filter(|kv| kv.key != "thread.id");
                for (kv, key) in attrs.zip(&keys) {
                    nested(b, 4, |b| {
                        if let Some((iid, _)) = key {
                            field_varint(b, 1, *iid);
                        }
                        annotation_value(b, &kv.value);
                        if key.is_none() {
                            field_bytes(b, 10, kv.key.as_bytes());
                        }
                    });
                }
                nested(b, 4, |b| {
                    if let Some((iid, _)) = span_id_key {
                        field_varint(b, 1, iid);
                    }
                    field_varint(b, 7, id);
                });
                if s.status.code == 2 {
                    nested(b, 4, |b| {
                        field_bytes(b, 6, format!("ERROR {}", s.status.message).as_bytes());
                        field_bytes(b, 10, b"status");
                    });
                }
                field_varint(b, 9, proto::TYPE_SLICE_BEGIN as u64);
                if let Some((iid, _)) = name {
                    field_varint(b, 10, iid);
                }
                field_varint(b, 11, track);
                if name.is_none() {
                    field_bytes(b, 23, s.name.as_bytes());
                }
                for &f in flow_ids {
                    encode_key(48, WireType::SixtyFourBit, b);
                    b.extend_from_slice(&f.to_le_bytes());
                }
            });
            let new_name = matches!(name, Some((_, true)));
            let new_key = |k: &Option<(u64, bool)>| matches!(k, Some((_, true)));
            if new_name || keys.iter().any(new_key) || new_key(&span_id_key) {
                nested(b, 12, |b| {
                    if let Some((iid, true)) = name {
                        nested(b, 2, |b| {
                            field_varint(b, 1, iid);
                            field_bytes(b, 2, s.name.as_bytes());
                        });
                    }
                    let attrs = s.attributes.iter().filter(|kv| kv.key != "thread.id");
                    let named = attrs
                        .zip(&keys)
                        .map(|(kv, k)| (kv.key.as_ref(), *k))
                        .chain([("span_id", span_id_key)]);
                    for (key, k) in named {
                        if let Some((iid, true)) = k {
                            nested(b, 3, |b| {
                                field_varint(b, 1, iid);
                                field_bytes(b, 2, key.as_bytes());
                            });
                        }
                    }
                });
            }
            field_varint(b, 13, u64::from(proto::SEQ_NEEDS_INCREMENTAL_STATE));
        });
        self.key_iids = keys;
    }

    /// Second pass: an instant event at the start of a source span that
    /// starts its flows.
    fn flow_start(&mut self, o: &Origin, s: &Span<'_>) {
        let Some(flow_ids) = self.flows.take(span_id_u64(&s.span_id)) else {
            return;
        };
        let track = self.thread(o, &s.attributes, 0);
        self.emit(TracePacket {
            timestamp: Some(s.start_time_unix_nano),
            track_event: Some(TrackEvent {
                r#type: Some(proto::TYPE_INSTANT),
                track_uuid: Some(track),
                name: Some(format!("{} (flow source)", s.name)),
                flow_ids,
                ..Default::default()
            }),
            ..Default::default()
        });
    }

    fn counter(&mut self, o: &Origin, name: &str, t: u64, v: f64) {
        let key = (o.rank, name.to_owned());
        let uuid = match self.counters.get(&key) {
            Some(&u) => u,
            None => {
                let (parent, _) = self.process(o);
                let uuid = self.uuid();
                self.counters.insert(key, uuid);
                self.emit(TracePacket {
                    track_descriptor: Some(TrackDescriptor {
                        uuid: Some(uuid),
                        parent_uuid: Some(parent),
                        name: Some(name.to_owned()),
                        counter: Some(proto::CounterDescriptor {}),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
                uuid
            }
        };
        self.emit(TracePacket {
            timestamp: Some(t),
            track_event: Some(TrackEvent {
                r#type: Some(proto::TYPE_COUNTER),
                track_uuid: Some(uuid),
                double_counter_value: Some(v),
                ..Default::default()
            }),
            ..Default::default()
        });
    }

    pub(super) fn finish(mut self) -> std::io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()
    }
}

/// Appends field `tag` holding a message that `f` writes (its length is
/// reserved as one byte and widened when the message is longer).
#[inline]
fn nested(buf: &mut Vec<u8>, tag: u32, f: impl FnOnce(&mut Vec<u8>)) {
    encode_key(tag, WireType::LengthDelimited, buf);
    let at = buf.len();
    buf.push(0);
    f(buf);
    let len = buf.len() - at - 1;
    if len < 0x80 {
        buf[at] = len as u8;
    } else {
        let mut v = Vec::with_capacity(10);
        encode_varint(len as u64, &mut v);
        buf.splice(at..=at, v);
    }
}

#[inline]
fn field_varint(buf: &mut Vec<u8>, tag: u32, v: u64) {
    encode_key(tag, WireType::Varint, buf);
    encode_varint(v, buf);
}

#[inline]
fn field_bytes(buf: &mut Vec<u8>, tag: u32, v: &[u8]) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(v.len() as u64, buf);
    buf.extend_from_slice(v);
}

/// The value fields of [`value_annotation`], encoded.
fn annotation_value(buf: &mut Vec<u8>, v: &crate::input::otlp::AnyValue<'_>) {
    if let Some(s) = &v.string_value {
        field_bytes(buf, 6, s.as_bytes());
    } else if let Some(i) = v.int_value {
        field_varint(buf, 4, i as u64);
    } else if let Some(d) = v.double_value {
        encode_key(5, WireType::SixtyFourBit, buf);
        buf.extend_from_slice(&d.to_le_bytes());
    } else if let Some(b) = v.bool_value {
        field_varint(buf, 2, u64::from(b));
    } else {
        let a = value_annotation(v);
        field_bytes(buf, 6, a.string_value.unwrap_or_default().as_bytes());
    }
}

fn value_annotation(v: &crate::input::otlp::AnyValue<'_>) -> DebugAnnotation {
    use crate::input::otlp::Value;
    let mut a = DebugAnnotation::default();
    match v.to_value() {
        Value::Str(s) | Value::Other(s) => a.string_value = Some(s),
        Value::Int(i) => a.int_value = Some(i),
        Value::Double(d) => a.double_value = Some(d),
        Value::Bool(b) => a.bool_value = Some(b),
    }
    a
}

impl<W: Write> Sink for ProtoSink<W> {
    fn spans(&mut self, origin: &Origin, spans: &[Span<'_>]) {
        for s in spans {
            if self.second_pass {
                self.flow_start(origin, s);
            } else {
                self.span(origin, s);
            }
        }
    }

    fn file(&mut self, index: usize, path: &std::path::Path) {
        if !self.second_pass {
            self.flows.file(index, path);
        }
    }

    fn metrics(&mut self, origin: &Origin, metrics: &[Metric<'_>]) {
        if self.second_pass {
            return;
        }
        let mut pts = Vec::new();
        each_point(metrics, |n, t, v| pts.push((n.to_owned(), t, v)));
        for (n, t, v) in pts {
            self.counter(origin, &n, t, v);
        }
    }
}

impl<W: Write> TwoPass for ProtoSink<W> {
    fn flows(&mut self) -> &mut flows::Flows {
        &mut self.flows
    }

    fn begin_second_pass(&mut self) {
        self.second_pass = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Table = HashMap<String, u64>;

    /// The BEGIN packet as it was built with prost before the hand encoder.
    fn reference(
        names: &mut Table,
        keys: &mut Table,
        s: &Span<'_>,
        id: u64,
        track: u64,
        flows: &[u64],
    ) -> Vec<u8> {
        type Sink = ProtoSink<Vec<u8>>;
        let mut interned = proto::InternedData::default();
        let mut ev = TrackEvent {
            r#type: Some(proto::TYPE_SLICE_BEGIN),
            track_uuid: Some(track),
            ..Default::default()
        };
        match Sink::intern(names, &s.name) {
            Some((iid, new)) => {
                ev.name_iid = Some(iid);
                if new {
                    interned.event_names.push(proto::EventName {
                        iid: Some(iid),
                        name: Some(s.name.to_string()),
                    });
                }
            }
            None => ev.name = Some(s.name.to_string()),
        }
        for kv in s.attributes.iter().filter(|kv| kv.key != "thread.id") {
            let mut a = value_annotation(&kv.value);
            match Sink::intern(keys, &kv.key) {
                Some((iid, new)) => {
                    a.name_iid = Some(iid);
                    if new {
                        interned
                            .debug_annotation_names
                            .push(proto::DebugAnnotationName {
                                iid: Some(iid),
                                name: Some(kv.key.to_string()),
                            });
                    }
                }
                None => a.name = Some(kv.key.to_string()),
            }
            ev.debug_annotations.push(a);
        }
        let span_id_key = Sink::intern(keys, "span_id").map(|(iid, new)| {
            if new {
                interned
                    .debug_annotation_names
                    .push(proto::DebugAnnotationName {
                        iid: Some(iid),
                        name: Some("span_id".to_owned()),
                    });
            }
            iid
        });
        ev.debug_annotations.push(DebugAnnotation {
            name_iid: span_id_key,
            pointer_value: Some(id),
            ..Default::default()
        });
        if s.status.code == 2 {
            ev.debug_annotations.push(DebugAnnotation {
                name: Some("status".to_owned()),
                string_value: Some(format!("ERROR {}", s.status.message)),
                ..Default::default()
            });
        }
        ev.terminating_flow_ids.extend_from_slice(flows);
        let has_interned =
            !interned.event_names.is_empty() || !interned.debug_annotation_names.is_empty();
        let p = TracePacket {
            timestamp: Some(s.start_time_unix_nano),
            trusted_packet_sequence_id: Some(SEQUENCE),
            track_event: Some(ev),
            interned_data: has_interned.then_some(interned),
            sequence_flags: Some(proto::SEQ_NEEDS_INCREMENTAL_STATE),
            ..Default::default()
        };
        let mut buf = vec![0x0a];
        p.encode_length_delimited(&mut buf).expect("a Vec grows");
        buf
    }

    #[test]
    fn hand_encoded_begin_matches_prost() {
        let long = "x".repeat(300);
        let lines = [
            r#"{"name":"a","startTimeUnixNano":"5","attributes":[{"key":"thread.id","value":{"intValue":"3"}},{"key":"i","value":{"intValue":"-4"}}]}"#.to_owned(),
            r#"{"name":"a","startTimeUnixNano":"1796000000005050000","attributes":[{"key":"i","value":{"intValue":"7"}},{"key":"d","value":{"doubleValue":1.5}},{"key":"b","value":{"boolValue":false}},{"key":"s","value":{"stringValue":"é"}},{"key":"arr","value":{"arrayValue":{"values":[{"intValue":"1"}]}}},{"key":"none","value":{}},{"key":"i","value":{"intValue":"8"}},{"key":"span_id","value":{"stringValue":""}}],"status":{"code":2,"message":"bad"}}"#.to_owned(),
            format!(r#"{{"name":"{long}","attributes":[{{"key":"{long}","value":{{"stringValue":"{long}"}}}}],"status":{{"code":2,"message":"{long}"}}}}"#),
            r#"{"name":"b","status":{"code":1}}"#.to_owned(),
        ];
        let mut sink = ProtoSink::new(Vec::new());
        sink.first = false;
        let (mut names, mut keys) = (Table::default(), Table::default());
        let check = |sink: &mut ProtoSink<Vec<u8>>, names: &mut Table, keys: &mut Table| {
            for line in &lines {
                let s: Span<'_> = serde_json::from_str(line).expect("span");
                for flows in [&[][..], &[1, u64::MAX][..]] {
                    let want = reference(names, keys, &s, 0xabc, 300, flows);
                    sink.buf.clear();
                    sink.begin(&s, 0xabc, 300, flows);
                    assert_eq!(sink.buf, want, "{line}");
                }
            }
        };
        check(&mut sink, &mut names, &mut keys);
        // full tables: names and keys written inline
        for i in 0..MAX_INTERNED {
            for t in [&mut sink.names, &mut sink.keys, &mut names, &mut keys] {
                t.entry(format!("filler {i}")).or_insert(i + 1_000_000);
            }
        }
        sink.span_id_iid = None;
        let (mut names2, mut keys2) = (names.clone(), keys.clone());
        sink.keys.remove("span_id");
        keys2.remove("span_id");
        check(&mut sink, &mut names2, &mut keys2);
    }
}
