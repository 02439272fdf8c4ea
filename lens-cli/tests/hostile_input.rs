//! The `lens` command trusts no input (issue 39, item 3): extreme
//! iterations and world sizes, symlink loops, its own output in a merged
//! folder, terminal escapes in names, unreadable folders and megabyte
//! attribute values. Each case runs the built binary as a child process,
//! under a deadline and under memory and file-size limits, so that a
//! regression fails the test instead of hanging or exhausting the machine.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};
use support::{fresh_dir, output_within};

/// Address space (KiB) and file size (512-byte blocks for dash, 1 KiB for
/// bash) allowed to the child.
const ULIMITS: &str = "ulimit -v 2097152 && ulimit -f 262144";

/// `lens ARGS` under [`ULIMITS`] and the test deadline, in `cwd`.
fn lens_in(cwd: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("{ULIMITS} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_lens"))
        .args(args);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    output_within(&mut cmd)
}

fn lens(args: &[&str]) -> Output {
    lens_in(None, args)
}

/// Asserts a clean exit (no panic, no abort, no signal); returns stdout.
fn ok(out: &Output, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}: {}\n{stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

fn int(key: &str, v: i64) -> Value {
    json!({"key": key, "value": {"intValue": v.to_string()}})
}

fn string(key: &str, v: &str) -> Value {
    json!({"key": key, "value": {"stringValue": v}})
}

/// One OTLP/JSON line: a resource with `resource` attributes and `spans`.
fn line(resource: Vec<Value>, spans: Vec<Value>) -> String {
    json!({"resourceSpans": [{
        "resource": {"attributes": resource},
        "scopeSpans": [{"scope": {"name": "lens"}, "spans": spans}]
    }]})
    .to_string()
        + "\n"
}

/// A span of `dur` ns starting at `start`, with `attrs`.
fn span(id: u64, name: &str, start: u64, dur: u64, attrs: Vec<Value>) -> Value {
    json!({
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": format!("{id:016x}"),
        "name": name,
        "kind": 1,
        "startTimeUnixNano": start.to_string(),
        "endTimeUnixNano": (start + dur).to_string(),
        "attributes": attrs,
        "status": {"code": 0}
    })
}

/// A step span of rank-local `id` at `iteration`.
fn step(id: u64, iteration: i64) -> Value {
    let start = 1_000_000_000 + id * 10_000;
    span(
        id,
        "train.step",
        start,
        5_000 + id,
        vec![int("dl.iteration", iteration)],
    )
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Text report, JSON report and HTML page of `dir`: all must exit cleanly.
/// Returns the JSON report, the text report and the page.
fn all_reports(dir: &Path, what: &str) -> (Value, String, String) {
    let json = ok(&lens(&["report", "--json", p(dir)]), what);
    let json: Value = serde_json::from_str(&json).expect("report --json is JSON");
    let text = ok(&lens(&["report", p(dir)]), what);
    let page = dir.with_extension("html");
    ok(&lens(&["report", "--html", p(&page), p(dir)]), what);
    let html = std::fs::read_to_string(&page).expect("page");
    (json, text, html)
}

/// Steps at i64::MIN and i64::MAX on one rank, and at both ends on other
/// ranks: the step matrix took `slot - base` unchecked (a panic), and the
/// analysis walked every iteration between the lowest and the highest one.
#[test]
fn extreme_iterations_neither_panic_nor_hang() {
    let dir = fresh_dir("hostile-iterations");
    let (min, max) = (i64::MIN, i64::MAX);
    for (rank, its) in [
        (0, vec![min, max, 0, -1]),
        (1, vec![max, min]),
        (2, vec![max - 1, min + 1]),
    ] {
        let spans = its
            .iter()
            .enumerate()
            .map(|(i, &it)| step(i as u64 + 1, it))
            .collect();
        write(
            &dir.join(format!("r-rank{rank}.otlp.jsonl")),
            &line(vec![int("nv.dl.rank", rank)], spans),
        );
    }
    let (r, text, _) = all_reports(&dir, "extreme iterations");
    let rows: Vec<i64> = r["steps"]["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| row["iteration"].as_i64().expect("iteration"))
        .collect();
    // each rank keeps the steps near its first one
    assert_eq!(rows, [min, max - 1, max], "{r:#}");
    assert_eq!(r["steps"]["untracked"], 5, "{r:#}");
    assert!(text.contains(&max.to_string()), "{text}");
    // the Perfetto writer reads the same spans
    let trace = dir.with_extension("pftrace");
    ok(
        &lens(&["perfetto", p(&dir), "-o", p(&trace)]),
        "perfetto of extreme iterations",
    );
}

/// `nv.dl.world_size` of i64::MAX and 1e8: the missing ranks were
/// `(0..world_size).collect()` (786 MB for 1e8; i64::MAX exhausted the
/// memory). They are now ranges bounded by the ranks seen, under a 2 GiB
/// address-space limit here.
#[test]
fn a_huge_world_size_costs_nothing() {
    let dir = fresh_dir("hostile-world-size");
    for (rank, ws) in [(0, i64::MAX), (1, 100_000_000), (3, 4)] {
        write(
            &dir.join(format!("w-rank{rank}.otlp.jsonl")),
            &line(
                vec![int("nv.dl.rank", rank), int("nv.dl.world_size", ws)],
                vec![step(1, 0), step(2, 1)],
            ),
        );
    }
    let (r, text, html) = all_reports(&dir, "huge world size");
    assert_eq!(r["world_size"], i64::MAX, "{r:#}");
    assert_eq!(
        r["missing_rank_ranges"],
        json!([[2, 2], [4, i64::MAX - 1]]),
        "{r:#}"
    );
    assert_eq!(r["missing_rank_count"], i64::MAX as u64 - 3, "{r:#}");
    let listed = r["missing_ranks"].as_array().expect("missing_ranks");
    assert_eq!(listed.len(), 1000);
    assert_eq!(listed[..3], [json!(2), json!(4), json!(5)]);
    let want = format!("2, 4–{}", i64::MAX - 1);
    assert!(text.contains(&want), "{text}");
    assert!(html.contains(&want), "no {want} in the page");
    assert!(html.len() < 1 << 20, "page of {} bytes", html.len());

    // a world size the ranks seen exceed, and a negative one
    let small = fresh_dir("hostile-world-size-small");
    for (rank, ws) in [(0, -5), (7, 2)] {
        write(
            &small.join(format!("s-rank{rank}.otlp.jsonl")),
            &line(
                vec![int("nv.dl.rank", rank), int("nv.dl.world_size", ws)],
                vec![step(1, 0)],
            ),
        );
    }
    let (r, _, _) = all_reports(&small, "small world size");
    assert_eq!(r["missing_ranks"], json!([1]), "{r:#}");
    assert_eq!(r["missing_rank_count"], 1, "{r:#}");
}

/// A run folder: one file of `steps` step spans on rank 0; returns the span
/// count.
fn one_run_file(dir: &Path, name: &str, steps: u64) -> u64 {
    let spans = (0..steps).map(|i| step(i + 1, i as i64)).collect();
    write(&dir.join(name), &line(vec![int("nv.dl.rank", 0)], spans));
    steps
}

/// `self -> .`, `a -> .` and `b -> ..` links, a symlinked file and a hard
/// link: the walk followed symlinked folders (two `-> .` links: 2^40 paths)
/// and read one file once per name. Every file is now read once and the
/// walk ends; `perfetto --merge` shares it.
#[test]
fn symlink_loops_end_and_each_file_is_read_once() {
    let dir = fresh_dir("hostile-links");
    let sub = dir.join("sub");
    std::fs::create_dir_all(&sub).expect("mkdir");
    let spans = one_run_file(&sub, "run-rank0.otlp.jsonl", 7);
    let link = |target: &str, name: &Path| {
        std::os::unix::fs::symlink(target, name).expect("symlink");
    };
    link(".", &dir.join("self"));
    link(".", &sub.join("a"));
    link("..", &sub.join("b"));
    link("run-rank0.otlp.jsonl", &sub.join("alias-rank0.otlp.jsonl"));
    std::fs::hard_link(
        sub.join("run-rank0.otlp.jsonl"),
        dir.join("hard-rank0.otlp.jsonl"),
    )
    .expect("hard link");
    let r: Value = serde_json::from_str(&ok(
        &lens(&["report", "--json", p(&dir)]),
        "report over links",
    ))
    .expect("JSON");
    assert_eq!(r["input"]["files"], 1, "{:#}", r["input"]);
    assert_eq!(r["spans"]["count"], spans, "{:#}", r["input"]);
    let share = r["by_name"]["train.step"]["share"].as_f64().expect("share");
    assert!(share <= 1.0, "share {share}");

    // the file named twice, and through a link, is read once too
    let r: Value = serde_json::from_str(&ok(
        &lens(&[
            "report",
            "--json",
            p(&sub.join("run-rank0.otlp.jsonl")),
            p(&sub.join("alias-rank0.otlp.jsonl")),
            p(&dir),
        ]),
        "report of named links",
    ))
    .expect("JSON");
    assert_eq!(r["spans"]["count"], spans, "{:#}", r["input"]);

    let out = fresh_dir("hostile-links-out").join("all.pftrace");
    let stderr = {
        let o = lens(&["perfetto", "--merge", p(&dir), "-o", p(&out)]);
        ok(&o, "perfetto --merge over links");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    assert!(
        stderr.contains(&format!("{spans} spans from 1 file(s)")),
        "{stderr}"
    );
}

/// A folder with a trace that sorts before `all.pftrace`.
fn trace_folder(name: &str) -> (PathBuf, u64) {
    let dir = fresh_dir(name);
    let data = vec![0x0a_u8; 64 << 10];
    std::fs::write(dir.join("a-rank0.pftrace"), &data).expect("write trace");
    (dir, data.len() as u64)
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// `perfetto --merge DIR -o DIR/all.pftrace`, run twice. The trigger of
/// the self-copy: the folder was listed before the output was created, so
/// the second run lists its own previous output as an input. The output is
/// then truncated and the traces copied in name order with `io::copy`,
/// which between two files is `copy_file_range` in the kernel. When a
/// non-empty trace sorts before the output's name, the output is no longer
/// empty when its own turn comes, and copying it into itself never reaches
/// its growing end (64 MiB in 0.04 s). When the output's name sorts first
/// (`all.pftrace` before `run-rank0.pftrace`) it is copied while still
/// empty, which is why plain reruns did not show it. The output is now
/// excluded by (device, inode), whatever path names it.
#[test]
fn merge_never_reads_its_own_output() {
    // absolute, relative, ./ and a symlinked folder
    let (dir, want) = trace_folder("hostile-merge-abs");
    let abs = dir.join("all.pftrace");
    for round in 0..2 {
        ok(
            &lens(&["perfetto", "--merge", p(&dir), "-o", p(&abs)]),
            &format!("absolute, run {round}"),
        );
        assert_eq!(size(&abs), want, "absolute, run {round}");
    }

    let (dir, want) = trace_folder("hostile-merge-rel");
    let parent = dir.parent().expect("parent");
    let name = dir.file_name().and_then(|n| n.to_str()).expect("name");
    let rel = format!("{name}/all.pftrace");
    for round in 0..2 {
        ok(
            &lens_in(Some(parent), &["perfetto", "--merge", name, "-o", &rel]),
            &format!("relative, run {round}"),
        );
        assert_eq!(
            size(&dir.join("all.pftrace")),
            want,
            "relative, run {round}"
        );
    }

    let (dir, want) = trace_folder("hostile-merge-dot");
    for round in 0..2 {
        ok(
            &lens_in(
                Some(&dir),
                &["perfetto", "--merge", ".", "-o", "./all.pftrace"],
            ),
            &format!("./, run {round}"),
        );
        assert_eq!(size(&dir.join("all.pftrace")), want, "./, run {round}");
    }

    let (dir, want) = trace_folder("hostile-merge-link");
    let via = fresh_dir("hostile-merge-link-via").join("to-run");
    std::os::unix::fs::symlink(&dir, &via).expect("symlink");
    for round in 0..2 {
        ok(
            &lens(&[
                "perfetto",
                "--merge",
                p(&dir),
                "-o",
                p(&via.join("all.pftrace")),
            ]),
            &format!("symlinked folder, run {round}"),
        );
        assert_eq!(
            size(&dir.join("all.pftrace")),
            want,
            "symlinked, run {round}"
        );
    }

    // the output reached by a symlink inside the folder, and by a hard
    // link under another name that sorts after the traces
    let (dir, want) = trace_folder("hostile-merge-names");
    let out = fresh_dir("hostile-merge-names-out").join("out.pftrace");
    ok(
        &lens(&["perfetto", "--merge", p(&dir), "-o", p(&out)]),
        "first run",
    );
    std::os::unix::fs::symlink(&out, dir.join("b-link.pftrace")).expect("symlink");
    std::fs::hard_link(&out, dir.join("c-hard.pftrace")).expect("hard link");
    let second = lens(&["perfetto", "--merge", p(&dir), "-o", p(&out)]);
    ok(&second, "second run");
    assert_eq!(size(&out), want);
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains("is the output file; not read"), "{stderr}");

    // named as its only input: an error, and the file is not truncated
    let only = lens(&["perfetto", p(&out), "-o", p(&out)]);
    assert_eq!(only.status.code(), Some(3), "{only:?}");
    assert_eq!(size(&out), want);
}

/// Control characters in span names, host names, run ids, phases, error
/// messages and metric names: printed raw, they clear the screen or set
/// the terminal title. The text report escapes them.
#[test]
fn terminal_escapes_in_names_are_escaped() {
    let dir = fresh_dir("hostile-escapes");
    let evil = "x\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}31m\u{202e}\r\n";
    let mut failed = step(1, 0);
    failed["name"] = json!(format!("step{evil}"));
    failed["status"] = json!({"code": 2, "message": format!("boom{evil}")});
    let mut child = span(2, &format!("phase{evil}"), 1_000_000_001, 10, vec![]);
    child["parentSpanId"] = json!(format!("{:016x}", 1));
    let mut text = line(
        vec![
            int("nv.dl.rank", 0),
            string("host.name", &format!("host{evil}")),
            string("nemo.run.id", &format!("run{evil}")),
        ],
        vec![child, failed],
    );
    text.push_str(
        &json!({"resourceMetrics": [{
            "resource": {"attributes": [int("nv.dl.rank", 0)]},
            "scopeMetrics": [{"metrics": [{
                "name": format!("loss{evil}"),
                "gauge": {"dataPoints": [{"timeUnixNano": "5", "asDouble": 1.5}]}
            }]}]
        }]})
        .to_string(),
    );
    text.push('\n');
    write(&dir.join("e-rank0.otlp.jsonl"), &text);
    let out = lens(&["report", p(&dir)]);
    let stdout = ok(&out, "report with escapes");
    for bad in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}', '\r'] {
        assert!(!stdout.contains(bad), "{bad:?} printed raw:\n{stdout:?}");
    }
    for name in ["host", "run", "boom", "loss", "phase"] {
        assert!(
            stdout.contains(&format!("{name}x\\u{{1b}}]0;owned")),
            "{name} not shown escaped:\n{stdout}"
        );
    }
    // the reader's messages name files the same way
    let odd = dir.join("bad\u{1b}[2J-rank1.otlp.jsonl");
    write(&odd, "not json\n");
    let out = lens(&["report", p(&dir)]);
    ok(&out, "report with an odd file name");
    assert!(
        !out.stderr.contains(&0x1b),
        "{:?}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether the test can deny itself a folder (not when it is root).
fn denied(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_err()
}

/// An unreadable folder and an unreadable file below the named folder:
/// the walk's error named the top folder and aborted the report. Each is
/// now reported by its own path and skipped. (As root, the command runs as
/// `nobody`, for whom the modes hold.)
#[test]
fn unreadable_folders_and_files_are_skipped_by_their_own_path() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = fresh_dir("hostile-unreadable");
    let spans = one_run_file(&dir, "good-rank0.otlp.jsonl", 3);
    let locked = dir.join("locked");
    std::fs::create_dir_all(&locked).expect("mkdir");
    one_run_file(&locked, "hidden-rank1.otlp.jsonl", 2);
    one_run_file(&dir, "closed-rank2.otlp.jsonl", 2);
    std::fs::write(dir.join("c-rank3.pftrace"), b"\x0a\x00").expect("write");
    let lock = |path: &Path, mode| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    };
    lock(&locked, 0o000);
    lock(&dir.join("closed-rank2.otlp.jsonl"), 0o000);
    lock(&dir.join("c-rank3.pftrace"), 0o000);
    let as_nobody = !denied(&locked);
    let run = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lens"));
        cmd.args(args);
        if as_nobody {
            cmd.uid(65534).gid(65534);
        }
        output_within(&mut cmd)
    };
    let out = run(&["report", "--json", p(&dir)]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = ok(&out, "report with unreadable paths");
    lock(&locked, 0o755);
    assert!(
        stderr.contains(&format!("{}: ", locked.display())),
        "the folder is not named: {stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "{}:",
            dir.join("closed-rank2.otlp.jsonl").display()
        )),
        "the file is not named: {stderr}"
    );
    let r: Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(r["spans"]["count"], spans, "{:#}", r["input"]);
    assert_eq!(r["input"]["unreadable_paths"], 1, "{:#}", r["input"]);
    assert_eq!(r["input"]["broken_files"], 1, "{:#}", r["input"]);

    lock(&locked, 0o000);
    let out_dir = fresh_dir("hostile-unreadable-out");
    lock(&out_dir, 0o777);
    let trace = out_dir.join("t.pftrace");
    let out = run(&["perfetto", "--merge", p(&dir), "-o", p(&trace)]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    ok(&out, "perfetto --merge with unreadable paths");
    lock(&locked, 0o755);
    assert!(
        stderr.contains(&format!("{}: ", locked.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{}: ", dir.join("c-rank3.pftrace").display())),
        "{stderr}"
    );
}

/// A 4 MiB attribute value, a 1 MiB span name and a 1 MiB error message:
/// the page copied them whole. Each is cut to 256 bytes with
/// `… (truncated, N bytes)`.
#[test]
fn html_caps_attribute_values_and_says_so() {
    let dir = fresh_dir("hostile-html-cap");
    let huge = "v".repeat(4 << 20);
    let mut s = step(1, 0);
    s["attributes"]
        .as_array_mut()
        .expect("attributes")
        .push(string("payload", &huge));
    let mut failed = span(2, &"n".repeat(1 << 20), 1_000_000_001, 10, vec![]);
    failed["status"] = json!({"code": 2, "message": "m".repeat(1 << 20)});
    write(
        &dir.join("h-rank0.otlp.jsonl"),
        &line(vec![int("nv.dl.rank", 0)], vec![failed, s]),
    );
    let page = dir.with_extension("html");
    ok(
        &lens(&["report", "--html", p(&page), p(&dir)]),
        "html with a huge attribute",
    );
    let html = std::fs::read_to_string(&page).expect("page");
    assert!(html.len() < 512 << 10, "page of {} bytes", html.len());
    assert!(
        html.contains(&format!("… (truncated, {} bytes)", 4 << 20)),
        "the cut is not stated"
    );
    assert!(html.contains(&format!("… (truncated, {} bytes)", 1 << 20)));
    let help = ok(&lens(&["report", "--help"]), "help");
    assert!(help.contains("256 bytes"), "{help}");
}
