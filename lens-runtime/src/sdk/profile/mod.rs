//! The per-step phase profile of a rank that does not export.
//!
//! Under `single_rank` (the default) or `sampled`, most ranks export no
//! span, so a report sees one rank and cannot tell which rank slowed a
//! synchronized job. With the `file` (or `perfetto`) exporter, such a rank
//! keeps a compact profile instead: one synchronous span processor, on the
//! thread that ends each span, collects the direct children of every open
//! span and, when a *step* (a span with `dl.iteration`) ends, appends one
//! JSON line for it to `<…>.profile.jsonl` with one `write(2)`, then forgets
//! them. No thread, no queue, no connection, no runtime:
//!
//! ```text
//! {"lensProfile":{"v":1,"run":"exp","rank":3,"world":8,"host":"node1","step":"train.step",
//!  "id":"00f067aa0ba902b7","it":12,"t":"1700000000000000000","d":18234567,"open":true,
//!  "phases":[{"n":"data.next_batch","o":51234,"d":2345678},
//!            {"n":"forward_backward","o":2400000,"d":100,"open":true}]}}
//! ```
//!
//! `t` is the step's start (Unix ns, a decimal string: past 2^53 a JSON
//! number loses precision), `d` durations in ns, `o` a phase's start minus
//! the step's (≥ 0), `open` only on spans still open at shutdown or at a
//! signal (`nemo.span.truncated`). Phases are in start order; a name that
//! repeats under one step (microbatches) is one phase: durations summed,
//! the first start kept.
//!
//! Bounds: at most [`MAX_PHASES`] distinct names per parent (more are
//! dropped and counted), at most [`MAX_PENDING`] parents waiting for their
//! end (the oldest is forgotten beyond that, counted), names cut at
//! [`MAX_NAME`] bytes, one reused line buffer. A span's own children are
//! forgotten when it ends, so what is held is bounded by the spans open.
//! A failed write drops that line, counted by the sink (one warning on
//! stderr) and reported as lost at shutdown; nothing here panics.
//!
//! With any other exporter (`otlp`, `console`) a rank that does not export
//! writes no file: the same lines are held in memory ([`held`], at most
//! [`HELD_BYTES`], the oldest dropped and counted) until the job's ranks
//! call `TelemetryHandle::gather_profiles` together, which brings them to
//! the exporting rank over the application's `Collective` ([`gather`]).
//! The exporting rank sends them on as `lens.profile` carrier spans
//! through its own pipeline, so that they reach a collector, and from its
//! files `lens report`.
//!
//! The line itself is encoded in [`line`].

pub(crate) mod gather;
mod held;
mod line;

use crate::api::semconv;
use crate::engine::clock::from_system;
use crate::sdk::export::sink::{EncodedBatch, Sink};
use crate::sdk::report::{LossCause, SignalReport};
use held::Held;
pub(crate) use held::HELD_BYTES;
pub(crate) use line::Meta;
#[cfg(test)]
use line::MAX_NAME;
use line::{cut, encode, Phase, StepLine};
use opentelemetry::Value;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanProcessor};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The most distinct child names kept per parent.
pub(crate) const MAX_PHASES: usize = 16;
/// The most parents whose children are held while they are open.
pub(crate) const MAX_PENDING: usize = 4096;
/// Spare child lists kept for reuse (no allocation per step once warm).
const SPARE_LISTS: usize = 64;
/// The former key of the iteration, still read.
const FORMER_ITERATION: &str = "nv.dl.iteration";

/// Where the profile of `rank` goes: the rank's would-be OTLP JSON lines
/// file (`file::path_for`) with `.otlp.jsonl` replaced by `.profile.jsonl`
/// (another name gets `.profile` before its extension, or `.profile.jsonl`
/// when it has none); when `NEMO_LENS_FILE_PATH` has no `{rank}`,
/// `.rank<N>` goes before that, so ranks never share a file.
pub(crate) fn path_for(cfg: &crate::config::LensConfig, run_id: &str, rank: u32) -> PathBuf {
    let otlp = crate::sdk::export::file::path_for(cfg, run_id, rank);
    let shared = cfg
        .file_path
        .as_ref()
        .is_some_and(|p| !p.contains("{rank}"));
    let name = otlp
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (stem, suffix) = if let Some(stem) = name.strip_suffix(".otlp.jsonl") {
        (stem.to_owned(), ".profile.jsonl".to_owned())
    } else {
        match name.rfind('.').filter(|&i| i > 0) {
            Some(i) => (name[..i].to_owned(), format!(".profile{}", &name[i..])),
            None => (name.clone(), ".profile.jsonl".to_owned()),
        }
    };
    let rank_part = if shared {
        format!(".rank{rank}")
    } else {
        String::new()
    };
    let file = format!("{stem}{rank_part}{suffix}");
    match otlp.parent() {
        Some(dir) => dir.join(file),
        None => PathBuf::from(file),
    }
}

#[derive(Debug)]
struct Pending {
    /// Its place in `State::order` (oldest first).
    seq: u64,
    phases: Vec<Phase>,
}

/// Span ids are random: the id is its own hash.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

struct State {
    /// Children by parent span id.
    pending: HashMap<u64, Pending, BuildHasherDefault<IdHasher>>,
    /// Parent span ids by arrival, for forgetting the oldest.
    order: BTreeMap<u64, u64>,
    next_seq: u64,
    spare: Vec<Vec<Phase>>,
    line: EncodedBatch,
    /// The lines, when they go to no file.
    held: Option<Held>,
}

impl State {
    /// The children held for `id`, forgotten here.
    fn take(&mut self, id: u64) -> Option<Vec<Phase>> {
        let p = self.pending.remove(&id)?;
        self.order.remove(&p.seq);
        Some(p.phases)
    }

    /// Returns a child list for reuse.
    fn recycle(&mut self, mut v: Vec<Phase>) {
        if self.spare.len() < SPARE_LISTS && v.capacity() <= MAX_PHASES {
            v.clear();
            self.spare.push(v);
        }
    }

    /// Records `phase` under `parent`; `false` when it was dropped (a
    /// new name past `MAX_PHASES`). Forgets the oldest parent when full.
    fn add(&mut self, parent: u64, phase: Phase, evicted: &AtomicU64) -> bool {
        if let Some(p) = self.pending.get_mut(&parent) {
            if let Some(same) = p.phases.iter_mut().find(|q| q.name == phase.name) {
                same.start = same.start.min(phase.start);
                same.dur = same.dur.saturating_add(phase.dur);
                same.open |= phase.open;
                return true;
            }
            if p.phases.len() >= MAX_PHASES {
                return false;
            }
            p.phases.push(phase);
            return true;
        }
        while self.pending.len() >= MAX_PENDING {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            if let Some(p) = self.pending.remove(&oldest) {
                evicted.fetch_add(1, Ordering::Relaxed);
                self.recycle(p.phases);
            }
        }
        let mut phases = self
            .spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(MAX_PHASES / 2));
        phases.push(phase);
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.order.insert(seq, parent);
        self.pending.insert(parent, Pending { seq, phases });
        true
    }
}

/// Where a profile's lines go.
#[derive(Debug)]
pub(crate) enum Output {
    /// Appended to a file, one `write(2)` a line.
    File(Arc<Sink>),
    /// Held in memory for a gather, at most this many bytes.
    Memory(usize),
}

/// The profile of one rank: its file, what it holds, what it wrote.
pub(crate) struct Profile {
    meta: Meta,
    /// The file, when the lines go to one.
    sink: Option<Arc<Sink>>,
    state: Mutex<State>,
    /// Lines written (to the file, or into memory).
    written: AtomicU64,
    /// Lines held in memory that a gather took.
    gathered: AtomicU64,
    /// Whether a gather ever ran (a buffer nobody gathers loses nothing).
    gathering: std::sync::atomic::AtomicBool,
    /// Parents forgotten because `MAX_PENDING` were held.
    evicted: AtomicU64,
    /// Children dropped because their parent had `MAX_PHASES` names.
    dropped_phases: AtomicU64,
}

impl fmt::Debug for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Profile")
            .field("meta", &self.meta)
            .field("destination", &self.sink.as_ref().map(|s| s.destination()))
            .field("written", &self.written.load(Ordering::Relaxed))
            .finish()
    }
}

/// Counts at one moment, for a flush's report.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tally {
    written: u64,
    lost: u64,
}

impl Profile {
    /// A profile whose lines go to `out`.
    pub(crate) fn new(meta: Meta, out: Output) -> Arc<Profile> {
        let (sink, held) = match out {
            Output::File(sink) => (Some(sink), None),
            Output::Memory(cap) => (None, Some(Held::new(cap))),
        };
        Arc::new(Profile {
            meta,
            sink,
            state: Mutex::new(State {
                pending: HashMap::default(),
                order: BTreeMap::new(),
                next_seq: 0,
                spare: Vec::new(),
                line: EncodedBatch::default(),
                held,
            }),
            written: AtomicU64::new(0),
            gathered: AtomicU64::new(0),
            gathering: std::sync::atomic::AtomicBool::new(false),
            evicted: AtomicU64::new(0),
            dropped_phases: AtomicU64::new(0),
        })
    }

    /// The counts now: for a file, the lines written and those a write
    /// lost; in memory, the lines a gather took and, once a gather ran,
    /// those dropped past the bound or still held (a buffer nobody gathers
    /// is not a loss: the job did not ask for it).
    pub(crate) fn tally(&self) -> Tally {
        match &self.sink {
            Some(sink) => Tally {
                written: self.written.load(Ordering::Relaxed),
                lost: sink.dropped_records(),
            },
            None => {
                let (dropped, held) = {
                    let st = self.lock();
                    st.held.as_ref().map_or((0, 0), |h| (h.dropped(), h.len()))
                };
                Tally {
                    written: self.gathered.load(Ordering::Relaxed),
                    lost: if self.gathering.load(Ordering::Relaxed) {
                        dropped + held
                    } else {
                        0
                    },
                }
            }
        }
    }

    /// Lines written and lost since `before` (`Tally::default()`: ever),
    /// as a report's traces.
    pub(crate) fn report_since(&self, before: Tally) -> SignalReport {
        let now = self.tally();
        let lost = now.lost.saturating_sub(before.lost);
        SignalReport {
            exported: now.written.saturating_sub(before.written),
            lost,
            timed_out: false,
            cause: (lost > 0).then(|| match &self.sink {
                Some(sink) => LossCause::WriteFailed {
                    destination: sink.destination(),
                    detail: sink.first_error().unwrap_or("the write failed").to_owned(),
                },
                None => LossCause::Exporter {
                    destination: "the exporting rank (gather_profiles)".to_owned(),
                    detail: format!(
                        "profile lines dropped past {} KiB held between gathers, or not \
                         gathered before shutdown",
                        HELD_BYTES / 1024
                    ),
                },
            }),
        }
    }

    /// Takes every line held in memory for a gather (none with a file).
    pub(crate) fn take_held(&self) -> Vec<u8> {
        self.gathering.store(true, Ordering::Relaxed);
        let (bytes, n) = {
            let mut st = self.lock();
            match st.held.as_mut() {
                Some(h) => h.take(),
                None => return Vec::new(),
            }
        };
        self.gathered.fetch_add(n, Ordering::Relaxed);
        bytes
    }

    /// Parents forgotten (too many held) and children dropped (too many
    /// names under one parent).
    #[cfg(test)]
    fn overflow(&self) -> (u64, u64) {
        (
            self.evicted.load(Ordering::Relaxed),
            self.dropped_phases.load(Ordering::Relaxed),
        )
    }

    /// Takes one ended span.
    fn record(&self, span: SpanData) {
        if crate::sdk::fork::in_child() {
            crate::sdk::fork::note_dropped();
            return;
        }
        let id = u64::from_be_bytes(span.span_context.span_id().to_bytes());
        let parent = u64::from_be_bytes(span.parent_span_id.to_bytes());
        let mut step = false;
        let mut iteration = None;
        let mut truncated = false;
        for kv in &span.attributes {
            match kv.key.as_str() {
                semconv::DL_ITERATION | FORMER_ITERATION => {
                    step = true;
                    iteration = iteration.or_else(|| as_int(&kv.value));
                }
                semconv::NEMO_SPAN_TRUNCATED => truncated = matches!(kv.value, Value::Bool(true)),
                _ => {}
            }
        }
        if !step && parent == 0 {
            // neither a step nor anyone's child: only its own children, if
            // any, are to forget
            let mut st = self.lock();
            if let Some(v) = st.take(id) {
                st.recycle(v);
            }
            return;
        }
        let start = from_system(span.start_time);
        let dur = from_system(span.end_time).saturating_sub(start);
        let mut st = self.lock();
        let children = st.take(id);
        if step {
            let mut phases = children.unwrap_or_default();
            phases.sort_by_key(|p| p.start);
            let step = StepLine {
                name: &span.name,
                id,
                iteration,
                start,
                dur,
                open: truncated,
                phases: &phases,
            };
            let State { line, held, .. } = &mut *st;
            line.buf.clear();
            line.records = 1;
            encode(&self.meta, &step, &mut line.buf);
            let ok = match (&self.sink, held) {
                (Some(sink), _) => sink.write(line).is_ok(),
                (None, Some(h)) => {
                    h.push(&line.buf);
                    true
                }
                (None, None) => false,
            };
            if ok {
                self.written.fetch_add(1, Ordering::Relaxed);
            }
            if line.buf.capacity() > 64 * 1024 {
                // one huge line does not keep its buffer
                line.buf = Vec::new();
            }
            st.recycle(phases);
        } else {
            if let Some(v) = children {
                st.recycle(v);
            }
            let phase = Phase {
                name: cut(span.name),
                start,
                dur,
                open: truncated,
            };
            if !st.add(parent, phase, &self.evicted) {
                self.dropped_phases.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::I64(i) => Some(*i),
        Value::F64(f) if f.is_finite() && f.fract() == 0.0 => Some(*f as i64),
        Value::String(s) => s.as_str().trim().parse().ok(),
        _ => None,
    }
}

/// The span processor: every ended span goes to the profile, on the
/// calling thread.
#[derive(Debug, Clone)]
pub(crate) struct ProfileProcessor(pub(crate) Arc<Profile>);

impl SpanProcessor for ProfileProcessor {
    fn on_start(&self, _span: &mut opentelemetry_sdk::trace::Span, _cx: &opentelemetry::Context) {}
    fn on_end(&self, span: SpanData) {
        self.0.record(span);
    }
    fn force_flush(&self) -> OTelSdkResult {
        // every line is written when its step ends
        Ok(())
    }
    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

/// A profiling rank's tracer provider and profile, owned by its handle.
#[derive(Debug)]
pub(crate) struct Profiling {
    pub(crate) provider: opentelemetry_sdk::trace::SdkTracerProvider,
    pub(crate) profile: Arc<Profile>,
    /// The file, when the lines go to one.
    pub(crate) path: Option<PathBuf>,
}

impl Profiling {
    /// Opens the profile file at `path` (as the file exporter opens its
    /// file: created 0600, no symlink, whole lines), or with no path holds
    /// the lines in memory ([`HELD_BYTES`]), and builds a provider whose
    /// one processor feeds the profile; every span is sampled.
    pub(crate) fn open(path: Option<&Path>, meta: Meta) -> std::io::Result<Profiling> {
        let out = match path {
            Some(path) => Output::File(Sink::file(path)?),
            None => Output::Memory(HELD_BYTES),
        };
        let profile = Profile::new(meta, out);
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_id_generator(crate::sdk::ids::ForkSafeIdGenerator::new())
            .with_sampler(opentelemetry_sdk::trace::Sampler::AlwaysOn)
            .with_span_processor(ProfileProcessor(profile.clone()))
            .build();
        Ok(Profiling {
            provider,
            profile,
            path: path.map(Path::to_owned),
        })
    }

    /// Shuts the provider down; the report counts the lines written as
    /// exported and the lines that could not be written as lost.
    pub(crate) fn shutdown(&self, timeout: Duration) -> crate::sdk::report::ShutdownReport {
        let _ = self.provider.shutdown_with_timeout(timeout);
        crate::sdk::report::ShutdownReport {
            traces: self.profile.report_since(Tally::default()),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{
        SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
    };
    use opentelemetry::KeyValue;
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};

    const T0: u64 = 1_700_000_000_000_000_000;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("lens-profile-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d.join("p.profile.jsonl")
    }

    fn meta() -> Meta {
        Meta {
            run: "run\"1".into(),
            rank: 3,
            world: 8,
            host: "node-a".into(),
        }
    }

    fn span(
        name: &'static str,
        id: u64,
        parent: u64,
        start: u64,
        end: u64,
        attrs: Vec<KeyValue>,
    ) -> SpanData {
        let t = |ns: u64| crate::engine::clock::to_system(ns);
        SpanData {
            span_context: SpanContext::new(
                TraceId::from(7u128),
                SpanId::from(id),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: SpanId::from(parent),
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: name.into(),
            start_time: t(start),
            end_time: t(end),
            attributes: attrs,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: Default::default(),
        }
    }

    fn step(id: u64, it: i64, start: u64, end: u64) -> SpanData {
        span(
            "train.step",
            id,
            1,
            start,
            end,
            vec![KeyValue::new(semconv::DL_ITERATION, it)],
        )
    }

    fn lines(path: &Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    fn open(name: &str) -> (PathBuf, Arc<Profile>) {
        let path = temp(name);
        let p = Profile::new(meta(), Output::File(Sink::file(&path).unwrap()));
        (path, p)
    }

    #[test]
    fn a_step_line_holds_its_direct_children_in_start_order() {
        let (path, p) = open("step");
        let s = 0x10;
        // children end before their step, in any order
        p.record(span(
            "forward_backward",
            0x12,
            s,
            T0 + 300,
            T0 + 900,
            vec![],
        ));
        p.record(span("data.next_batch", 0x11, s, T0 + 100, T0 + 250, vec![]));
        // a grandchild is not a phase of the step
        p.record(span("layer", 0x20, 0x13, T0 + 910, T0 + 920, vec![]));
        p.record(span("allreduce.grads", 0x13, s, T0 + 900, T0 + 990, vec![]));
        p.record(step(s, 12, T0, T0 + 1000));
        let l = lines(&path);
        assert_eq!(l.len(), 1);
        let v = &l[0]["lensProfile"];
        assert_eq!(v["v"], 1);
        assert_eq!(v["run"], "run\"1");
        assert_eq!(v["rank"], 3);
        assert_eq!(v["world"], 8);
        assert_eq!(v["host"], "node-a");
        assert_eq!(v["step"], "train.step");
        assert_eq!(v["id"], "0000000000000010");
        assert_eq!(v["it"], 12);
        assert_eq!(v["t"], T0.to_string());
        assert_eq!(v["d"], 1000);
        assert!(v.get("open").is_none());
        let ph = v["phases"].as_array().unwrap();
        let names: Vec<_> = ph.iter().map(|x| x["n"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            ["data.next_batch", "forward_backward", "allreduce.grads"]
        );
        assert_eq!(
            (ph[0]["o"].as_u64(), ph[0]["d"].as_u64()),
            (Some(100), Some(150))
        );
        assert_eq!(
            (ph[2]["o"].as_u64(), ph[2]["d"].as_u64()),
            (Some(900), Some(90))
        );
        assert!(ph.iter().all(|x| x.get("open").is_none()));
        // everything was forgotten: nothing held
        assert!(p.lock().pending.is_empty());
        assert_eq!(p.report_since(Tally::default()).exported, 1);
        // a second step has only its own children
        p.record(span(
            "optimizer.step",
            0x31,
            0x30,
            T0 + 2100,
            T0 + 2200,
            vec![],
        ));
        p.record(step(0x30, 13, T0 + 2000, T0 + 3000));
        let l = lines(&path);
        assert_eq!(l.len(), 2);
        assert_eq!(l[1]["lensProfile"]["phases"].as_array().unwrap().len(), 1);
        assert_eq!(l[1]["lensProfile"]["it"], 13);
    }

    #[test]
    fn repeated_names_are_one_phase_summed_from_the_first_start() {
        let (path, p) = open("repeat");
        for mb in 0..4u64 {
            let start = T0 + 100 + mb * 100;
            p.record(span(
                "microbatch",
                0x100 + mb,
                0x10,
                start,
                start + 40,
                vec![],
            ));
        }
        p.record(span(
            "optimizer.step",
            0x200,
            0x10,
            T0 + 50,
            T0 + 60,
            vec![],
        ));
        p.record(span(
            "train.step",
            0x10,
            0,
            T0,
            T0 + 1000,
            vec![KeyValue::new("nv.dl.iteration", "7")],
        ));
        let l = lines(&path);
        let v = &l[0]["lensProfile"];
        assert_eq!(v["it"], 7, "the former key, a string value");
        let ph = v["phases"].as_array().unwrap();
        assert_eq!(ph.len(), 2);
        assert_eq!(ph[0]["n"], "optimizer.step");
        assert_eq!(ph[1]["n"], "microbatch");
        assert_eq!(ph[1]["o"], 100);
        assert_eq!(ph[1]["d"], 160);
    }

    #[test]
    fn truncated_spans_are_open() {
        let (path, p) = open("truncated");
        let tr = || vec![KeyValue::new(semconv::NEMO_SPAN_TRUNCATED, true)];
        p.record(span(
            "data.next_batch",
            0x11,
            0x10,
            T0 + 10,
            T0 + 20,
            vec![],
        ));
        p.record(span(
            "forward_backward",
            0x12,
            0x10,
            T0 + 30,
            T0 + 130,
            tr(),
        ));
        let mut s = step(0x10, 5, T0, T0 + 140);
        s.attributes.extend(tr());
        p.record(s);
        let v = &lines(&path)[0]["lensProfile"];
        assert_eq!(v["open"], true);
        let ph = v["phases"].as_array().unwrap();
        assert!(ph[0].get("open").is_none());
        assert_eq!(ph[1]["open"], true);
        assert_eq!(ph[1]["d"], 100);
    }

    #[test]
    fn bounds_names_parents_and_name_length() {
        let (path, p) = open("bounds");
        // 20 distinct names under one step: 16 kept, 4 dropped
        let names: Vec<&'static str> = (0..20)
            .map(|i| &*Box::leak(format!("phase{i:02}").into_boxed_str()))
            .collect();
        for (i, n) in names.iter().enumerate() {
            let s = T0 + i as u64 * 10;
            p.record(span(n, 0x1000 + i as u64, 0x10, s, s + 5, vec![]));
        }
        // a repeat of a kept name still adds up
        p.record(span(names[0], 0x2000, 0x10, T0 + 500, T0 + 505, vec![]));
        assert_eq!(p.overflow(), (0, 4));
        // parents that never end: at most MAX_PENDING held, the oldest
        // forgotten (the step's own entry is among the oldest)
        for i in 0..(MAX_PENDING as u64 + 10) {
            p.record(span(
                "orphan",
                0x10_0000 + i,
                0x20_0000 + i,
                T0,
                T0 + 1,
                vec![],
            ));
        }
        assert_eq!(p.lock().pending.len(), MAX_PENDING);
        assert_eq!(p.lock().order.len(), MAX_PENDING);
        assert_eq!(p.overflow().0, 11);
        // a step whose children were forgotten still gets its line
        let long: &'static str = Box::leak("é".repeat(200).into_boxed_str());
        p.record(span(long, 0x3000, 0x40, T0, T0 + 1, vec![]));
        p.record(step(0x40, 1, T0, T0 + 2));
        p.record(step(0x10, 0, T0, T0 + 1000));
        let l = lines(&path);
        assert_eq!(l.len(), 2);
        let n = l[0]["lensProfile"]["phases"][0]["n"].as_str().unwrap();
        assert!(
            n.len() <= MAX_NAME && n.len() >= MAX_NAME - 1,
            "{}",
            n.len()
        );
        assert!(l[1]["lensProfile"]["phases"].as_array().unwrap().is_empty());
        // memory: the line buffer stays small
        assert!(l.iter().all(|v| v.to_string().len() < 1024));
    }

    #[test]
    fn a_failed_write_is_counted_as_lost() {
        // /dev/full fails every write with ENOSPC
        let p = Profile::new(
            meta(),
            Output::File(Sink::file(Path::new("/dev/full")).unwrap()),
        );
        p.record(span(
            "data.next_batch",
            0x11,
            0x10,
            T0 + 10,
            T0 + 20,
            vec![],
        ));
        p.record(step(0x10, 1, T0, T0 + 100));
        p.record(step(0x20, 2, T0, T0 + 100));
        let r = p.report_since(Tally::default());
        assert_eq!((r.exported, r.lost), (0, 2));
        match r.cause {
            Some(LossCause::WriteFailed { destination, .. }) => {
                assert!(destination.contains("/dev/full"))
            }
            other => panic!("{other:?}"),
        }
        assert!(p.lock().pending.is_empty());
    }

    #[test]
    fn names_are_escaped_and_numbers_exact() {
        let path = temp("escape");
        let m = Meta {
            run: "a\"b\\c\n".into(),
            rank: u32::MAX,
            world: 0,
            host: "h\u{1}é".into(),
        };
        let p = Profile::new(m, Output::File(Sink::file(&path).unwrap()));
        p.record(span("we\"ird\tname", 0x11, u64::MAX, 0, u64::MAX, vec![]));
        p.record(span(
            "s",
            u64::MAX,
            0,
            0,
            u64::MAX,
            vec![KeyValue::new(semconv::DL_ITERATION, i64::MIN)],
        ));
        let v = &lines(&path)[0]["lensProfile"];
        assert_eq!(v["run"], "a\"b\\c\n");
        assert_eq!(v["host"], "h\u{1}é");
        assert_eq!(v["rank"], u64::from(u32::MAX));
        assert_eq!(v["world"], 0);
        assert_eq!(v["id"], "ffffffffffffffff");
        assert_eq!(v["it"], i64::MIN);
        assert_eq!(v["t"], "0");
        assert_eq!(v["d"], u64::MAX);
        assert_eq!(v["phases"][0]["n"], "we\"ird\tname");
        assert_eq!(v["phases"][0]["o"], 0);
        assert_eq!(v["phases"][0]["d"], u64::MAX);
    }

    /// A memory profile of `rank` that recorded `steps` steps of two phases.
    fn held_profile(rank: u32, steps: u64, cap: usize) -> Arc<Profile> {
        let m = Meta { rank, ..meta() };
        let p = Profile::new(m, Output::Memory(cap));
        for i in 0..steps {
            let (s, t) = (0x1000 * (i + 1), T0 + i * 1000);
            p.record(span("data.next_batch", s + 1, s, t + 10, t + 20, vec![]));
            p.record(span("forward_backward", s + 2, s, t + 30, t + 90, vec![]));
            p.record(step(s, i as i64, t, t + 100));
        }
        p
    }

    #[test]
    fn held_lines_are_gathered_to_the_root_over_a_collective() {
        use crate::api::propagation::LocalCollective;
        let comms = LocalCollective::group(4);
        // ranks 0, 1 and 3 hold lines; rank 2 (the root) exports and holds none
        let profiles: Vec<Option<Arc<Profile>>> = (0..4u32)
            .map(|r| (r != 2).then(|| held_profile(r, 3 + u64::from(r), HELD_BYTES)))
            .collect();
        let results: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = comms
                .iter()
                .zip(&profiles)
                .map(|(c, p)| s.spawn(move || gather::collect(c, Some(2), p.as_deref())))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let results: Vec<_> = results.into_iter().map(Result::unwrap).collect();
        assert_eq!(results[0], (3, None));
        assert_eq!(results[1], (4, None));
        assert_eq!(results[3], (6, None));
        let parts = results[2]
            .1
            .clone()
            .expect("the root gets every rank's lines");
        assert_eq!(results[2].0, 0, "the root sends nothing");
        assert_eq!(parts.len(), 4);
        assert!(parts[2].is_empty());
        for (r, want) in [(0usize, 3usize), (1, 4), (3, 6)] {
            let text = std::str::from_utf8(&parts[r]).unwrap();
            let lines: Vec<serde_json::Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(lines.len(), want);
            for (i, v) in lines.iter().enumerate() {
                assert_eq!(v["lensProfile"]["rank"], r as u64);
                assert_eq!(v["lensProfile"]["it"], i as u64);
                assert_eq!(v["lensProfile"]["phases"].as_array().unwrap().len(), 2);
            }
        }
        // taken: a second gather moves nothing; the counts say what went
        for p in profiles.iter().flatten() {
            assert_eq!(p.lock().held.as_ref().unwrap().len(), 0);
            let r = p.report_since(Tally::default());
            assert!(r.exported >= 3 && r.lost == 0, "{r:?}");
        }
        // the carriers hold every line once, in order, none split
        let carriers = gather::carriers(&parts, std::time::SystemTime::now());
        let mut seen = Vec::new();
        for (c, n) in &carriers {
            assert_eq!(c.name, gather::CARRIER_NAME);
            assert!(c.parent_span_id == opentelemetry::trace::SpanId::INVALID);
            let kv = &c.attributes[0];
            assert_eq!(kv.key.as_str(), gather::CARRIER_KEY);
            let Value::Array(opentelemetry::Array::String(lines)) = &kv.value else {
                panic!("{:?}", kv.value)
            };
            assert_eq!(lines.len() as u64, *n);
            seen.extend(lines.iter().map(|l| l.as_str().to_owned()));
        }
        assert_eq!(seen.len(), 13);
        assert!(seen
            .iter()
            .all(|l| l.starts_with("{\"lensProfile\"") && !l.contains('\n')));
    }

    #[test]
    fn carriers_stay_under_their_bound_and_skip_what_is_not_utf8() {
        let line = format!("{{\"lensProfile\":{{\"x\":\"{}\"}}}}\n", "a".repeat(1000));
        let many = line.repeat(20);
        let huge = format!("{}\n", "b".repeat(gather::CARRIER_BYTES + 1));
        let parts = vec![many.into_bytes(), b"\xff\xfe\n".to_vec(), huge.into_bytes()];
        let c = gather::carriers(&parts, std::time::SystemTime::now());
        let n: u64 = c.iter().map(|(_, n)| n).sum();
        assert_eq!(n, 21, "20 lines and the huge one; the bad bytes skipped");
        assert!(c.len() >= 4);
        for (span, n) in &c[..c.len() - 1] {
            let Value::Array(opentelemetry::Array::String(l)) = &span.attributes[0].value else {
                panic!()
            };
            let bytes: usize = l.iter().map(|s| s.as_str().len()).sum();
            assert!(bytes <= gather::CARRIER_BYTES && *n > 0);
        }
        assert_eq!(c.last().unwrap().1, 1, "the huge line alone");
    }

    #[test]
    fn a_held_profile_is_bounded_and_reports_its_losses_once_gathered() {
        let p = held_profile(1, 50, 2048);
        let line_len = {
            let st = p.lock();
            let h = st.held.as_ref().unwrap();
            assert!(h.len() < 50 && h.len() > 0);
            h.dropped()
        };
        // nobody gathered: no loss reported (the job did not ask for it)
        let r = p.report_since(Tally::default());
        assert_eq!((r.exported, r.lost), (0, 0));
        let held = p.lock().held.as_ref().unwrap().len();
        let taken = p.take_held();
        assert_eq!(taken.iter().filter(|b| **b == b'\n').count() as u64, held);
        assert!(taken.len() <= 2048);
        assert!(p.lock().held.as_ref().unwrap().len() == 0);
        let r = p.report_since(Tally::default());
        assert_eq!((r.exported, r.lost), (held, line_len));
        assert!(matches!(r.cause, Some(LossCause::Exporter { .. })), "{r:?}");
        // with a file there is nothing to take
        let (_, f) = open("take");
        assert!(f.take_held().is_empty());
    }

    #[test]
    fn the_path_sits_beside_the_otlp_file() {
        let mut cfg = crate::config::LensConfig::default();
        assert_eq!(
            path_for(&cfg, "r/1", 2),
            Path::new("lens-telemetry/r-1-rank2.profile.jsonl")
        );
        cfg.file_path = Some("/x/{rank}/t.otlp.jsonl".into());
        assert_eq!(path_for(&cfg, "r", 5), Path::new("/x/5/t.profile.jsonl"));
        cfg.file_path = Some("/x/spans.jsonl".into());
        assert_eq!(
            path_for(&cfg, "r", 5),
            Path::new("/x/spans.rank5.profile.jsonl")
        );
        cfg.file_path = Some("/x/spans-{rank}".into());
        assert_eq!(
            path_for(&cfg, "r", 1),
            Path::new("/x/spans-1.profile.jsonl")
        );
        cfg.file_path = Some("out".into());
        assert_eq!(path_for(&cfg, "r", 0), Path::new("out.rank0.profile.jsonl"));
        cfg.file_path = Some("/x/.hidden".into());
        assert_eq!(
            path_for(&cfg, "r", 0),
            Path::new("/x/.hidden.rank0.profile.jsonl")
        );
    }
}
