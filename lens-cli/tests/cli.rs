//! The `lens` command as a program: one exit code per meaning (documented
//! in `--help`), a quiet exit 0 when stdout is closed early (`| head`), the
//! test tool `synth` hidden from the main help.

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use support::{fresh_dir, lens, lens_clean, run, synth};

fn p(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `cmd` with a stdout whose reader is already gone: every write to
/// it fails with EPIPE, as under `| head -1` once `head` has exited.
fn with_closed_stdout(mut cmd: Command) -> Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("lens runs");
    let mut out = child.wait_with_output().expect("wait");
    out.stdout.clear();
    out
}

#[test]
fn each_exit_code_has_one_meaning() {
    let dir = fresh_dir("cli-exit");
    let run_dir = synth("cli-exit-run", &["--ranks", "2", "--steps", "3"]);
    // 2: usage errors only (clap's own, and what lens checks itself)
    for args in [
        vec!["report", "--no-such-option", p(&run_dir)],
        vec!["report"],
        vec!["report", "--straggler-share", "2", p(&run_dir)],
        vec!["perfetto", "-o", "x.pftrace"],
        vec!["nonsense"],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
    let bad_span = lens_clean()
        .args(["emit-spans", "--service", "s", "--span", "a,2,1"])
        .output()
        .expect("lens runs");
    assert_eq!(bad_span.status.code(), Some(2), "{}", stderr(&bad_span));
    assert!(stderr(&bad_span).contains("END"), "{}", stderr(&bad_span));

    // 3: the input held nothing to report
    let out = run(&["report", p(&dir)]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("no OTLP/JSON-lines files"));
    std::fs::write(dir.join("e.otlp.jsonl"), "\n").expect("write");
    let out = run(&["report", "--json", p(&dir)]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("no spans, metrics or logs found"));
    let trace = dir.join("t.pftrace");
    let out = run(&["perfetto", p(&dir), "-o", p(&trace)]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));

    // 1: the command failed (here: its output cannot be written)
    let html = dir.join("no-such-dir").join("r.html");
    let out = run(&["report", "--html", p(&html), p(&run_dir)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let out = run(&["perfetto", p(&run_dir), "-o", p(&html)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));

    // 0
    let out = run(&["report", p(&run_dir)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn help_documents_the_exit_codes() {
    let top = run(&["--help"]);
    assert!(top.status.success());
    let text = String::from_utf8_lossy(&top.stdout);
    for want in [
        "Exit status:",
        "2  usage error",
        "3  the input held nothing to report",
        "128+N",
    ] {
        assert!(text.contains(want), "lens --help lacks {want:?}:\n{text}");
    }
    for cmd in [
        "report",
        "perfetto",
        "exec",
        "emit-spans",
        "slurm-env",
        "synth",
    ] {
        let out = run(&[cmd, "--help"]);
        assert!(out.status.success(), "{cmd} --help");
        let text = String::from_utf8_lossy(&out.stdout);
        if cmd != "synth" {
            assert!(text.contains("Exit status"), "{cmd} --help:\n{text}");
        }
    }
}

#[test]
fn a_closed_stdout_ends_the_command_quietly_with_0() {
    let dir = synth("cli-epipe", &["--ranks", "4", "--steps", "20"]);
    let mut cases: Vec<(String, Command)> = Vec::new();
    for extra in [&[][..], &["--json"], &["--csv"], &["--rank", "1"]] {
        let mut cmd = lens();
        cmd.arg("report").args(extra).arg(&dir);
        cases.push((format!("report {extra:?}"), cmd));
    }
    let mut cmd = lens();
    cmd.args(["perfetto", p(&dir), "-o", "/dev/stdout"]);
    cases.push(("perfetto -o /dev/stdout".into(), cmd));
    let mut cmd = lens_clean();
    cmd.args(["slurm-env", "--stage", "task"])
        .env("SLURM_JOB_ID", "7");
    cases.push(("slurm-env".into(), cmd));
    for (what, cmd) in cases {
        let out = with_closed_stdout(cmd);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{what}: {}\n{err}", out.status);
        assert!(
            !err.contains("Broken pipe") && !err.contains("os error"),
            "{what}: {err}"
        );
    }
}

#[test]
fn synth_is_hidden_from_the_main_help_but_still_runs() {
    let top = run(&["--help"]);
    let text = String::from_utf8_lossy(&top.stdout);
    assert!(text.contains("report"), "{text}");
    assert!(!text.contains("synth"), "synth is listed:\n{text}");
    let help = run(&["synth", "--help"]);
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--ranks"));
    let dir = synth("cli-synth", &["--ranks", "1", "--steps", "2"]);
    assert!(dir.join("synth-rank0.otlp.jsonl").is_file());
}
