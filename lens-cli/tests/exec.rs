//! `lens exec`: exit codes as a shell gives them, signals forwarded to the
//! child, the root span and its trace handed to the child (the quickstart
//! example joins it).

mod support;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use support::{
    example_binary, fresh_dir, lens_clean, output_within, resource_attr, span_attr, spans_in,
    wait_within,
};

/// `lens exec` with telemetry off.
fn exec_off(args: &[&str]) -> std::process::Output {
    output_within(
        lens_clean()
            .env("NEMO_LENS_ENABLED", "0")
            .arg("exec")
            .arg("--")
            .args(args),
    )
}

/// `lens exec` writing OTLP JSON lines to `dir/run-rank{rank}.otlp.jsonl`.
fn exec_on(dir: &Path) -> Command {
    let mut cmd = lens_clean();
    cmd.env("NEMO_LENS_ENABLED", "1")
        .env("NEMO_LENS_EXPORTER", "file")
        .env("NEMO_LENS_FILE_PATH", dir.join("run-rank{rank}.otlp.jsonl"))
        .arg("exec");
    cmd
}

/// The one span of `lens exec`'s own file.
fn exec_span(dir: &Path) -> serde_json::Value {
    let spans = spans_in(&dir.join("run-rankexec.otlp.jsonl"));
    assert_eq!(spans.len(), 1, "one root span: {spans:#?}");
    spans[0].clone()
}

#[test]
fn exit_codes_pass_through() {
    assert_eq!(exec_off(&["true"]).status.code(), Some(0));
    assert_eq!(exec_off(&["sh", "-c", "exit 3"]).status.code(), Some(3));
}

#[test]
fn a_child_killed_by_signal_n_gives_128_plus_n() {
    let killed = exec_off(&["sh", "-c", "kill -KILL $$"]);
    assert_eq!(killed.status.code(), Some(128 + 9));
    let termed = exec_off(&["sh", "-c", "kill -TERM $$"]);
    assert_eq!(termed.status.code(), Some(128 + 15));
}

#[test]
fn a_command_that_cannot_run_exits_127_with_a_clear_error() {
    let out = exec_off(&["/no/such/command-xyz", "arg"]);
    assert_eq!(out.status.code(), Some(127));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot run /no/such/command-xyz") && err.contains("No such file"),
        "{err}"
    );
}

#[test]
fn sigterm_to_lens_exec_reaches_the_child() {
    let dir = fresh_dir("exec-sigterm");
    // the child says when its trap is set, then waits
    let mut child = exec_on(&dir)
        .args(["--", "sh", "-c"])
        .arg(r#"trap 'kill $! 2>/dev/null; exit 42' TERM; echo ready; sleep 30 & wait"#)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("lens exec starts");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    BufReader::new(stdout).read_line(&mut line).expect("read");
    assert_eq!(line.trim(), "ready");
    let pid = child.id();
    // SAFETY: signalling our own child.
    let kill = unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    assert_eq!(kill, 0, "kill -TERM {pid}");
    let status = wait_within(&mut child, "lens exec");
    assert_eq!(status.code(), Some(42), "the trap's exit code");
    let span = exec_span(&dir);
    assert_eq!(
        span_attr(&span, "lens.exec.forwarded_signal"),
        Some(serde_json::json!({"intValue": "15"}))
    );
    assert_eq!(
        span_attr(&span, "process.exit.code"),
        Some(serde_json::json!({"intValue": "42"}))
    );
}

#[test]
fn sigint_sent_with_kill_is_forwarded_too() {
    let mut cmd = lens_clean();
    // a test run started in the background of a non-interactive shell
    // inherits SIGINT ignored, and lens exec rightly keeps a signal its
    // caller ignores: give lens exec the default disposition
    // SAFETY: `signal` is async-signal-safe, fine between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = cmd
        .args(["exec", "--", "sh", "-c"])
        .arg(r#"trap 'exit 43' INT; echo ready; while :; do sleep 0.1; done"#)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("lens exec starts");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    BufReader::new(stdout).read_line(&mut line).expect("read");
    assert_eq!(line.trim(), "ready");
    let pid = child.id();
    // SAFETY: signalling our own child.
    let kill = unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
    assert_eq!(kill, 0, "kill -INT {pid}");
    assert_eq!(wait_within(&mut child, "lens exec").code(), Some(43));
}

#[test]
fn a_signal_the_caller_ignores_stays_ignored_for_the_child() {
    // `trap '' HUP` ignores SIGHUP for lens exec, which must not install a
    // handler (that would give the child the default disposition again)
    let script = r#"trap '' HUP; exec "$LENS" exec -- sh -c 'kill -HUP $$; echo alive'"#;
    let out = output_within(
        lens_clean()
            .env("LENS", env!("CARGO_BIN_EXE_lens"))
            .arg("exec")
            .args(["--", "sh", "-c", script]),
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "alive");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_bad_configuration_still_runs_the_command() {
    let out = output_within(
        lens_clean()
            .env("NEMO_LENS_ENABLED", "maybe")
            .args(["exec", "--", "sh", "-c", "exit 7"]),
    );
    assert_eq!(out.status.code(), Some(7));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("NEMO_LENS_ENABLED") && err.contains("without a span"),
        "{err}"
    );
}

#[test]
fn the_span_records_exit_code_signal_and_error_status() {
    let dir = fresh_dir("exec-span-exit");
    let out = output_within(exec_on(&dir).args(["--name", "step 1", "--", "sh", "-c", "exit 3"]));
    assert_eq!(out.status.code(), Some(3));
    let span = exec_span(&dir);
    assert_eq!(span["name"], "step 1");
    let instance = resource_attr(&dir.join("run-rankexec.otlp.jsonl"), "service.instance.id");
    let instance = instance.and_then(|v| v["stringValue"].as_str().map(str::to_owned));
    assert!(
        instance.is_some_and(|i| i.ends_with("-exec")),
        "not a rank's instance id"
    );
    assert_eq!(span["status"]["code"], 2, "ERROR: {span:#}");
    assert_eq!(
        span_attr(&span, "process.exit.code"),
        Some(serde_json::json!({"intValue": "3"}))
    );

    let dir = fresh_dir("exec-span-signal");
    let out = output_within(exec_on(&dir).args(["--", "sh", "-c", "kill -KILL $$"]));
    assert_eq!(out.status.code(), Some(137));
    let span = exec_span(&dir);
    assert_eq!(span["name"], "exec sh");
    assert_eq!(span["status"]["code"], 2);
    assert!(span["status"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("SIGKILL")));
    assert_eq!(
        span_attr(&span, "process.exit.signal"),
        Some(serde_json::json!({"intValue": "9"}))
    );

    let dir = fresh_dir("exec-span-ok");
    let out = output_within(exec_on(&dir).args(["--", "true"]));
    assert_eq!(out.status.code(), Some(0));
    assert_ne!(exec_span(&dir)["status"]["code"], 2);
}

#[test]
fn the_child_gets_the_span_as_traceparent_and_an_incoming_one_is_joined() {
    let dir = fresh_dir("exec-traceparent");
    let incoming_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let incoming_span = "00f067aa0ba902b7";
    let out = output_within(
        exec_on(&dir)
            .env(
                "TRACEPARENT",
                format!("00-{incoming_trace}-{incoming_span}-01"),
            )
            .args(["--", "sh", "-c", "echo \"$TRACEPARENT\""]),
    );
    assert!(out.status.success());
    let span = exec_span(&dir);
    assert_eq!(span["traceId"], incoming_trace);
    assert_eq!(span["parentSpanId"], incoming_span);
    let expected = format!(
        "00-{incoming_trace}-{}-01",
        span["spanId"].as_str().expect("span id")
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), expected);
}

#[test]
fn a_stale_tracestate_is_not_handed_on_baggage_is() {
    let dir = fresh_dir("exec-stale");
    let out = output_within(
        exec_on(&dir)
            .env("TRACESTATE", "vendor=stale")
            .env("BAGGAGE", "k=stale")
            .args(["--", "sh", "-c", "echo \"[$TRACESTATE][$BAGGAGE]\""]),
    );
    assert!(out.status.success());
    // baggage is not tied to a trace: it travels on through the context
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[][k=stale]");
    assert_eq!(exec_span(&dir)["parentSpanId"], "", "a new trace");
}

#[test]
fn with_telemetry_off_the_child_runs_and_nothing_is_written() {
    let dir = fresh_dir("exec-off");
    let out = output_within(lens_clean().current_dir(&dir).args([
        "exec",
        "--",
        "sh",
        "-c",
        "echo \"[$TRACEPARENT]\"; exit 5",
    ]));
    assert_eq!(out.status.code(), Some(5));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
    assert_eq!(std::fs::read_dir(&dir).expect("dir").count(), 0);
}

#[test]
fn the_quickstart_joins_the_trace_of_lens_exec() {
    let quickstart = example_binary("quickstart");
    let dir = fresh_dir("exec-quickstart");
    let out = output_within(exec_on(&dir).arg("--").arg(&quickstart));
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let root = exec_span(&dir);
    let trace = root["traceId"].as_str().expect("trace id");
    let child_spans = spans_in(&dir.join("run-rank0.otlp.jsonl"));
    assert!(child_spans.len() >= 5, "{child_spans:#?}");
    for s in &child_spans {
        assert_eq!(s["traceId"], trace, "{} is in the exec trace", s["name"]);
    }
    let job = child_spans
        .iter()
        .find(|s| s["name"] == "job")
        .expect("the quickstart's job span");
    assert_eq!(job["parentSpanId"], root["spanId"]);
}
