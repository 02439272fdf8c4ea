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

mod common;

use common::variants::{fastrace_root_span, lens_managed_span, sdk_in_span, sdk_start_end};
use std::borrow::Cow;
use std::hint::black_box;
use std::time::Duration;

const VARIANTS: [(&str, &str); 6] = [
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
];

/// CPU seconds of the calling thread.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// CPU seconds (user + system) of every thread of the process.
fn process_cpu() -> f64 {
    // SAFETY: an all-zero `rusage` is valid, and `ru` is a valid out-pointer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Runs `n` spans of `variant` and the final flush; prints one line.
fn run_one(variant: &str, n: u64) {
    let mut sink = 0u64;
    let (t0, p0);
    let mut note = None;
    let dropped = match variant {
        "lens_sdk" | "lens_record" => {
            let exporter = common::DiscardExporter::default();
            let handle = common::lens_setup(exporter.clone());
            (t0, p0) = (thread_cpu(), process_cpu());
            for i in 0..n {
                sink = sink.wrapping_add(lens_managed_span(i as i64));
            }
            let _ = handle.force_flush_within(Duration::from_secs(30));
            n.saturating_sub(exporter.received())
        }
        "sdk_start_end" | "sdk_in_span" => {
            let (provider, exporter) = common::discard_provider();
            let tracer = common::raw_tracer(&provider);
            (t0, p0) = (thread_cpu(), process_cpu());
            for i in 0..n {
                sink = sink.wrapping_add(match variant {
                    "sdk_in_span" => sdk_in_span(&tracer, i as i64),
                    _ => sdk_start_end(&tracer, i as i64),
                });
            }
            common::dropped_after_flush(&provider, &exporter, n)
        }
        "tracing_otel" => {
            use tracing_subscriber::layer::SubscriberExt as _;
            let (provider, exporter) = common::discard_provider();
            let subscriber = tracing_subscriber::registry()
                .with(tracing_opentelemetry::layer().with_tracer(common::raw_tracer(&provider)));
            let _default = tracing::subscriber::set_default(subscriber);
            (t0, p0) = (thread_cpu(), process_cpu());
            for i in 0..n {
                let _span = tracing::info_span!("train.step", iteration = i).entered();
                sink = sink.wrapping_add(common::variants::body(i));
            }
            common::dropped_after_flush(&provider, &exporter, n)
        }
        "fastrace_otel" => {
            let exporter = common::DiscardExporter::default();
            let reporter = fastrace_opentelemetry::OpenTelemetryReporter::new(
                exporter.clone(),
                Cow::Owned(lens::otel_sdk::Resource::builder().build()),
                common::lens_scope(),
            );
            fastrace::set_reporter(reporter, fastrace::collector::Config::default());
            (t0, p0) = (thread_cpu(), process_cpu());
            for i in 0..n {
                sink = sink.wrapping_add(fastrace_root_span(i as i64));
            }
            let (left, nudges) = fastrace_flush_all(&exporter, n);
            note = Some(format!(
                "{variant:<14} {left} spans still queued after fastrace::flush(), \
                 {nudges} empty root spans + flushes to export them"
            ));
            (n + nudges).saturating_sub(exporter.received())
        }
        other => {
            eprintln!("unknown variant {other}");
            std::process::exit(2);
        }
    };
    let (t, p) = (thread_cpu() - t0, process_cpu() - p0);
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
}

/// `fastrace::flush()`, then, while the exporter lacks spans, one empty
/// root span on this thread and `fastrace::flush()` again: a span's
/// commands first move this thread's spill queue into its ring (as far as
/// the ring has room, 10,240 commands), and the flush drains the ring. A
/// round that exports no more than its own span means the rest is lost, and
/// stops. Returns the spans missing after the plain flush and the empty
/// spans added (each exported too).
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

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(pos) = args.iter().position(|a| a == "--variant") {
        let variant = args.get(pos + 1).map(String::as_str).unwrap_or("");
        let n = args
            .get(pos + 2)
            .and_then(|s| s.parse().ok())
            .unwrap_or(1_000_000);
        run_one(variant, n);
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
            .env("NEMO_LENS_QUIET", "1")
            .status()
            .expect("run a variant");
        assert!(status.success(), "variant {name} failed");
    }
}
