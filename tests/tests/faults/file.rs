//! The file exporter under faults: private files, a full disk, a file-size
//! limit, and NaN / infinite attribute values.

use crate::support::{run_with_timeout, temp_dir as scratch, Finished};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tests::lens_command;

const PROBE: &str = env!("CARGO_BIN_EXE_lens-probe");

/// How long a child may take before it counts as hung.
const LIMIT: Duration = Duration::from_secs(30);

/// The one warning the exporter prints when writes start failing.
const WARNING: &str = "lens: warning: cannot write telemetry";

/// The probe in `mode`, exporting to the file `path`.
fn probe(mode: &str, arg: Option<&str>, path: &Path) -> Command {
    let mut cmd = lens_command(PROBE);
    cmd.args([mode, "sync"])
        .args(arg)
        .env("NEMO_LENS_EXPORTER", "file")
        .env("NEMO_LENS_FILE_PATH", path);
    cmd
}

/// Asserts a clean exit, without panics, and exactly `warnings`
/// write-failure warnings.
#[track_caller]
fn assert_ok(f: &Finished, warnings: usize) {
    assert!(f.status.success(), "probe failed: {f:#?}");
    assert!(!f.stderr.contains("panicked"), "{f:#?}");
    assert!(f.stdout.contains("done"), "{f:#?}");
    assert_eq!(
        f.stderr.matches(WARNING).count(),
        warnings,
        "write-failure warnings: {f:#?}"
    );
}

/// Runs `cmd` to the end, failing if it had to be killed after [`LIMIT`].
#[track_caller]
fn run(mut cmd: Command) -> Finished {
    let f = run_with_timeout(&mut cmd, LIMIT);
    assert!(
        !f.timed_out,
        "{cmd:?} hung (killed after {LIMIT:?}): {f:#?}"
    );
    f
}

/// Every line of `path`, each parsed as JSON (failing on any that is not).
fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "the file ends inside a line: {text:?}"
    );
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("line {} is not JSON ({e}): {l}", i + 1))
        })
        .collect()
}

/// Every span of every line.
fn spans(lines: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    lines
        .iter()
        .flat_map(|l| l["resourceSpans"].as_array().into_iter().flatten())
        .flat_map(|rs| rs["scopeSpans"].as_array().into_iter().flatten())
        .flat_map(|ss| ss["spans"].as_array().into_iter().flatten())
        .collect()
}

/// A file lens creates is 0600, and one that existed with a wider mode
/// (0666) is made private before anything is written to it.
#[test]
fn telemetry_files_are_private() {
    for before in [None, Some(0o666)] {
        let dir = scratch("mode");
        let path = dir.join("rank0.jsonl");
        if let Some(mode) = before {
            std::fs::write(&path, "").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        assert_ok(&run(probe("spans", None, &path)), 0);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "mode {mode:o} (before: {before:?})");
        assert!(!spans(&json_lines(&path)).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_full_disk_warns_once_and_the_job_carries_on() {
    // every write to /dev/full fails with ENOSPC
    let done = run(probe("batches", Some("5"), Path::new("/dev/full")));
    assert_ok(&done, 1);
    assert!(done.stderr.contains("/dev/full"), "{done:#?}");
}

#[test]
fn a_file_size_limit_leaves_only_whole_lines() {
    let dir = scratch("fsize");
    let path = dir.join("rank0.jsonl");
    let limit: u64 = 16 * 1024;
    let mut cmd = probe("batches", Some("30"), &path);
    cmd.env("LENS_PROBE_FSIZE", limit.to_string());
    let done = run(cmd);
    assert_ok(&done, 1);
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size <= limit, "{size} bytes over the {limit} limit");
    let lines = json_lines(&path);
    assert!(!lines.is_empty(), "the first batches fit: {done:#?}");
    assert!(
        spans(&lines).iter().all(|s| s["name"] == "probe.batch"),
        "whole spans only"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn non_finite_attributes_follow_the_proto3_json_mapping() {
    let dir = scratch("nan");
    let path = dir.join("rank0.jsonl");
    assert_ok(&run(probe("nan", None, &path)), 0);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(r#""doubleValue":"NaN""#), "{text}");
    let lines = json_lines(&path);
    let spans = spans(&lines);
    let step = spans
        .iter()
        .find(|s| s["name"] == "probe.nan")
        .unwrap_or_else(|| panic!("no probe.nan span in {text}"));
    let value = |key: &str| {
        step["attributes"]
            .as_array()
            .and_then(|kvs| kvs.iter().find(|kv| kv["key"] == key))
            .map(|kv| kv["value"]["doubleValue"].clone())
            .unwrap_or_else(|| panic!("no {key} in {step}"))
    };
    assert_eq!(value("loss"), "NaN");
    assert_eq!(value("grad_norm"), "Infinity");
    assert_eq!(value("floor"), "-Infinity");
    assert_eq!(value("lr"), 0.25);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn console_export_does_not_wait_for_the_applications_stdout_lock() {
    let mut cmd = lens_command(PROBE);
    cmd.args(["stdout-locked", "sync"])
        .env("NEMO_LENS_EXPORTER", "console");
    let done = run(cmd);
    assert_ok(&done, 0);
    // the span line went out while the application held the lock
    let span = done
        .stdout
        .find(r#""name":"probe.locked""#)
        .unwrap_or_else(|| panic!("no span on stdout: {done:#?}"));
    let flushed = done
        .stdout
        .find("flushed-while-locked ok=true")
        .unwrap_or_else(|| panic!("the flush failed: {done:#?}"));
    assert!(span < flushed, "{done:#?}");
    let line = done.stdout[..flushed]
        .lines()
        .find(|l| l.contains("probe.locked"));
    let parsed: serde_json::Value = serde_json::from_str(line.unwrap_or_default()).unwrap();
    assert!(parsed["resourceSpans"].is_array());
}

/// A symbolic link at the file name is refused, naming the path and why;
/// the file it points at is left alone (issue 39, item 4).
#[test]
fn a_symlink_at_the_file_name_is_refused() {
    let dir = scratch("link-file");
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    let path = dir.join("rank0.jsonl");
    std::os::unix::fs::symlink(&victim, &path).unwrap();
    let f = run(probe("spans", None, &path));
    assert!(!f.status.success(), "setup must refuse: {f:#?}");
    assert!(
        f.stderr.contains("rank0.jsonl") && f.stderr.contains("symbolic link"),
        "{f:#?}"
    );
    assert!(!f.stderr.contains("panicked"), "{f:#?}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A configured run id names the file only through its file-safe form:
/// `../../escaped` stays inside `lens-telemetry/`.
#[test]
fn a_configured_run_id_cannot_leave_the_telemetry_folder() {
    let dir = scratch("run-id-escape");
    let cwd = dir.join("a/b");
    std::fs::create_dir_all(&cwd).unwrap();
    let mut cmd = lens_command(PROBE);
    cmd.args(["spans", "sync"])
        .current_dir(&cwd)
        .env("NEMO_LENS_EXPORTER", "file")
        .env_remove("NEMO_LENS_FILE_PATH")
        .env("NEMO_LENS_RUN_ID", "../../escaped");
    assert_ok(&run(cmd), 0);
    let inside: Vec<_> = std::fs::read_dir(cwd.join("lens-telemetry"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(inside, ["..-..-escaped-rank0.otlp.jsonl"], "{inside:?}");
    for (folder, only) in [(&dir, "a"), (&dir.join("a"), "b")] {
        let names: Vec<_> = std::fs::read_dir(folder)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, [only], "{}: {names:?}", folder.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A final folder that is a symbolic link owned by another user (planted in
/// a shared folder) is refused; the user's own link is followed. Needs root
/// to make a link owned by someone else: CI runs as root, and a run as
/// another user checks the second half only.
#[test]
fn a_foreign_symlinked_folder_is_refused_and_an_own_one_followed() {
    use std::os::unix::ffi::OsStrExt;
    let dir = scratch("link-dir");
    let real = dir.join("real");
    std::fs::create_dir_all(&real).unwrap();
    let own = dir.join("own");
    std::os::unix::fs::symlink(&real, &own).unwrap();
    assert_ok(&run(probe("spans", None, &own.join("rank0.jsonl"))), 0);
    assert!(real.join("rank0.jsonl").exists());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let planted = dir.join("planted");
        std::os::unix::fs::symlink(&real, &planted).unwrap();
        let c = std::ffi::CString::new(planted.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid C string; lchown changes the link, not its target.
        assert_eq!(unsafe { libc::lchown(c.as_ptr(), 65534, 65534) }, 0);
        let f = run(probe("spans", None, &planted.join("other.jsonl")));
        assert!(!f.status.success(), "setup must refuse: {f:#?}");
        assert!(
            f.stderr.contains("symbolic link owned by another user"),
            "{f:#?}"
        );
        assert!(!real.join("other.jsonl").exists());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
