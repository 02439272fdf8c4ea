//! `lens perfetto`: the protobuf trace decoded with the perfetto package's
//! own schema (Python), and the Chrome JSON parsed and checked.

mod support;

use std::process::Command;

use support::{count_spans, fresh_dir, ok, synth};

const CHECKER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/support/check_perfetto.py"
);

/// Runs the trace checker; fails clearly when python3 or the `perfetto`
/// package is missing.
fn check(args: &[&str]) -> std::process::Output {
    let out = match Command::new("python3").arg(CHECKER).args(args).output() {
        Ok(o) => o,
        Err(e) => panic!(
            "python3 is needed to decode the trace ({e}); install it or set LENS_SKIP_PYTHON=1"
        ),
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("MISSING_PERFETTO"),
        "the `perfetto` Python package is missing: run scripts/install-test-deps.sh \
         (pip install perfetto) or set LENS_SKIP_PYTHON=1\n{stderr}"
    );
    out
}

fn skip_python() -> bool {
    std::env::var_os("LENS_SKIP_PYTHON").is_some_and(|v| v == "1")
}

#[test]
fn proto_trace_decodes_with_the_perfetto_schema() {
    let dir = synth(
        "pf-in",
        &[
            "--ranks",
            "4",
            "--steps",
            "25",
            "--microbatches",
            "2",
            "--truncate",
            "2",
        ],
    );
    let d = dir.to_str().expect("UTF-8 path");
    let spans: u64 = count_spans(&dir).values().sum();
    let out_dir = fresh_dir("pf-out");
    let trace = out_dir.join("run.pftrace");
    let t = trace.to_str().expect("path");
    ok(&["perfetto", d, "-o", t]);
    // --merge DIR takes the same path and must give the same bytes
    let merged = out_dir.join("merged.pftrace");
    ok(&[
        "perfetto",
        "--merge",
        d,
        "-o",
        merged.to_str().expect("path"),
    ]);
    assert_eq!(std::fs::read(&trace).ok(), std::fs::read(&merged).ok());

    if skip_python() {
        eprintln!("LENS_SKIP_PYTHON=1: not decoding the trace");
        return;
    }
    let out = check(&[t, &spans.to_string(), "4"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "trace check failed: {stderr}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("summary json");
    assert_eq!(summary["slices"], spans);
    assert_eq!(
        summary["processes"],
        serde_json::json!([
            "rank 0 @ node00",
            "rank 1 @ node00",
            "rank 2 @ node00",
            "rank 3 @ node00"
        ])
    );
    // ranks 1..3: the job's parent is rank 0's job (remote), and step 0
    // links to rank 0's step 0: one flow per edge, fan-in included
    assert_eq!(summary["flows"], 6, "{summary}");
    assert_eq!(summary["dangling_flows"], 0, "{summary}");
    assert!(summary["counter_events"].as_u64() > Some(0), "{summary}");
    assert_eq!(summary["sequences"], serde_json::json!([1]));
}

#[test]
fn chrome_json_has_complete_events_per_rank() {
    let dir = fresh_dir("cj-in");
    let d = dir.to_str().expect("path");
    ok(&["synth", "--ranks", "3", "--steps", "10", "--out", d]);
    let spans: u64 = count_spans(&dir).values().sum();
    let out = fresh_dir("cj-out").join("run.json");
    ok(&[
        "perfetto",
        d,
        "-o",
        out.to_str().expect("path"),
        "--format",
        "chrome-json",
    ]);
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out).expect("read")).expect("valid JSON");
    let events = v["traceEvents"].as_array().expect("traceEvents");
    let complete: Vec<_> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(complete.len() as u64, spans);
    for e in &complete {
        assert!(e["ts"].as_f64().is_some_and(|t| t > 0.0), "{e}");
        assert!(e["dur"].as_f64().is_some_and(|t| t >= 0.0), "{e}");
        assert!(
            e["pid"].as_i64().is_some_and(|p| (0..3).contains(&p)),
            "{e}"
        );
        assert!(e["name"].is_string());
    }
    let mut names: Vec<&str> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["rank 0 @ node00", "rank 1 @ node00", "rank 2 @ node00"]
    );
    // flows: ranks 1 and 2 each have a remote parent and a link to rank 0
    let flow_ids = |ph: &str| -> Vec<String> {
        let mut v: Vec<String> = events
            .iter()
            .filter(|e| e["ph"] == ph)
            .filter_map(|e| e["id"].as_str().map(str::to_owned))
            .collect();
        v.sort();
        v
    };
    assert_eq!(flow_ids("s").len(), 4);
    assert_eq!(flow_ids("s"), flow_ids("f"));
    let step = complete
        .iter()
        .find(|e| e["name"] == "train.step")
        .expect("a step");
    assert!(
        (step["dur"].as_f64().unwrap_or(0.0) - 100_000.0).abs() < 15_000.0,
        "step ≈ 100 ms in µs: {step}"
    );
}

#[test]
fn overlapping_spans_of_one_thread_get_their_own_track() {
    let dir = fresh_dir("overlap-in");
    // no thread.id: one rank, A [100, 1000] with child C, and B [500, 1500]
    // that overlaps A without nesting
    let span = |id: &str, parent: &str, start: u64, end: u64| {
        format!(
            r#"{{"spanId":"{id}","parentSpanId":"{parent}","name":"s{id}","startTimeUnixNano":"{start}","endTimeUnixNano":"{end}","attributes":[{{"key":"k","value":{{"intValue":"1"}}}}]}}"#
        )
    };
    let spans = [
        span("000000000000000c", "000000000000000a", 200, 300),
        span("000000000000000a", "", 100, 1000),
        span("000000000000000b", "", 500, 1500),
    ]
    .join(",");
    let line = format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"nv.dl.rank","value":{{"intValue":"0"}}}},{{"key":"host.name","value":{{"stringValue":"h"}}}}]}},"scopeSpans":[{{"spans":[{spans}]}}]}}]}}"#
    );
    std::fs::write(dir.join("o-rank0.otlp.jsonl"), format!("{line}\n")).expect("write");
    let trace = fresh_dir("overlap-out").join("t.pftrace");
    ok(&[
        "perfetto",
        dir.to_str().expect("path"),
        "-o",
        trace.to_str().expect("path"),
    ]);
    if skip_python() {
        return;
    }
    let out = check(&[trace.to_str().expect("path"), "3", "1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("summary json");
    assert_eq!(summary["threads"], 2, "{summary}");
    assert_eq!(summary["bad_nesting"], 0, "{summary}");
}
