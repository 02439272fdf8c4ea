//! One trace across Python and Rust processes: the Python OpenTelemetry SDK
//! (1.45.2) as a real peer, both exporting to the same collector.

use std::process::Command;
use std::time::Duration;
use tests::Rotel;

const PROBE: &str = env!("CARGO_BIN_EXE_lens-probe");
const PEER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/python/peer.py");

fn command(program: &str, rotel: &Rotel) -> Command {
    let mut cmd = tests::lens_command(program);
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", rotel.grpc_endpoint());
    cmd
}

fn run(cmd: &mut Command) -> String {
    String::from_utf8_lossy(&tests::run_ok(cmd).stdout).into_owned()
}

fn python_span(stdout: &str) -> (String, String) {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("python-span "))
        .expect(stdout);
    let mut it = line.split_whitespace().skip(1);
    (it.next().unwrap().to_owned(), it.next().unwrap().to_owned())
}

#[test]
fn python_parent_rust_child_through_traceparent_env() {
    let rotel = Rotel::start();
    let mut cmd = command("python3", &rotel);
    cmd.args([PEER, "parent", PROBE, "spans", "sync"]);
    let stdout = run(&mut cmd);
    let (trace_id, span_id) = python_span(&stdout);
    // the Python SDK 1.45 marks its trace ids random: flags 03 must continue the trace
    let tp = stdout
        .lines()
        .find_map(|l| l.strip_prefix("traceparent "))
        .unwrap();
    assert!(tp.ends_with("-01") || tp.ends_with("-03"), "{tp}");
    let r = rotel.wait_for(Duration::from_secs(20), "python and rust spans", |r| {
        !r.spans_named("python.parent").is_empty() && !r.spans_named("probe.job").is_empty()
    });
    let py = r.span("python.parent");
    let job = r.span("probe.job");
    assert_eq!(py.span_id, span_id);
    assert_eq!(
        job.trace_id, trace_id,
        "the Rust process continues the Python trace"
    );
    assert_eq!(
        job.parent_id, py.span_id,
        "the Rust root span's parent is the Python span"
    );
    assert_eq!(
        tests::get(&py.resource, "service.name"),
        Some("python-peer")
    );
    assert_eq!(tests::get(&job.resource, "service.name"), Some("nemo"));
}

#[test]
fn rust_parent_python_child_through_an_injected_map() {
    let rotel = Rotel::start();
    let mut cmd = command(PROBE, &rotel);
    cmd.args(["python-child", "sync", PEER]);
    let stdout = run(&mut cmd);
    let (trace_id, _) = python_span(&stdout);
    let r = rotel.wait_for(Duration::from_secs(20), "rust and python spans", |r| {
        !r.spans_named("python.child").is_empty() && !r.spans_named("rust.parent").is_empty()
    });
    let parent = r.span("rust.parent");
    let child = r.span("python.child");
    assert_eq!(child.trace_id, parent.trace_id);
    assert_eq!(child.trace_id, trace_id);
    assert_eq!(
        child.parent_id, parent.span_id,
        "the Python span's parent is the Rust span"
    );
}
