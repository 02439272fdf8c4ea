//! The write path at the limit: N `managed_span!` spans with one attribute
//! under `TelemetryBuilder::install` (lens's own span path, default
//! settings: queue, batch size and delay as a job gets them), through one
//! exporter, then `shutdown`. One line per run:
//!
//! * written: spans the pipeline reports exported (`ShutdownReport`), and
//!   for `file` the spans found in the file (occurrences of the span name);
//! * dropped: spans the pipeline counted as lost (queue full, write failed);
//! * total CPU per span: `getrusage(RUSAGE_SELF)` user + sys over the loop
//!   and the shutdown, divided by N, and the calling thread's share;
//! * bytes per span: the size of what the exporter wrote, divided by the
//!   spans written;
//! * peak RSS: `ru_maxrss` of the process.
//!
//! Usage: `write_path <exporter> <spans> [--rate <spans_per_s>] [--dir D]`,
//! exporter one of `discard` (the span path alone: every span is recorded
//! and built, then discarded by the exporter), `file`, `perfetto`. With
//! `--rate` the calling thread is paced (chunks of 1,000 spans; the wait is
//! left out of the CPU columns). Under `cargo test --benches` it runs a
//! short smoke pass of every exporter. `scripts/write-path.sh` runs it
//! before and after side by side.

mod common;

use common::thread_cpu;

use common::variants::lens_managed_span;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `getrusage(RUSAGE_SELF)`: CPU seconds (user + sys) of every thread, and
/// the peak resident set in MiB.
fn usage() -> (f64, f64) {
    // SAFETY: an all-zero `rusage` is valid, and `ru` is a valid out-pointer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    (
        tv(ru.ru_utime) + tv(ru.ru_stime),
        ru.ru_maxrss as f64 / 1024.0,
    )
}

/// Bytes of every file under `dir`, and how often `needle` occurs in them.
fn scan(dir: &Path, needle: &[u8]) -> (u64, u64) {
    let (mut bytes, mut hits) = (0, 0);
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            let (b, h) = scan(&p, needle);
            bytes += b;
            hits += h;
        } else if let Ok(data) = std::fs::read(&p) {
            bytes += data.len() as u64;
            hits += data.windows(needle.len()).filter(|w| *w == needle).count() as u64;
        }
    }
    (bytes, hits)
}

fn run(exporter: &str, n: u64, rate: Option<f64>, dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("scratch dir");
    let mut cfg = lens::LensConfig::default();
    cfg.enabled = true;
    cfg.metrics_enabled = false;
    cfg.logs_enabled = false;
    cfg.span_groups = "all".to_owned();
    cfg.run_id = Some("bench".to_owned());
    cfg.file_path = Some(dir.join("spans.otlp.jsonl").display().to_string());
    let builder = match exporter {
        "discard" => lens::TelemetryBuilder::new(cfg, 0, 1)
            .with_span_exporter(common::DiscardExporter::default()),
        "file" | "perfetto" => {
            cfg.exporter = exporter.parse().expect("exporter");
            lens::TelemetryBuilder::new(cfg, 0, 1)
        }
        other => {
            eprintln!("unknown exporter {other} (discard, file, perfetto)");
            std::process::exit(2);
        }
    };
    let handle = builder.allow_reinit(true).install().expect("setup");
    let (t0, (p0, _)) = (thread_cpu(), usage());
    let start = Instant::now();
    let mut sink = 0u64;
    let mut waited = 0.0;
    let chunk = if rate.is_some() { 1_000 } else { n };
    let mut i = 0;
    while i < n {
        let end = n.min(i + chunk);
        for j in i..end {
            sink = sink.wrapping_add(lens_managed_span(j as i64));
        }
        i = end;
        if let (Some(r), true) = (rate, i < n) {
            let due = start + Duration::from_secs_f64(i as f64 / r);
            let c = thread_cpu();
            while Instant::now() < due {
                let left = due - Instant::now();
                if left > Duration::from_micros(200) {
                    std::thread::sleep(left - Duration::from_micros(200));
                } else {
                    std::thread::yield_now();
                }
            }
            waited += thread_cpu() - c;
        }
    }
    let wall = start.elapsed();
    let report = handle.shutdown(Duration::from_secs(120));
    let t = thread_cpu() - t0 - waited;
    let (p, peak) = usage();
    let p = p - p0 - waited;
    black_box(sink);
    let (bytes, found) = scan(dir, b"\"train.step\"");
    let per = |s: f64| s * 1e9 / n as f64;
    let found = match exporter {
        "file" => format!(" (in file {found})"),
        _ => String::new(),
    };
    let rate = match rate {
        Some(_) => format!("   {:.2}M spans/s", n as f64 / wall.as_secs_f64() / 1e6),
        None => String::new(),
    };
    println!(
        "{exporter:<9} written {:>8}{found} dropped {:>8}   total CPU {:>7.1} ns/span (calling thread {:>6.1})   {:>6.1} bytes/span   peak RSS {:>6.1} MiB{rate}",
        report.traces.exported,
        report.traces.lost,
        per(p),
        per(t),
        bytes as f64 / report.traces.exported.max(1) as f64,
        peak,
    );
    let _ = std::fs::remove_dir_all(dir);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|p| args.get(p + 1))
    };
    let count = |s: &String| s.replace('_', "").parse::<u64>().ok();
    let dir = arg("--dir").map_or_else(
        || std::env::temp_dir().join(format!("lens-write-path-{}", std::process::id())),
        PathBuf::from,
    );
    let rate = arg("--rate").and_then(count).map(|r| r as f64);
    let exporter = args.get(1).filter(|a| !a.starts_with("--"));
    match exporter {
        Some(e) => {
            let n = args.get(2).and_then(count).unwrap_or(1_000_000);
            run(e, n, rate, &dir);
        }
        // `cargo test --benches` (or `--bench`): a short pass of each, in
        // a child process each (one install per process)
        None => {
            let exe = std::env::current_exe().expect("own path");
            for e in ["discard", "file", "perfetto"] {
                let status = std::process::Command::new(&exe)
                    .args([e, "20000"])
                    .env("NEMO_LENS_QUIET", "1")
                    .status()
                    .expect("run");
                assert!(status.success(), "{e} failed");
            }
        }
    }
}
