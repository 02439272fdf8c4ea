//! `NEMO_LENS_EXPORTER=perfetto`: a real process writes `.pftrace` files,
//! rotated by size, that Perfetto's own schema (the `perfetto` PyPI
//! package's `perfetto_trace_pb2`) decodes; every file is a complete trace,
//! and `lens perfetto --merge DIR` joins them into one.

use std::path::{Path, PathBuf};
use std::process::Command;
use tests::{lens_cli_binary, lens_command, run_ok};

const PROBE: &str = env!("CARGO_BIN_EXE_lens-probe");

/// Decodes `trace` with Perfetto's schema and prints one JSON summary:
/// slices, their names, process names, whether the first packet starts the
/// sequence, and slices that break nesting on their track.
const CHECK: &str = r#"
import json, sys
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
t = pb.Trace()
t.ParseFromString(open(sys.argv[1], "rb").read())
procs, threads, names, open_, ivs = {}, set(), set(), {}, {}
begins = ends = 0
for p in t.packet:
    if p.HasField("track_descriptor"):
        d = p.track_descriptor
        if d.HasField("process"):
            procs[d.uuid] = d.process.process_name
        if d.HasField("thread"):
            assert d.parent_uuid in procs, "thread track before its process"
            threads.add(d.uuid)
    if p.HasField("track_event"):
        e = p.track_event
        if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            assert e.track_uuid in threads, "slice on an undeclared track"
            begins += 1
            names.add(e.name)
            keys = {a.name for a in e.debug_annotations}
            assert {"trace_id", "span_id"} <= keys, keys
            open_[e.track_uuid] = open_.get(e.track_uuid, []) + [p.timestamp]
        elif e.type == pb.TrackEvent.TYPE_SLICE_END:
            ends += 1
            ivs.setdefault(e.track_uuid, []).append((open_[e.track_uuid].pop(), p.timestamp))
bad = 0
for v in ivs.values():
    v.sort(key=lambda x: (x[0], -x[1]))
    stack = []
    for s, e in v:
        while stack and stack[-1] <= s:
            stack.pop()
        if stack and e > stack[-1]:
            bad += 1
        stack.append(e)
first = t.packet[0]
print(json.dumps({
    "slices": begins, "ends": ends, "names": sorted(names),
    "processes": sorted(set(procs.values())), "bad_nesting": bad,
    "starts_sequence": bool(first.first_packet_on_sequence) and first.HasField("track_descriptor"),
}))
"#;

fn decode(trace: &Path) -> serde_json::Value {
    let out = Command::new("python3")
        .args(["-c", CHECK])
        .arg(trace)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{} does not decode with Perfetto's schema (pip install perfetto==0.59.1):\n{}",
        trace.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn traces(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pftrace"))
        .collect();
    v.sort();
    v
}

#[test]
fn spans_land_in_rotated_perfetto_traces_that_merge_into_one() {
    let dir = std::env::temp_dir().join(format!("lens-pftrace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // 60 flushed batches of 20 spans; a new file every 64 KiB
    let (batches, per_batch) = (60, 20);
    let mut cmd = lens_command(PROBE);
    cmd.args(["batches", "sync", &batches.to_string()])
        .env("NEMO_LENS_EXPORTER", "perfetto")
        .env("NEMO_LENS_METRICS_ENABLED", "false")
        .env("NEMO_LENS_RUN_ID", "pf")
        .env("NEMO_LENS_FILE_PATH", dir.join("pf-rank{rank}.otlp.jsonl"))
        .env("NEMO_LENS_PERFETTO_MAX_BYTES", "65536");
    let out = String::from_utf8_lossy(&run_ok(&mut cmd).stdout).into_owned();
    assert!(out.contains("done") && !out.contains("error"), "{out}");

    let files = traces(&dir);
    assert!(files.len() >= 2, "rotated at 64 KiB: {files:?}");
    assert!(files.contains(&dir.join("pf-rank0.pftrace")), "{files:?}");
    assert!(files.contains(&dir.join("pf-rank0.1.pftrace")), "{files:?}");
    assert!(
        !dir.join("pf-rank0.otlp.jsonl").exists(),
        "no JSON lines file without metrics or logs"
    );
    let mut total = 0;
    for f in &files {
        let size = std::fs::metadata(f).unwrap().len();
        // a file is closed once it holds the limit: at most one batch over
        assert!(size < 65536 + 16384, "{}: {size} bytes", f.display());
        let s = decode(f);
        assert_eq!(
            s["starts_sequence"],
            true,
            "{}: a complete trace on its own",
            f.display()
        );
        assert_eq!(s["slices"], s["ends"]);
        assert_eq!(s["bad_nesting"], 0);
        assert_eq!(s["names"], serde_json::json!(["probe.batch"]));
        let procs = s["processes"].as_array().unwrap();
        assert!(
            procs.len() == 1 && procs[0].as_str().unwrap().starts_with("rank 0 @ "),
            "{procs:?}"
        );
        total += s["slices"].as_u64().unwrap();
    }
    assert_eq!(
        total,
        batches * per_batch,
        "every span, once, over the files"
    );

    // lens perfetto --merge DIR: one trace with every file's spans
    let merged = dir.join("merged.trace");
    run_ok(
        Command::new(lens_cli_binary())
            .args(["perfetto", "--merge"])
            .arg(&dir)
            .arg("-o")
            .arg(&merged),
    );
    let s = decode(&merged);
    assert_eq!(s["slices"].as_u64(), Some(batches * per_batch));
    assert_eq!(s["bad_nesting"], 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_perfetto_size_names_the_variable() {
    let mut cmd = lens_command(PROBE);
    cmd.args(["spans"])
        .env("NEMO_LENS_EXPORTER", "perfetto")
        .env("NEMO_LENS_PERFETTO_MAX_BYTES", "1k");
    let out = cmd.output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("NEMO_LENS_PERFETTO_MAX_BYTES") && err.contains("1k") && err.contains("65536"),
        "{err}"
    );
}
