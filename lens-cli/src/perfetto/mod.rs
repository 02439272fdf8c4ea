//! `lens perfetto`: streams a run into a Perfetto protobuf trace (one
//! process track per rank, one thread track per `thread.id`, spans as
//! slices with attributes as debug annotations, links and cross-rank
//! parents as flows, metrics as counter tracks) or Chrome Trace Event JSON.

mod chrome;
mod flows;
mod proto;

use rustc_hash::FxHashMap as HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};

use prost::Message;

use crate::cli::{PerfettoArgs, TraceFormat};
use crate::input::otlp::{span_id_u64, KeyValue, Metric, Span};
use crate::input::{Origin, Sink};
use crate::Failure;
use proto::{DebugAnnotation, TracePacket, TrackDescriptor, TrackEvent};

/// The one packet sequence this writer uses.
const SEQUENCE: u32 = 1;
/// Names interned at most; later new names are written inline.
const MAX_INTERNED: u64 = 100_000;
/// `Span.flags` bits: "has is-remote" and "parent is remote".
pub(crate) const REMOTE_PARENT: u32 = 0x300;

/// Runs `lens perfetto`.
pub(crate) fn run(a: &PerfettoArgs) -> Result<(), Failure> {
    let mut paths = a.paths.clone();
    paths.extend(a.merge.iter().cloned());
    if paths.is_empty() {
        return Err(Failure::Empty("give input files or --merge DIR".to_owned()));
    }
    let files = crate::input::discover(&paths)?;
    let out =
        File::create(&a.out).map_err(|e| Failure::Other(format!("{}: {e}", a.out.display())))?;
    let out = BufWriter::with_capacity(1 << 20, out);
    let (diag, written) = match a.format {
        TraceFormat::Proto => {
            let mut sink = ProtoSink::new(out);
            let diag = convert(&files, &mut sink);
            (diag, sink.finish())
        }
        TraceFormat::ChromeJson => {
            let mut sink = chrome::ChromeSink::new(out);
            let diag = convert(&files, &mut sink);
            (diag, sink.finish())
        }
    };
    written.map_err(|e| Failure::Other(format!("{}: {e}", a.out.display())))?;
    crate::check_not_empty(&diag)?;
    eprintln!(
        "lens perfetto: {} spans from {} file(s) written to {}",
        diag.spans,
        diag.files,
        a.out.display()
    );
    Ok(())
}

/// A writer that starts flows in a second pass (see [`flows`]).
trait TwoPass: Sink {
    /// The flow edges.
    fn flows(&mut self) -> &mut flows::Flows;
    /// From now on only flow sources are written.
    fn begin_second_pass(&mut self);
}

/// Reads the files into `sink`, then re-reads the files that may hold
/// flow sources.
fn convert(files: &[std::path::PathBuf], sink: &mut impl TwoPass) -> crate::input::Diagnostics {
    let diag = crate::input::read_all(files, sink);
    if sink.flows().pending() > 0 {
        let again = sink.flows().files_to_reread(files);
        sink.begin_second_pass();
        crate::input::reread_quietly(&again, sink);
    }
    let (pending, dropped) = (sink.flows().pending(), sink.flows().dropped);
    if pending > 0 || dropped > 0 {
        eprintln!(
            "lens perfetto: {pending} flow source(s) not found in the input, {dropped} edge(s) over the cap"
        );
    }
    diag
}

/// Thread id of a span: its `thread.id` attribute, when present.
pub(crate) fn thread_of(attrs: &[KeyValue<'_>]) -> Option<i64> {
    attrs
        .iter()
        .find(|kv| kv.key == "thread.id")
        .and_then(|kv| kv.value.as_i64())
}

/// The process name of a rank's track.
pub(crate) fn process_name(o: &Origin) -> String {
    if o.host.is_empty() {
        format!("rank {}", o.rank)
    } else {
        format!("rank {} @ {}", o.rank, o.host)
    }
}

/// Writes TracePackets as they come (`Trace.packet` is field 1, so the file
/// is a concatenation of tag, length and packet).
struct ProtoSink<W: Write> {
    out: W,
    buf: Vec<u8>,
    first: bool,
    next_uuid: u64,
    processes: HashMap<i64, (u64, i32)>,
    threads: HashMap<(i64, i64), u64>,
    counters: HashMap<(i64, String), u64>,
    names: HashMap<String, u64>,
    keys: HashMap<String, u64>,
    error: Option<std::io::Error>,
    flows: flows::Flows,
    /// Second pass: only start the flows whose source spans were not known.
    second_pass: bool,
}

impl<W: Write> ProtoSink<W> {
    fn new(out: W) -> Self {
        ProtoSink {
            out,
            buf: Vec::with_capacity(4096),
            first: true,
            next_uuid: 1,
            processes: HashMap::default(),
            threads: HashMap::default(),
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

    fn thread(&mut self, o: &Origin, tid: Option<i64>) -> u64 {
        let key = (o.rank, tid.unwrap_or(-1));
        if let Some(&t) = self.threads.get(&key) {
            return t;
        }
        let (_, pid) = self.process(o);
        let uuid = self.uuid();
        let idx = self.threads.keys().filter(|(r, _)| *r == o.rank).count() as i32;
        self.threads.insert(key, uuid);
        let name = tid.map_or("spans".to_owned(), |t| format!("thread {t}"));
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
        let track = self.thread(o, thread_of(&s.attributes));
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
        self.emit(TracePacket {
            timestamp: Some(s.end_time_unix_nano.max(s.start_time_unix_nano)),
            track_event: Some(TrackEvent {
                r#type: Some(proto::TYPE_SLICE_END),
                track_uuid: Some(track),
                ..Default::default()
            }),
            ..Default::default()
        });
    }

    /// Second pass: an instant event at the start of a source span that
    /// starts its flows.
    fn flow_start(&mut self, o: &Origin, s: &Span<'_>) {
        let Some(flow_ids) = self.flows.take(span_id_u64(&s.span_id)) else {
            return;
        };
        let track = self.thread(o, thread_of(&s.attributes));
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

    fn finish(mut self) -> std::io::Result<()> {
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

/// Calls `f(name, time, value)` for each gauge/sum point and histogram mean.
pub(crate) fn each_point(metrics: &[Metric<'_>], mut f: impl FnMut(&str, u64, f64)) {
    for m in metrics {
        for pts in [&m.gauge, &m.sum].into_iter().flatten() {
            for p in pts.data_points.iter().filter(|p| p.attributes.is_empty()) {
                if let Some(v) = p.as_double.or(p.as_int.map(|i| i as f64)) {
                    f(&m.name, p.time_unix_nano, v);
                }
            }
        }
        if let Some(h) = &m.histogram {
            for p in h
                .data_points
                .iter()
                .filter(|p| p.attributes.is_empty() && p.count > 0)
            {
                if let Some(sum) = p.sum {
                    f(&m.name, p.time_unix_nano, sum / p.count as f64);
                }
            }
        }
    }
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
