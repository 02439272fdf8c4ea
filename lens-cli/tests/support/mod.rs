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
