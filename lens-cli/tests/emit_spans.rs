//! `lens emit-spans`: spans with exact given times, parents first and
//! linked, one trace; any bad `--span` rejects the whole invocation and
//! nothing is written.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use support::{fresh_dir, lens_clean, output_within, resource_attr, spans_in};

/// `lens emit-spans --service svc <args>` writing to `dir`; returns the
/// output and the file it writes (`{rank}` becomes `emit-spans`).
fn emit(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> (Output, PathBuf) {
    let mut cmd = lens_clean();
    cmd.env("NEMO_LENS_EXPORTER", "file")
        .env("NEMO_LENS_FILE_PATH", dir.join("job-{rank}.otlp.jsonl"))
        .envs(env.iter().copied())
        .args(["emit-spans", "--service", "svc"]);
    for a in args {
        cmd.args(["--span", a]);
    }
    (
        output_within(&mut cmd),
        dir.join("job-emit-spans.otlp.jsonl"),
    )
}

/// The span called `name`.
fn by_name<'a>(spans: &'a [serde_json::Value], name: &str) -> &'a serde_json::Value {
    spans
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no span {name}: {spans:#?}"))
}

#[test]
fn parents_are_emitted_first_linked_with_exact_times() {
    let dir = fresh_dir("emit-order");
    // children before their parents on the command line; telemetry "off"
    let (out, file) = emit(
        &dir,
        &[
            ("NEMO_LENS_ENABLED", "0"),
            ("NEMO_LENS_TRACES_ENABLED", "0"),
        ],
        &[
            "load,1718000001.5,1718000002.000000001,train",
            "train,1718000000.123456789,1718000010,job",
            "job,1718000000,1718000011.25",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spans = spans_in(&file);
    let names: Vec<&str> = spans.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, ["job", "train", "load"], "parents first");
    let (job, train, load) = (
        by_name(&spans, "job"),
        by_name(&spans, "train"),
        by_name(&spans, "load"),
    );
    assert_eq!(job["parentSpanId"], "");
    assert_eq!(train["parentSpanId"], job["spanId"]);
    assert_eq!(load["parentSpanId"], train["spanId"]);
    for s in [train, load] {
        assert_eq!(s["traceId"], job["traceId"]);
    }
    let times = |s: &serde_json::Value| {
        (
            s["startTimeUnixNano"].as_str().unwrap_or("").to_owned(),
            s["endTimeUnixNano"].as_str().unwrap_or("").to_owned(),
        )
    };
    assert_eq!(
        times(job),
        ("1718000000000000000".into(), "1718000011250000000".into())
    );
    assert_eq!(
        times(train),
        ("1718000000123456789".into(), "1718000010000000000".into())
    );
    assert_eq!(
        times(load),
        ("1718000001500000000".into(), "1718000002000000001".into())
    );
    assert_eq!(
        resource_attr(&file, "service.name"),
        Some(serde_json::json!({"stringValue": "svc"}))
    );
}

#[test]
fn several_top_level_spans_share_one_trace_under_a_service_root() {
    let dir = fresh_dir("emit-roots");
    let (out, file) = emit(&dir, &[], &["prolog,10,20", "epilog,30,40"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spans = spans_in(&file);
    assert_eq!(spans.len(), 3, "{spans:#?}");
    let root = by_name(&spans, "svc");
    assert_eq!(root["startTimeUnixNano"], "10000000000");
    assert_eq!(root["endTimeUnixNano"], "40000000000");
    for name in ["prolog", "epilog"] {
        let s = by_name(&spans, name);
        assert_eq!(s["traceId"], root["traceId"]);
        assert_eq!(s["parentSpanId"], root["spanId"]);
    }
}

#[test]
fn an_incoming_traceparent_is_joined() {
    let dir = fresh_dir("emit-traceparent");
    let (trace, parent) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let tp = format!("00-{trace}-{parent}-01");
    let (out, file) = emit(&dir, &[("TRACEPARENT", &tp)], &["a,1,2", "b,3,4"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spans = spans_in(&file);
    assert_eq!(spans.len(), 2, "no extra root: {spans:#?}");
    for s in &spans {
        assert_eq!(s["traceId"], trace);
        assert_eq!(s["parentSpanId"], parent);
    }
}

#[test]
fn every_bad_span_rejects_everything_and_writes_nothing() {
    let cases: &[(&[&str], &str)] = &[
        (&["ok,1,2", "a,1,2", "a,3,4"], "span \"a\" is given twice"),
        (&["ok,1,2", "b,1,2,nobody"], "names parent \"nobody\""),
        (
            &["ok,1,2", "x,1,2,y", "y,1,2,x"],
            "cycle (child -> parent): \"x\" -> \"y\" -> \"x\"",
        ),
        (
            &["ok,1,2", "late,5,4.5"],
            "span \"late\": END 4.5 is before START 5",
        ),
        (
            &["ok,1,2", "n,1.5s,2"],
            "span \"n\": START \"1.5s\" is not a time",
        ),
        (
            &["ok,1,2", "n,1,two"],
            "span \"n\": END \"two\" is not a time",
        ),
        (
            &["ok,1,2", "n,1"],
            "expected NAME,START,END[,PARENT], got 2 field(s)",
        ),
        (&["ok,1,2", "n,1,2,ok,extra"], "got 5 field(s)"),
        (&["ok,1,2", ",1,2"], "the NAME is empty"),
    ];
    for (i, (spans, expected)) in cases.iter().enumerate() {
        let dir = fresh_dir(&format!("emit-bad-{i}"));
        let (out, file) = emit(&dir, &[], spans);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{spans:?} was accepted");
        assert!(err.contains(expected), "{spans:?}: {err}");
        assert_eq!(err.lines().count(), 1, "one error: {err}");
        let written = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
        assert_eq!(written, 0, "{spans:?} wrote to {}", file.display());
    }
}

#[test]
fn service_and_at_least_one_span_are_required() {
    let out = output_within(lens_clean().args(["emit-spans", "--span", "a,1,2"]));
    assert!(!out.status.success());
    let out = output_within(lens_clean().args(["emit-spans", "--service", "s"]));
    assert!(!out.status.success());
}
