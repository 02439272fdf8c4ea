//! The Perfetto protobuf writer: `TracePacket`s streamed one by one on one
//! trusted sequence with interned names, process/thread/counter track
//! descriptors, slices as BEGIN/END pairs, flows on their own edges.

use std::io::Write;

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
        let pid = i32::try_from(o.rank + 1).unwrap_or(i32::MAX);
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

    fn span_id_key(&mut self, interned: &mut proto::InternedData) -> Option<u64> {
        let (iid, new) = Self::intern(&mut self.keys, "span_id")?;
        if new {
            interned
                .debug_annotation_names
                .push(proto::DebugAnnotationName {
                    iid: Some(iid),
                    name: Some("span_id".to_owned()),
                });
        }
        Some(iid)
    }

    fn span(&mut self, o: &Origin, s: &Span<'_>) {
        let tid = thread_of(&s.attributes).unwrap_or(-1);
        let end = s.end_time_unix_nano.max(s.start_time_unix_nano);
        let lane = self.packing.lane(o.rank, tid, s.start_time_unix_nano, end);
        let track = self.thread(o, &s.attributes, lane);
        let mut interned = proto::InternedData::default();
        let mut ev = TrackEvent {
            r#type: Some(proto::TYPE_SLICE_BEGIN),
            track_uuid: Some(track),
            ..Default::default()
        };
        match Self::intern(&mut self.names, &s.name) {
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
            match Self::intern(&mut self.keys, &kv.key) {
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
        let id = span_id_u64(&s.span_id);
        // the span id as a pointer value: shown in hex, no string to allocate
        ev.debug_annotations.push(DebugAnnotation {
            name_iid: self.span_id_key(&mut interned),
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
        self.flows.saw(id);
        let parent = span_id_u64(&s.parent_span_id);
        if s.flags & REMOTE_PARENT == REMOTE_PARENT {
            ev.terminating_flow_ids.extend(self.flows.edge(parent, id));
        }
        for l in &s.links {
            ev.terminating_flow_ids
                .extend(self.flows.edge(span_id_u64(&l.span_id), id));
        }
        let has_interned =
            !interned.event_names.is_empty() || !interned.debug_annotation_names.is_empty();
        self.emit(TracePacket {
            timestamp: Some(s.start_time_unix_nano),
            track_event: Some(ev),
            interned_data: has_interned.then_some(interned),
            ..Default::default()
        });
        if self.error.is_none() {
            self.buf.clear();
            proto::encode_slice_end(&mut self.buf, SEQUENCE, end, track);
            if let Err(e) = self.out.write_all(&self.buf) {
                self.error = Some(e);
            }
        }
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
