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

use crate::sdk::export::sink::{EncodedBatch, Sink};
use lens_perfetto::packing::Packing;
use lens_perfetto::proto::{
    DebugAnnotation, ProcessDescriptor, ThreadDescriptor, TracePacket, TrackDescriptor, TrackEvent,
    SEQ_INCREMENTAL_STATE_CLEARED, TYPE_SLICE_BEGIN, TYPE_SLICE_END,
};
use opentelemetry::{Array, Value};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use prost::Message;
use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    /// Thread-track lanes whose descriptor the open file holds.
    described: HashSet<usize>,
    /// Whether the open file holds the process descriptor.
    process_described: bool,
    packing: Packing,
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
                described: HashSet::new(),
                process_described: false,
                packing: Packing::default(),
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

fn annotation(name: &str, value: &Value) -> DebugAnnotation {
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

/// Appends `packet` as one `Trace.packet` field.
fn push(buf: &mut Vec<u8>, packet: &TracePacket) {
    buf.push(0x0a);
    // encoding into a Vec cannot fail (it grows as needed)
    let _ = packet.encode_length_delimited(buf);
}

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

    /// Encodes `spans` for the open file.
    fn encode(&mut self, p: &Process, spans: &[SpanData]) -> Vec<u8> {
        let mut buf = Vec::with_capacity(spans.len() * 160);
        let packet = |track_event, timestamp| TracePacket {
            timestamp,
            trusted_packet_sequence_id: Some(p.sequence),
            track_event,
            ..Default::default()
        };
        if !self.process_described {
            self.process_described = true;
            push(
                &mut buf,
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
        for s in spans {
            let (start, end) = (ns(s.start_time), ns(s.end_time));
            let lane = self.packing.lane(0, 0, start, end.max(start));
            let track = p.uuid | (lane as u64 + 1).min(0xffff);
            if self.described.insert(lane) {
                let tid = i32::try_from(lane + 1).unwrap_or(i32::MAX);
                push(
                    &mut buf,
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
            let mut notes: Vec<DebugAnnotation> = s
                .attributes
                .iter()
                .map(|kv| annotation(kv.key.as_str(), &kv.value))
                .collect();
            let sc = &s.span_context;
            notes.push(annotation(
                "trace_id",
                &Value::from(sc.trace_id().to_string()),
            ));
            notes.push(annotation(
                "span_id",
                &Value::from(sc.span_id().to_string()),
            ));
            if let opentelemetry::trace::Status::Error { description } = &s.status {
                notes.push(annotation("status", &Value::from("ERROR")));
                notes.push(annotation(
                    "status.message",
                    &Value::from(description.to_string()),
                ));
            }
            let begin = TrackEvent {
                r#type: Some(TYPE_SLICE_BEGIN),
                track_uuid: Some(track),
                name: Some(s.name.to_string()),
                debug_annotations: notes,
                ..Default::default()
            };
            push(&mut buf, &packet(Some(begin), Some(start)));
            let end_event = TrackEvent {
                r#type: Some(TYPE_SLICE_END),
                track_uuid: Some(track),
                ..Default::default()
            };
            push(&mut buf, &packet(Some(end_event), Some(end.max(start))));
        }
        buf
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
        let buf = f.encode(&self.process, &batch);
        let len = buf.len() as u64;
        let out = EncodedBatch { buf, records };
        f.sink.write(&out)?;
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
