//! Error status and `exception` events as the Python library writes them:
//! status `TypeName: message`; `exception.type`, `exception.message`, and
//! `exception.stacktrace` only when backtraces are on. Whether they are is
//! read once per process, so each setting runs in a child process.

use lens::otel::trace::Status;
use lens::otel_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use lens::{span_cm, trace_fn};
use std::process::Command;

const CHILD_ENV: &str = "LENS_ERRORS_CHILD";

#[derive(Debug)]
struct QuotaExceeded;

impl std::fmt::Display for QuotaExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("quota exceeded")
    }
}

#[trace_fn(group = "checkpoint", name = "upload", err)]
fn upload() -> Result<(), QuotaExceeded> {
    Err(QuotaExceeded)
}

fn event_keys(span: &SpanData) -> Vec<String> {
    let ev = &span.events.events[0];
    assert_eq!(ev.name, "exception");
    ev.attributes.iter().map(|kv| kv.key.to_string()).collect()
}

/// Run only as the child of `stacktrace_only_when_backtraces_are_on`:
/// records an `Err` and a panic, prints what it saw.
#[test]
#[ignore = "child process of stacktrace_only_when_backtraces_are_on"]
fn errors_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    lens::set_tracer_provider(&provider);
    lens::set_enabled_span_groups(&lens::SpanGroupSet::resolve("all", &[]).unwrap());
    assert!(upload().is_err());
    let _ = std::panic::catch_unwind(|| {
        let _g = span_cm!("unwound");
        panic!("loss is NaN");
    });
    let spans = exporter.get_finished_spans().unwrap();
    let span = |n: &str| spans.iter().find(|s| s.name == n).unwrap().clone();
    let up = span("upload");
    assert_eq!(up.status, Status::error("QuotaExceeded: quota exceeded"));
    let ty = up.events.events[0]
        .attributes
        .iter()
        .find(|kv| kv.key.as_str() == "exception.type")
        .unwrap();
    assert_eq!(ty.value.as_str(), "errors::QuotaExceeded");
    assert_eq!(span("unwound").status, Status::error("panic: loss is NaN"));
    println!("upload: {}", event_keys(&up).join(" "));
    println!("unwound: {}", event_keys(&span("unwound")).join(" "));
    let stack = span("unwound").events.events[0]
        .attributes
        .iter()
        .find(|kv| kv.key.as_str() == "exception.stacktrace")
        .map(|kv| kv.value.as_str().into_owned());
    // captured at the panic site, not at the guard's drop
    if let Some(stack) = stack {
        assert!(stack.contains("errors_child"), "{stack}");
    }
}

fn run_child(backtrace: &str) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "errors_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .env("RUST_BACKTRACE", backtrace)
        .env_remove("RUST_LIB_BACKTRACE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn stacktrace_only_when_backtraces_are_on() {
    let on = run_child("1");
    assert!(
        on.contains("upload: exception.type exception.message exception.stacktrace"),
        "{on}"
    );
    assert!(
        on.contains("unwound: exception.type exception.message exception.stacktrace"),
        "{on}"
    );
    let off = run_child("0");
    assert!(
        off.contains("upload: exception.type exception.message\n"),
        "{off}"
    );
    assert!(
        off.contains("unwound: exception.type exception.message\n"),
        "{off}"
    );
}
