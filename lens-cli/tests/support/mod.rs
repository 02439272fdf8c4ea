//! Helpers shared by the `lens` command tests: running the built binary,
//! fresh output directories, counting spans independently.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `lens` binary under test.
pub(crate) fn lens() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lens"))
}

/// Runs `lens` with `args`; returns the output.
pub(crate) fn run(args: &[&str]) -> Output {
    lens().args(args).output().expect("the lens binary runs")
}

/// Runs `lens` and asserts success; returns stdout.
pub(crate) fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "lens {args:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("stdout is UTF-8")
}

/// A fresh directory under the cargo target tmp dir.
pub(crate) fn fresh_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create test dir");
    dir
}

/// `lens synth ARGS --out <fresh dir NAME>`; returns the directory.
///
/// `lens synth` is the test tool that writes a synthetic multi-rank run
/// (`--ranks`, `--steps`, `--straggler RANK:PHASE:PCT`, `--truncate RANK`,
/// `--unsynchronized`, `--gzip`, …): hidden from `lens --help`, documented
/// by `lens synth --help`.
pub(crate) fn synth(name: &str, args: &[&str]) -> PathBuf {
    let dir = fresh_dir(name);
    let mut all = vec!["synth"];
    all.extend_from_slice(args);
    all.extend(["--out", dir.to_str().expect("UTF-8 path")]);
    ok(&all);
    dir
}

/// `lens report --json` parsed.
pub(crate) fn report_json(paths: &[&Path], extra: &[&str]) -> serde_json::Value {
    let mut args: Vec<String> = vec!["report".into(), "--json".into()];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(paths.iter().map(|p| p.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    serde_json::from_str(&ok(&args)).expect("report --json is JSON")
}

/// Counts spans per name in every `.jsonl` file of `dir`, with serde_json
/// values only (independent of the code under test).
pub(crate) fn count_spans(dir: &Path) -> std::collections::BTreeMap<String, u64> {
    let mut counts = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("read file");
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).expect("valid line");
            for rs in v["resourceSpans"].as_array().into_iter().flatten() {
                for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                    for s in ss["spans"].as_array().into_iter().flatten() {
                        let name = s["name"].as_str().unwrap_or("").to_owned();
                        *counts.entry(name).or_insert(0) += 1;
                    }
                }
            }
        }
    }
    counts
}

/// How long a test waits for a child process before it kills it and fails.
pub(crate) const DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

/// Runs `cmd` (stdin closed, output captured) and waits at most
/// [`DEADLINE`]: a process still running then is killed and the test fails.
pub(crate) fn output_within(cmd: &mut Command) -> Output {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    /// Reads a pipe to its end on a thread.
    fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    }
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let status = wait_within(&mut child, &format!("{cmd:?}"));
    Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// Waits for `child` at most [`DEADLINE`]; kills it and fails after that.
pub(crate) fn wait_within(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} still ran after {DEADLINE:?}: killed");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `lens` with a clean telemetry environment: no inherited trace context,
/// collector, SLURM job or `NEMO_LENS_*` / `OTEL_*` setting.
pub(crate) fn lens_clean() -> Command {
    let mut cmd = lens();
    for (key, _) in std::env::vars_os() {
        let k = key.to_string_lossy();
        if k.starts_with("NEMO_LENS_")
            || k.starts_with("OTEL_")
            || k.starts_with("SLURM")
            || ["TRACEPARENT", "TRACESTATE", "BAGGAGE"].contains(&k.as_ref())
        {
            cmd.env_remove(&key);
        }
    }
    cmd
}

/// The spans of an OTLP JSON lines file, in file order.
pub(crate) fn spans_in(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut spans = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).expect("valid line");
        for rs in v["resourceSpans"].as_array().into_iter().flatten() {
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                spans.extend(ss["spans"].as_array().into_iter().flatten().cloned());
            }
        }
    }
    spans
}

/// The value of resource attribute `key` in the first resource of the file.
pub(crate) fn resource_attr(path: &Path, key: &str) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(path).ok()?;
    let line: serde_json::Value = serde_json::from_str(text.lines().next()?).ok()?;
    let attrs = line["resourceSpans"][0]["resource"]["attributes"].as_array()?;
    attrs
        .iter()
        .find(|a| a["key"] == key)
        .map(|a| a["value"].clone())
}

/// The value of span attribute `key` (as OTLP JSON, e.g. `{"intValue":"3"}`).
pub(crate) fn span_attr(span: &serde_json::Value, key: &str) -> Option<serde_json::Value> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)
        .map(|a| a["value"].clone())
}

/// An example binary (`cargo build -p examples --example NAME`, or built by
/// `cargo test --workspace --all-targets`): next to this test's profile
/// directory first, then under `CARGO_TARGET_DIR` (or the workspace's
/// `target/`), debug before release, as `tests::example_binary` looks.
pub(crate) fn example_binary(name: &str) -> PathBuf {
    let file = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    let mut candidates = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        // target/<profile>/deps/<test>-<hash>
        if let Some(profile_dir) = exe.parent().and_then(|deps| deps.parent()) {
            candidates.push(profile_dir.join("examples").join(&file));
        }
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    for profile in ["debug", "release"] {
        candidates.push(target.join(profile).join("examples").join(&file));
    }
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "the {name} example is not built (looked at {candidates:?}); build it with \
                 `cargo build -p examples --example {name}` (scripts/test-all.sh \
                 builds every example before the tests)"
            )
        })
}

/// The headless browser on this machine, if any.
pub(crate) fn chromium() -> Option<String> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(str::to_owned)
}

/// Runs headless Chromium; fails the test if it takes over two minutes.
pub(crate) fn browser(
    bin: &str,
    profile: &Path,
    extra: &[&str],
    url: &str,
) -> std::process::Output {
    let out_dir = profile.join("out");
    std::fs::create_dir_all(&out_dir).expect("browser output dir");
    let (stdout, stderr) = (out_dir.join("stdout"), out_dir.join("stderr"));
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdout(std::fs::File::create(&stdout).expect("stdout file"))
        .stderr(std::fs::File::create(&stderr).expect("stderr file"))
        .spawn()
        .expect("chromium starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for chromium") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 120 s ({url})");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    std::process::Output {
        status,
        stdout: std::fs::read(&stdout).unwrap_or_default(),
        stderr: std::fs::read(&stderr).unwrap_or_default(),
    }
}
