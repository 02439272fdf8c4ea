//! Runtime costs: export-strategy decisions for 100,000 ranks, and an
//! enabled span through the real OTLP gRPC batch pipeline with the collector
//! up versus down (the span site must not care). See docs/PERFORMANCE.md.
//!
//! The "up" variant needs the `rotel` collector (`pip install
//! rotel==0.0.1a15`); without it that variant is skipped with a message.

use criterion::{criterion_group, criterion_main, Criterion};
use lens::{managed_span, LensConfig};
use std::hint::black_box;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const RANKS: u32 = 100_000;

fn strategies(c: &mut Criterion) {
    let mut g = c.benchmark_group("strategy_100k_ranks");
    for name in ["all_ranks", "single_rank", "sampled", "first_rank_per_node"] {
        let mut cfg = LensConfig::default();
        cfg.export_strategy = name.into();
        cfg.export_sample_rate = 0.1;
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut n = 0u32;
                for rank in 0..RANKS {
                    n += u32::from(lens::should_export(&cfg, rank, RANKS).unwrap_or(false));
                }
                black_box(n)
            })
        });
    }
    g.finish();
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts rotel on a free port (stdout discarded), if it is installed.
fn start_rotel() -> Option<(Child, u16)> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import rotel, os; print(os.path.join(os.path.dirname(rotel.__file__), 'rotel-agent'))",
        ])
        .output()
        .ok()?;
    let bin = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || bin.is_empty() {
        return None;
    }
    let (grpc, http) = (free_port(), free_port());
    let dir = std::env::temp_dir().join(format!("lens-bench-rotel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let child = Command::new(bin)
        .args(["start", "--exporter", "blackhole"])
        .arg("--otlp-grpc-endpoint")
        .arg(format!("127.0.0.1:{grpc}"))
        .arg("--otlp-http-endpoint")
        .arg(format!("127.0.0.1:{http}"))
        .arg("--pid-file")
        .arg(dir.join("rotel.pid"))
        .arg("--log-file")
        .arg(dir.join("rotel.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    for _ in 0..200 {
        if TcpStream::connect(("127.0.0.1", grpc)).is_ok() {
            return Some((child, grpc));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

fn span_through_otlp(c: &mut Criterion, label: &str, port: u16) {
    // set before the exporter is built, which reads them
    std::env::set_var(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        format!("http://127.0.0.1:{port}"),
    );
    std::env::set_var("OTEL_EXPORTER_OTLP_TIMEOUT", "500");
    let mut cfg = LensConfig::default();
    cfg.enabled = true;
    cfg.export_strategy = "all_ranks".into();
    cfg.span_groups = "all".into();
    cfg.metrics_enabled = false;
    let handle = lens::TelemetryBuilder::new(cfg, 0, 1)
        .allow_reinit(true)
        .install()
        .expect("setup");
    let mut i = 0i64;
    c.bench_function(&format!("otlp_grpc_span/collector_{label}"), |b| {
        b.iter(|| {
            i += 1;
            drop(black_box(managed_span!(
                "step",
                "train.step",
                iteration = i
            )));
        })
    });
    let _ = handle.force_flush();
    let dropped = handle.dropped_spans();
    let _ = handle.shutdown(Duration::from_secs(5));
    println!("otlp_grpc_span/collector_{label}: {dropped} spans not exported (expected > 0 only when down)");
}

fn otlp_pipeline(c: &mut Criterion) {
    match start_rotel() {
        Some((mut child, port)) => {
            span_through_otlp(c, "up", port);
            let _ = child.kill();
            let _ = child.wait();
        }
        None => println!("otlp_grpc_span/collector_up: skipped (rotel-agent not installed)"),
    }
    // nothing listens on a fresh free port: every export fails fast
    span_through_otlp(c, "down", free_port());
}

criterion_group!(benches, strategies, otlp_pipeline);
criterion_main!(benches);
