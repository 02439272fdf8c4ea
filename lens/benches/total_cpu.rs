//! Total CPU per span, one process per variant: N spans plus the final
//! flush, reported as the calling thread's CPU time
//! (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`), every thread's CPU time
//! (`getrusage(RUSAGE_SELF)`, so the export threads count) and the spans
//! dropped, each per span.
//!
//! `cargo bench -p nemo-lens --bench total_cpu` runs every variant in a
//! child process of its own (1,000,000 spans each, `TOTAL_CPU_SPANS` to
//! change); under `cargo test --benches` it runs a short smoke pass. One
//! variant alone: `total_cpu --variant <name> <spans>`. The `lens_*`
//! variants run under `TelemetryBuilder::install`; `lens_record` sets
//! `NEMO_LENS_SPAN_PATH=lens` (lens's own recorder), `lens_sdk` sets
//! `NEMO_LENS_SPAN_PATH=sdk` (spans built by the OpenTelemetry SDK);
//! `tracing_otel` is a `tracing` span entered around the body with a
//! `tracing-opentelemetry` layer on the raw SDK provider.
//!
//! `fastrace_otel` is fastrace (0.7, `enable`) with its own OpenTelemetry
//! reporter, `fastrace_opentelemetry::OpenTelemetryReporter` (0.19, the
//! release built on this workspace's `opentelemetry`/`opentelemetry_sdk`
//! 0.33), exporting into the same discarding exporter, set up as fastrace's
//! docs show: `fastrace::set_reporter(reporter, Config::default())`, then
//! `fastrace::flush()` at the end. Each span is a `Span::root` (fresh random
//! trace, the shape fastrace's docs give for a root span per request) with
//! one property, made the local parent for the body with
//! `set_local_parent` (see `common::variants::fastrace_root_span`); every
//! other variant's span is a root span too, since nothing is current
//! around it. fastrace has no sampler or queue limit here: a thread sends
//! its spans over a bounded ring (10,240 commands; four per root span with
//! a local parent: start, the local parent's spans, the root's, end) to
//! fastrace's collector thread, which converts and exports them in batches
//! on its 1 s interval or when a ring is half full. A full ring spills into
//! an unbounded queue of the sending thread, so fastrace drops nothing and
//! has no drop counter; but that queue moves into the ring only when the
//! same thread sends again, and `fastrace::flush()` drains the rings only.
//! When the collector thread falls behind (it converts and exports more
//! slowly than this loop makes spans), spans are still in the queue after
//! `fastrace::flush()`; the bench then ends more empty root spans, each
//! followed by `fastrace::flush()`, until the exporter has every span (see
//! [`fastrace_flush_all`]), so the CPU columns include exporting all N, and
//! prints how many were left after the plain flush. Its "dropped" column is
//! the spans the exporter never received, as for the other variants.
//!
//! `fastrace_local` is fastrace as its users write it: the same reporter,
//! but one `Span::root` per [`FASTRACE_SPANS_PER_ROOT`] spans, made the
//! local parent, and each measured span a `LocalSpan` under it (what
//! `#[fastrace::trace]` makes there; see `common::variants::FastraceStep`).
//! A root's spans reach the collector as one command when the root ends.
//! The roots are made on the calling thread inside the timed loop, so
//! their cost is in the columns, spread over the spans; the exporter gets
//! N spans plus one per root, and "dropped" is what it lacks of that.
//! `fastrace_otel` above is fastrace's costly path, every span a root.
//!
//! The all-variants run sets `OTEL_BSP_MAX_QUEUE_SIZE` to
//! [`common::NO_DROP_QUEUE`] (1,048,576) for every child: lens reads it,
//! and so do the raw-SDK and `tracing` variants' batch processors (see
//! `common::queue_size`), so no variant's queue can fill in a run of up to
//! that many spans. A `--variant` run alone keeps the defaults unless the
//! environment sets it.
//!
//! Two modes of the single-variant run, for the soak and rate checks (the
//! all-variants run never sets them):
//!
//! - `--rate <spans_per_s>` paces the calling thread: spans go in chunks of
//!   [`CHUNK`], and before each chunk the thread waits until the schedule
//!   (start + spans so far / rate) allows it: it sleeps until
//!   [`SPIN_BELOW`] before the due time, while more than that is left, and
//!   yields in a loop for the rest, so only the scheduler can make it late;
//!   a thread behind schedule does not wait at all (and catches up). The
//!   run then prints the achieved rate (spans over the emission loop's
//!   wall time), how far it fell behind the schedule at most, and the CPU
//!   spent waiting, which the two CPU columns leave out (it is the calling
//!   thread's own). `total_cpu --variant lens_record 10000000 --rate
//!   1000000` is 10 s at 1M spans/s.
//! - `--rss` prints the process's resident set (`VmRSS` of
//!   `/proc/self/status`, MiB) once before the first span, at every 10 %
//!   of N and after the final flush, a line each (for `lens_*` with the
//!   spans lens's pipeline counted as lost so far), so a long soak shows
//!   whether memory stays flat; the reads are left out of the CPU columns
//!   too.
//!
//! Both apply to every variant; for `lens_*` the run also prints the loss
//! counted by lens's pipeline (`TelemetryHandle::dropped_spans`: queue full,
//! exporter failed) next to the exporter's count. Numbers may be written
//! with `_` (`1_000_000`). The variant's `NEMO_LENS_SPAN_PATH` is what the
//! environment says (lens's recorder when unset); the all-variants run sets
//! it for each child.

mod common;

use common::thread_cpu;

use common::variants::{
    fastrace_local_span, fastrace_root_span, lens_managed_span, sdk_in_span, sdk_start_end,
    FastraceStep, FASTRACE_SPANS_PER_ROOT,
};
use std::borrow::Cow;
use std::hint::black_box;
use std::time::{Duration, Instant};

const VARIANTS: [(&str, &str); 7] = [
    (
        "lens_sdk",
        "lens managed_span! under install, NEMO_LENS_SPAN_PATH=sdk",
    ),
    (
        "lens_record",
        "lens managed_span! under install, NEMO_LENS_SPAN_PATH=lens",
    ),
    ("sdk_start_end", "raw SDK start+end, no context attach"),
    (
        "sdk_in_span",
        "raw SDK in_span style (current for the body)",
    ),
    (
        "tracing_otel",
        "tracing info_span! entered, tracing-opentelemetry layer on the raw SDK",
    ),
    (
        "fastrace_otel",
        "fastrace Span::root as local parent, fastrace-opentelemetry reporter",
    ),
    (
        "fastrace_local",
        "fastrace LocalSpan under a local parent (one root per 1,000), fastrace-opentelemetry reporter",
    ),
];

/// CPU seconds (user + system) of every thread of the process.
fn process_cpu() -> f64 {
    // SAFETY: an all-zero `rusage` is valid, and `ru` is a valid out-pointer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Spans per paced chunk: the clock is read once per chunk.
const CHUNK: u64 = 1_000;
/// A paced wait sleeps only while more than this is left, until this long
/// before the due time (timer slack is 50 µs), then yields.
const SPIN_BELOW: Duration = Duration::from_micros(200);

/// The single-variant run's modes (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
struct Modes {
    /// Spans per second the calling thread is paced to.
    rate: Option<f64>,
    /// Print `VmRSS` at the start, every 10 % and after the flush.
    rss: bool,
}

/// What a paced or sampled emission loop measured besides the spans.
#[derive(Debug, Default)]
struct Emitted {
    /// Wall time of the loop.
    wall: Duration,
    /// Calling-thread CPU seconds spent waiting or reading `VmRSS`.
    excluded_cpu: f64,
    /// How far behind the schedule a chunk started at most.
    max_lag: Duration,
}

/// `VmRSS` of this process in MiB, from `/proc/self/status`.
fn rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Prints one `--rss` line: `at` says when, `lost` is lens's loss counter.
fn print_rss(variant: &str, at: &str, lost: Option<u64>) {
    let rss = rss_mib().map_or_else(|| "?".to_owned(), |m| format!("{m:.1}"));
    let lost = lost.map_or_else(String::new, |d| format!("   lost so far {d}"));
    println!("{variant:<14} rss {at:<22} VmRSS {rss:>8} MiB{lost}");
}

/// Calls `span(i)` for `i` in `0..n`, summing the results into `sink`.
/// Without modes this is the plain loop; with them it goes in chunks,
/// paced to `modes.rate` and with a `VmRSS` line at every 10 % of `n`
/// (`lost` gives lens's loss counter for it).
fn emit(
    variant: &str,
    n: u64,
    modes: Modes,
    sink: &mut u64,
    lost: &dyn Fn() -> Option<u64>,
    mut span: impl FnMut(u64) -> u64,
) -> Emitted {
    let mut out = Emitted::default();
    if modes.rate.is_none() && !modes.rss {
        for i in 0..n {
            *sink = sink.wrapping_add(span(i));
        }
        return out;
    }
    let start = Instant::now();
    let mut next_mark = 1; // the next tenth of n to report
    let mut i = 0;
    while i < n {
        let mut end = n.min(i + modes.rate.map_or(n, |_| CHUNK));
        if modes.rss {
            end = end.min((n * next_mark).div_ceil(10).max(i + 1));
        }
        for j in i..end {
            *sink = sink.wrapping_add(span(j));
        }
        i = end;
        let reached_mark = modes.rss && next_mark <= 10 && i >= (n * next_mark).div_ceil(10);
        let due = modes
            .rate
            .map(|r| start + Duration::from_secs_f64(i as f64 / r));
        let now = Instant::now();
        if let Some(due) = due {
            out.max_lag = out.max_lag.max(now.saturating_duration_since(due));
        }
        let must_wait = i < n && due.is_some_and(|d| now < d);
        if !(must_wait || reached_mark) {
            continue;
        }
        let c0 = thread_cpu();
        if reached_mark {
            while next_mark <= 10 && i >= (n * next_mark).div_ceil(10) {
                next_mark += 1;
            }
            let pct = (next_mark - 1) * 10;
            print_rss(variant, &format!("at {pct:>3}% ({i} spans)"), lost());
        }
        if let (true, Some(due)) = (i < n, due) {
            loop {
                let now = Instant::now();
                if now >= due {
                    break;
                }
                let left = due - now;
                if left > SPIN_BELOW {
                    std::thread::sleep(left - SPIN_BELOW);
                } else {
                    std::thread::yield_now();
                }
            }
        }
        out.excluded_cpu += thread_cpu() - c0;
    }
    out.wall = start.elapsed();
    out
}

/// Runs `n` spans of `variant` and the final flush; prints one line (and
/// what `modes` ask for).
fn run_one(variant: &str, n: u64, modes: Modes) {
    let mut sink = 0u64;
    let (t0, p0);
    let mut note = None;
    let no_counter = || None;
    let mut lens_lost = None;
    let emitted;
    let dropped = match variant {
        "lens_sdk" | "lens_record" => {
            let exporter = common::DiscardExporter::default();
            let handle = common::lens_setup(exporter.clone());
            let lost = || Some(handle.dropped_spans());
            if modes.rss {
                print_rss(variant, "at start", lost());
            }
            (t0, p0) = (thread_cpu(), process_cpu());
            emitted = emit(variant, n, modes, &mut sink, &lost, |i| {
                lens_managed_span(i as i64)
            });
            let _ = handle.force_flush_within(Duration::from_secs(30));
            lens_lost = lost();
            n.saturating_sub(exporter.received())
        }
        "sdk_start_end" | "sdk_in_span" => {
            let (provider, exporter) = common::discard_provider();
            let tracer = common::raw_tracer(&provider);
            if modes.rss {
                print_rss(variant, "at start", None);
            }
            (t0, p0) = (thread_cpu(), process_cpu());
            emitted = emit(
                variant,
                n,
                modes,
                &mut sink,
                &no_counter,
                |i| match variant {
                    "sdk_in_span" => sdk_in_span(&tracer, i as i64),
                    _ => sdk_start_end(&tracer, i as i64),
                },
            );
            common::dropped_after_flush(&provider, &exporter, n)
        }
        "tracing_otel" => {
            use tracing_subscriber::layer::SubscriberExt as _;
            let (provider, exporter) = common::discard_provider();
            let subscriber = tracing_subscriber::registry()
                .with(tracing_opentelemetry::layer().with_tracer(common::raw_tracer(&provider)));
            let _default = tracing::subscriber::set_default(subscriber);
            if modes.rss {
                print_rss(variant, "at start", None);
            }
            (t0, p0) = (thread_cpu(), process_cpu());
            emitted = emit(variant, n, modes, &mut sink, &no_counter, |i| {
                let _span = tracing::info_span!("train.step", iteration = i).entered();
                common::variants::body(i)
            });
            common::dropped_after_flush(&provider, &exporter, n)
        }
        "fastrace_otel" | "fastrace_local" => {
            let exporter = common::DiscardExporter::default();
            let reporter = fastrace_opentelemetry::OpenTelemetryReporter::new(
                exporter.clone(),
                Cow::Owned(lens::otel_sdk::Resource::builder().build()),
                common::lens_scope(),
            );
            fastrace::set_reporter(reporter, fastrace::collector::Config::default());
            if modes.rss {
                print_rss(variant, "at start", None);
            }
            (t0, p0) = (thread_cpu(), process_cpu());
            let local = variant == "fastrace_local";
            let mut step = None;
            emitted = emit(variant, n, modes, &mut sink, &no_counter, |i| {
                if !local {
                    return fastrace_root_span(i as i64);
                }
                if i % FASTRACE_SPANS_PER_ROOT == 0 {
                    drop(step.take()); // the previous root ends first
                    step = Some(FastraceStep::new(i));
                }
                fastrace_local_span(i as i64)
            });
            drop(step);
            // the spans the exporter must get: one per call, plus the roots
            let expected = if local {
                n + n.div_ceil(FASTRACE_SPANS_PER_ROOT)
            } else {
                n
            };
            let (left, nudges) = fastrace_flush_all(&exporter, expected);
            note = Some(format!(
                "{variant:<14} {left} of {expected} spans still queued after fastrace::flush(), \
                 {nudges} empty root spans + flushes to export them"
            ));
            (expected + nudges).saturating_sub(exporter.received())
        }
        other => {
            eprintln!("unknown variant {other}");
            std::process::exit(2);
        }
    };
    let (t, p) = (thread_cpu() - t0, process_cpu() - p0);
    let (t, p) = (t - emitted.excluded_cpu, p - emitted.excluded_cpu);
    black_box(sink);
    let per = |s: f64| s * 1e9 / n as f64;
    println!(
        "{variant:<14} calling thread {:>7.1} ns/span   all threads {:>7.1} ns/span   dropped {:.4}/span ({dropped} of {n})",
        per(t),
        per(p),
        dropped as f64 / n as f64
    );
    if let Some(note) = note {
        println!("{note}");
    }
    if let Some(rate) = modes.rate {
        let secs = emitted.wall.as_secs_f64();
        println!(
            "{variant:<14} rate: target {rate:.0} spans/s, achieved {:.0} spans/s ({n} spans in {secs:.3} s), \
             at most {:.3} ms behind schedule, {:.3} s CPU waiting (not in the columns above)",
            n as f64 / secs,
            emitted.max_lag.as_secs_f64() * 1e3,
            emitted.excluded_cpu,
        );
    }
    if modes.rate.is_some() || modes.rss {
        if let Some(lost) = lens_lost {
            println!(
                "{variant:<14} lens pipeline counted {lost} spans lost (queue full or exporter failed); \
                 the exporter received {} of {n}",
                n - dropped
            );
        }
    }
    if modes.rss {
        print_rss(variant, "after the final flush", lens_lost);
    }
}

/// `fastrace::flush()`, then, while the exporter lacks spans, one empty
/// root span on this thread and `fastrace::flush()` again: a span's
/// commands first move this thread's spill queue into its ring (as far as
/// the ring has room, 10,240 commands), and the flush drains the ring. A
/// round that exports no more than its own span means the rest is lost, and
/// stops. `n` is the spans the run made (roots included). Returns the spans
/// missing after the plain flush and the empty spans added (each exported
/// too).
fn fastrace_flush_all(exporter: &common::DiscardExporter, n: u64) -> (u64, u64) {
    fastrace::flush();
    let left = n.saturating_sub(exporter.received());
    let mut nudges = 0;
    while exporter.received() < n + nudges {
        let before = exporter.received();
        drop(fastrace::Span::root(
            "flush",
            fastrace::collector::SpanContext::random(),
        ));
        nudges += 1;
        fastrace::flush();
        if exporter.received() - before <= 1 {
            break;
        }
    }
    (left, nudges)
}

/// A count, `_` allowed between digits (`1_000_000`).
fn parse_count(s: &str) -> Option<u64> {
    s.replace('_', "").parse().ok()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(pos) = args.iter().position(|a| a == "--variant") {
        let variant = args.get(pos + 1).map(String::as_str).unwrap_or("");
        let n = args
            .get(pos + 2)
            .and_then(|s| parse_count(s))
            .unwrap_or(1_000_000);
        let mut modes = Modes {
            rss: args.iter().any(|a| a == "--rss"),
            ..Modes::default()
        };
        if let Some(at) = args.iter().position(|a| a == "--rate") {
            match args.get(at + 1).and_then(|s| parse_count(s)) {
                Some(r) if r > 0 => modes.rate = Some(r as f64),
                _ => {
                    eprintln!("--rate needs a number of spans per second > 0");
                    std::process::exit(2);
                }
            }
        }
        run_one(variant, n, modes);
        return;
    }
    let bench = args.iter().any(|a| a == "--bench");
    let n: u64 = std::env::var("TOTAL_CPU_SPANS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if bench { 1_000_000 } else { 2_000 });
    let exe = std::env::current_exe().expect("own path");
    println!(
        "total_cpu: {n} spans per variant, one process each, one attribute, discarding exporter"
    );
    for (name, what) in VARIANTS {
        println!("  {name}: {what}");
        let path = if name == "lens_record" { "lens" } else { "sdk" };
        let status = std::process::Command::new(&exe)
            .args(["--variant", name, &n.to_string()])
            .env("NEMO_LENS_SPAN_PATH", path)
            .env("OTEL_BSP_MAX_QUEUE_SIZE", common::NO_DROP_QUEUE.to_string())
            .env("NEMO_LENS_QUIET", "1")
            .status()
            .expect("run a variant");
        assert!(status.success(), "variant {name} failed");
    }
}
