//! `lens synth`: writes a realistic multi-rank run as OTLP/JSON lines, one
//! file per rank, with planted stragglers and hangs. Written by hand (no
//! serde) so that benchmarks can make 10M spans quickly.
//!
//! The run is **synchronized** as a data-parallel job is: every step ends
//! in an `allreduce` that no rank leaves before the last one has arrived,
//! so a straggler's extra time in `data_loading` or `forward_backward`
//! becomes the other ranks' wait in `allreduce`, and extra time in
//! `optimizer_step` (after the collective) their wait in the next step's.
//! Every rank's step lasts the same. A planted hang (`--truncate RANK`)
//! stops that rank inside `forward_backward` half-way through the run; the
//! others then wait in that step's `allreduce` until the job is killed,
//! and every rank's open spans are exported as truncated, as the signal
//! flush does. Durations come from a counter-based generator, so any rank's
//! phase in any step can be recomputed: a first pass finds when each
//! collective ends, a second writes each rank's file.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::cli::SynthArgs;

/// Phases under each `train.step`, in order.
pub(crate) const PHASES: [&str; 4] = [
    "data_loading",
    "forward_backward",
    "allreduce",
    "optimizer_step",
];
/// Base phase durations (ns); the allreduce's is its transfer, after the
/// last rank arrived.
const PHASE_NS: [u64; 4] = [6_000_000, 80_000_000, 4_000_000, 14_000_000];
/// The collective every rank waits in.
const SYNC: usize = 2;
/// Gaps between phases, before the first and after the last (ns).
const GAP_IN: u64 = 50_000;
const GAP: u64 = 20_000;
const GAP_OUT: u64 = 30_000;
const GAP_STEPS: u64 = 100_000;
/// How long the other ranks wait for a hung one before the job is killed.
const HANG_WAIT_NS: u64 = 30_000_000_000;
/// Metrics are exported every this many steps.
const METRIC_EVERY: u64 = 10;
/// Run start (Unix ns).
const T0: u64 = 1_796_000_000_000_000_000;

/// Uniform in [1 - a, 1 + a], one value per (seed, rank, step, phase): the
/// same whichever pass asks.
fn jitter_at(seed: u64, rank: u32, step: u64, phase: usize, a: f64) -> f64 {
    let mut r = Rng(seed
        ^ (u64::from(rank) << 40)
        ^ step.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ ((phase as u64) << 56));
    r.next();
    r.jitter(a)
}

/// When every rank's steps happen: the end of each step's collective and
/// the planted hang.
struct Schedule {
    /// Per step, when the last rank arrived at the collective (absolute ns).
    arrive_last: Vec<u64>,
    /// The hung rank and step, when one is planted.
    hang: Option<(u32, u64)>,
    /// When the job was killed (absolute ns), with a hang.
    killed_at: u64,
}

/// Durations (ns) of `rank`'s phases in `step`.
fn durations(a: &SynthArgs, slow: &[(usize, f64)], rank: u32, step: u64) -> [u64; 4] {
    let mut out = [0u64; 4];
    for (i, o) in out.iter_mut().enumerate() {
        let mut d = PHASE_NS[i] as f64 * jitter_at(a.seed, rank, step, i, 0.03);
        for &(p, pct) in slow {
            if p == i {
                d *= 1.0 + pct / 100.0;
            }
        }
        *o = d as u64;
    }
    out
}

fn slow_phases(a: &SynthArgs, rank: u32) -> Vec<(usize, f64)> {
    a.straggler
        .iter()
        .filter(|(r, ..)| *r == rank)
        .filter_map(|(_, p, pct)| PHASES.iter().position(|x| x == p).map(|i| (i, *pct)))
        .collect()
}

/// When each rank arrives at `step`'s collective, from its step start.
fn arrival(d: &[u64; 4]) -> u64 {
    GAP_IN + d[0] + GAP + d[1] + GAP
}

/// The first pass: every step's last arrival at the collective. Memory is
/// one start time per rank and one time per step.
fn schedule(a: &SynthArgs) -> Schedule {
    let hang = a
        .truncate
        .iter()
        .copied()
        .filter(|r| *r < a.ranks)
        .min()
        .map(|r| (r, a.steps / 2));
    let slow: Vec<Vec<(usize, f64)>> = (0..a.ranks).map(|r| slow_phases(a, r)).collect();
    let mut start: Vec<u64> = (0..a.ranks).map(|_| T0 + 5_000_000).collect();
    let mut arrive_last = Vec::with_capacity(a.steps as usize);
    let mut killed_at = 0;
    for step in 0..a.steps {
        let mut last = 0u64;
        let mut ds = Vec::with_capacity(a.ranks as usize);
        for rank in 0..a.ranks {
            let d = durations(a, &slow[rank as usize], rank, step);
            if hang != Some((rank, step)) {
                last = last.max(start[rank as usize] + arrival(&d));
            }
            ds.push(d);
        }
        arrive_last.push(last);
        if hang.is_some_and(|(_, s)| s == step) {
            killed_at = last + HANG_WAIT_NS;
            break;
        }
        for (rank, d) in ds.iter().enumerate() {
            let end = last + d[SYNC] + GAP + d[3] + GAP_OUT;
            start[rank] = end + GAP_STEPS;
        }
    }
    Schedule {
        arrive_last,
        hang,
        killed_at,
    }
}

/// SplitMix64: small, fast and good enough for jitter.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [1 - a, 1 + a].
    fn jitter(&mut self, a: f64) -> f64 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        1.0 + a * (2.0 * u - 1.0)
    }
}

fn span_id(rank: u32, step: u64, sub: u64) -> u64 {
    ((u64::from(rank) + 1) << 44) | ((step & 0xf_ffff_ffff) << 8) | (sub & 0xff)
}

fn job_id(rank: u32) -> u64 {
    span_id(rank, 0xf_ffff_ffff, 0xff)
}

/// One span to write.
struct S<'a> {
    id: u64,
    parent: u64,
    remote_parent: bool,
    name: &'a str,
    start: u64,
    end: u64,
    tid: u64,
    iteration: Option<u64>,
    truncated: bool,
    link: Option<(u128, u64)>,
}

struct Writer {
    out: Box<dyn Write>,
    rank: u32,
    ranks: u32,
    pid: u64,
    trace: u128,
    buf: String,
}

impl Writer {
    fn resource(&mut self) {
        let _ = write!(
            self.buf,
            r#"{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"synth"}}}},{{"key":"nemo.run.id","value":{{"stringValue":"synth-run"}}}},{{"key":"host.name","value":{{"stringValue":"node{:02}"}}}},{{"key":"process.pid","value":{{"intValue":"{}"}}}},{{"key":"nv.dl.rank","value":{{"intValue":"{}"}}}},{{"key":"nv.dl.world_size","value":{{"intValue":"{}"}}}}]}},"#,
            self.rank / 8,
            self.pid,
            self.rank,
            self.ranks
        );
    }

    fn spans(&mut self, spans: &[S<'_>]) -> std::io::Result<()> {
        self.buf.clear();
        self.buf.push_str(r#"{"resourceSpans":["#);
        self.resource();
        self.buf
            .push_str(r#""scopeSpans":[{"scope":{"name":"lens.synth"},"spans":["#);
        for (i, s) in spans.iter().enumerate() {
            if i > 0 {
                self.buf.push(',');
            }
            self.span(s);
        }
        self.buf.push_str("]}]}]}\n");
        self.out.write_all(self.buf.as_bytes())
    }

    fn span(&mut self, s: &S<'_>) {
        let b = &mut self.buf;
        let _ = write!(
            b,
            r#"{{"traceId":"{:032x}","spanId":"{:016x}","#,
            self.trace, s.id
        );
        if s.parent != 0 {
            let _ = write!(b, r#""parentSpanId":"{:016x}","#, s.parent);
        }
        let flags = if s.remote_parent { 0x301 } else { 0x101 };
        let _ = write!(
            b,
            r#""flags":{flags},"name":"{}","kind":1,"startTimeUnixNano":"{}","endTimeUnixNano":"{}","attributes":[{{"key":"thread.id","value":{{"intValue":"{}"}}}}"#,
            s.name, s.start, s.end, s.tid
        );
        if let Some(it) = s.iteration {
            let _ = write!(
                b,
                r#",{{"key":"dl.iteration","value":{{"intValue":"{it}"}}}}"#
            );
        }
        if s.truncated {
            b.push_str(r#",{"key":"nemo.span.truncated","value":{"boolValue":true}},{"key":"nemo.span.truncated.reason","value":{"stringValue":"signal SIGTERM"}}"#);
        }
        b.push(']');
        if let Some((trace, id)) = s.link {
            let _ = write!(
                b,
                r#","links":[{{"traceId":"{trace:032x}","spanId":"{id:016x}"}}]"#
            );
        }
        b.push_str(r#","status":{"code":0}}"#);
    }

    fn metrics(&mut self, t: u64, step: u64, step_ns: u64, rng: &mut Rng) -> std::io::Result<()> {
        self.buf.clear();
        self.buf.push_str(r#"{"resourceMetrics":["#);
        self.resource();
        self.buf
            .push_str(r#""scopeMetrics":[{"scope":{"name":"lens.synth"},"metrics":["#);
        let loss = 2.5 * (-(step as f64) / 2000.0).exp() + 0.4 + 0.02 * rng.jitter(1.0);
        let lr = 3e-4 * (step as f64 / 100.0).min(1.0);
        let tps = 4096.0 * 8.0 / (step_ns as f64 / 1e9);
        let util = 90.0 * 100e6 / step_ns as f64 * rng.jitter(0.02);
        let gauges = [
            ("nv.dl.loss", loss),
            ("nv.dl.learning_rate", lr),
            ("nv.dl.throughput.tokens_per_sec", tps),
            ("hw.gpu.utilization", util.min(100.0)),
        ];
        for (i, (name, v)) in gauges.iter().enumerate() {
            if i > 0 {
                self.buf.push(',');
            }
            let _ = write!(
                self.buf,
                r#"{{"name":"{name}","gauge":{{"dataPoints":[{{"timeUnixNano":"{t}","asDouble":{v}}}]}}}}"#
            );
        }
        let _ = write!(
            self.buf,
            r#",{{"name":"nv.dl.step.duration","unit":"s","histogram":{{"dataPoints":[{{"timeUnixNano":"{t}","count":"1","sum":{}}}],"aggregationTemporality":1}}}}"#,
            step_ns as f64 / 1e9
        );
        self.buf.push_str("]}]}]}\n");
        self.out.write_all(self.buf.as_bytes())
    }
}

/// Writes the run; prints what it wrote.
pub(crate) fn run(a: &SynthArgs) -> std::io::Result<()> {
    std::fs::create_dir_all(&a.out)?;
    let plan = schedule(a);
    let mut total = 0u64;
    for rank in 0..a.ranks {
        total += write_rank(a, &plan, rank, &a.out)?;
    }
    eprintln!(
        "lens synth: wrote {total} spans for {} rank(s) to {}",
        a.ranks,
        a.out.display()
    );
    Ok(())
}

fn write_rank(a: &SynthArgs, plan: &Schedule, rank: u32, dir: &Path) -> std::io::Result<u64> {
    let ext = if a.gzip {
        "otlp.jsonl.gz"
    } else {
        "otlp.jsonl"
    };
    let file = File::create(dir.join(format!("synth-rank{rank}.{ext}")))?;
    let out: Box<dyn Write> = if a.gzip {
        Box::new(flate2::write::GzEncoder::new(
            BufWriter::with_capacity(1 << 20, file),
            flate2::Compression::fast(),
        ))
    } else {
        Box::new(BufWriter::with_capacity(1 << 20, file))
    };
    let pid = 10_000 + u64::from(rank);
    let mut w = Writer {
        out,
        rank,
        ranks: a.ranks,
        pid,
        trace: (u128::from(a.seed) << 64) | (u128::from(rank) + 1),
        buf: String::with_capacity(1 << 16),
    };
    let mut rng = Rng(a.seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ u64::from(rank));
    let slow = slow_phases(a, rank);
    let job = job_id(rank);
    let job_start = T0 + u64::from(rank) * 1_000_000;
    let mut t = T0 + 5_000_000;
    let mut n = 0u64;
    let mut truncated = false;
    let mut batch: Vec<S<'_>> = Vec::with_capacity(16);
    for (step, &last) in (0..a.steps).zip(&plan.arrive_last) {
        batch.clear();
        let step_id = span_id(rank, step, 0);
        let start = t;
        let d = durations(a, &slow, rank, step);
        let hung = plan.hang == Some((rank, step));
        let killed = plan.hang.is_some_and(|(_, s)| s == step);
        let mut phase_t = start + GAP_IN;
        for (i, name) in PHASES.iter().enumerate() {
            let ps = phase_t;
            // the collective ends for all once the last rank has arrived
            // (unsynchronized: when this one has)
            let pe = match i {
                SYNC if !a.unsynchronized => last.max(ps) + d[SYNC],
                _ => ps + d[i],
            };
            // a hang: the hung rank stays in forward_backward, the others in
            // the collective, until the job is killed
            let open = (hung && i == 1) || (killed && !hung && i == SYNC);
            if open {
                truncated = true;
                batch.push(S {
                    id: span_id(rank, step, 1 + i as u64),
                    parent: step_id,
                    remote_parent: false,
                    name,
                    start: ps,
                    end: plan.killed_at,
                    tid: pid,
                    iteration: None,
                    truncated: true,
                    link: None,
                });
                phase_t = plan.killed_at;
                break;
            }
            if i == 1 {
                let mbs = u64::from(a.microbatches);
                let mb_d = (pe - ps).saturating_sub(10_000) / mbs.max(1);
                for m in 0..mbs {
                    let ms = ps + 5_000 + m * mb_d;
                    let mid = span_id(rank, step, 8 + m * 3);
                    batch.push(S {
                        id: mid + 1,
                        parent: mid,
                        remote_parent: false,
                        name: "forward",
                        start: ms + 1_000,
                        end: ms + mb_d / 3,
                        tid: pid,
                        iteration: None,
                        truncated: false,
                        link: None,
                    });
                    batch.push(S {
                        id: mid + 2,
                        parent: mid,
                        remote_parent: false,
                        name: "backward",
                        start: ms + mb_d / 3 + 1_000,
                        end: (ms + mb_d).saturating_sub(2_000),
                        tid: pid,
                        iteration: None,
                        truncated: false,
                        link: None,
                    });
                    batch.push(S {
                        id: mid,
                        parent: span_id(rank, step, 2),
                        remote_parent: false,
                        name: "microbatch",
                        start: ms,
                        end: (ms + mb_d).saturating_sub(1_000),
                        tid: pid,
                        iteration: None,
                        truncated: false,
                        link: None,
                    });
                }
            }
            let tid = if i == 0 { pid + 1 } else { pid };
            batch.push(S {
                id: span_id(rank, step, 1 + i as u64),
                parent: step_id,
                remote_parent: false,
                name,
                start: ps,
                end: pe,
                tid,
                iteration: None,
                truncated: false,
                link: None,
            });
            phase_t = pe + GAP;
        }
        let end = if truncated {
            plan.killed_at
        } else {
            phase_t - GAP + GAP_OUT
        };
        let link =
            (rank > 0 && step == 0).then(|| ((u128::from(a.seed) << 64) | 1, span_id(0, 0, 0)));
        batch.push(S {
            id: step_id,
            parent: job,
            remote_parent: false,
            name: "train.step",
            start,
            end,
            tid: pid,
            iteration: Some(step),
            truncated,
            link,
        });
        n += batch.len() as u64;
        w.spans(&batch)?;
        t = end + GAP_STEPS;
        if truncated {
            break;
        }
        if (step + 1) % METRIC_EVERY == 0 {
            w.metrics(t, step, end - start, &mut rng)?;
        }
    }
    let remote = rank > 0;
    let job_span = S {
        id: job,
        parent: if remote { job_id(0) } else { 0 },
        remote_parent: remote,
        name: "job",
        start: job_start,
        end: if truncated { plan.killed_at } else { t },
        tid: pid,
        iteration: None,
        truncated,
        link: None,
    };
    w.spans(&[job_span])?;
    w.out.flush()?;
    Ok(n + 1)
}
