//! Shared helpers of the fault suite.

#![allow(dead_code, unreachable_pub, unused_imports)]

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
pub use tests::{file_spans, run_with_timeout, run_with_timeout_and, FileSpan, Finished};

/// The fault probe with telemetry on (file exporter into `dir`, every
/// group, flush on signal) and nothing from the developer's shell.
pub fn fault(mode: &str, arg: Option<&str>, dir: &std::path::Path) -> Command {
    let mut cmd = tests::lens_command(env!("CARGO_BIN_EXE_lens-fault"));
    cmd.arg(mode);
    if let Some(a) = arg {
        cmd.arg(a);
    }
    cmd.env("NEMO_LENS_EXPORTER", "file")
        .env("NEMO_LENS_FILE_PATH", dir.join("spans.jsonl"))
        .env("NEMO_LENS_FLUSH_ON_SIGNAL", "1")
        .env("NEMO_LENS_METRICS_ENABLED", "0");
    // the probe starts from the default dispositions whatever this test
    // run inherited (a run started in the background of a non-interactive
    // shell has SIGINT and SIGQUIT ignored, which lens rightly keeps)
    // SAFETY: `signal` is async-signal-safe, fine between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            for sig in [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    cmd
}

/// A fresh empty directory for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lens-faults-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// Sends `sig` to the child.
pub fn kill(child: &std::process::Child, sig: i32) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
}

/// Panics with the child's output unless `ok`.
#[track_caller]
pub fn check(ok: bool, what: &str, f: &Finished) {
    assert!(
        ok,
        "{what}\nstatus: {:?} (signal {:?}, timed out: {}, took {:?})\nstdout:\n{}\nstderr:\n{}",
        f.status,
        f.signal(),
        f.timed_out,
        f.took,
        f.stdout,
        f.stderr
    );
}

pub const TIMEOUT: Duration = Duration::from_secs(60);

/// Names of the spans in `dir/spans.jsonl`.
pub fn span_names(dir: &std::path::Path) -> Vec<String> {
    file_spans(&dir.join("spans.jsonl"))
        .into_iter()
        .map(|s| s.name)
        .collect()
}

/// The span called `name` in `dir/spans.jsonl` (panics when there is none).
#[track_caller]
pub fn span_named(dir: &std::path::Path, name: &str) -> FileSpan {
    let spans = file_spans(&dir.join("spans.jsonl"));
    spans
        .iter()
        .find(|s| s.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("no span {name:?} exported: {spans:?}"))
}

/// A collector that accepts connections and never answers; returns its
/// address. The listener lives for the rest of the test process.
pub fn hung_collector() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().flatten() {
            held.push(s);
        }
    });
    addr
}

/// The number after `key` (e.g. `took_ms=`) in the child's stdout.
#[track_caller]
pub fn stdout_num(f: &Finished, key: &str) -> u64 {
    f.stdout
        .split(key)
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no number after {key:?} in:\n{}", f.stdout))
}
