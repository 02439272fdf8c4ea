//! Flush and shutdown deadlines, re-init, memory, panics, fork, and the
//! smaller runtime items.

use crate::support::*;
use std::time::Duration;

#[test]
fn force_flush_with_a_callback_reading_the_handle_returns() {
    let dir = temp_dir("callback");
    let f = run_with_timeout(
        fault("callback-reads-handle", None, &dir).env("NEMO_LENS_METRICS_ENABLED", "1"),
        TIMEOUT,
    );
    check(
        f.status.success() && f.stdout.contains("flushed in"),
        "flush deadlocked",
        &f,
    );
}

#[test]
fn shutdown_meets_its_deadline_with_a_hung_collector() {
    let addr = hung_collector(); // accepts connections, never answers
    for protocol in ["grpc", "http/protobuf"] {
        let dir = temp_dir("hung");
        let f = run_with_timeout(
            fault("hung-collector", None, &dir)
                .env("NEMO_LENS_EXPORTER", "otlp")
                .env("NEMO_LENS_METRICS_ENABLED", "1")
                .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
                .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}")),
            TIMEOUT,
        );
        check(f.status.success(), protocol, &f);
        let ms = stdout_num(&f, "took_ms=");
        check(
            ms < 3_000,
            &format!("{protocol}: shutdown(2 s) took {ms} ms"),
            &f,
        );
        check(
            f.stdout.contains("did not answer within 2s"),
            &format!("{protocol}: the report must name what timed out"),
            &f,
        );
        check(
            f.stdout.contains("traces: 100 of 100 spans lost"),
            &format!("{protocol}: every span still queued or in flight counts as lost"),
            &f,
        );
    }
}

#[test]
fn export_timeout_is_honoured() {
    // OTEL_BSP_EXPORT_TIMEOUT bounds one export call: with 300 ms, the span
    // export fails fast and the shutdown reports lost spans, not a timeout
    let addr = hung_collector(); // accepts connections, never answers
    let dir = temp_dir("export-timeout");
    let f = run_with_timeout(
        fault("hung-collector", None, &dir)
            .env("NEMO_LENS_EXPORTER", "otlp")
            .env("OTEL_BSP_EXPORT_TIMEOUT", "300")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}")),
        TIMEOUT,
    );
    check(
        f.stdout.contains("spans lost")
            && f.stdout.contains("did not answer within 300ms")
            && !f.stdout.contains("traces: still exporting"),
        "the export call must give up after OTEL_BSP_EXPORT_TIMEOUT",
        &f,
    );
}

#[test]
fn reinit_tears_down_only_what_each_handle_installed() {
    let dir = temp_dir("reinit");
    let f = run_with_timeout(&mut fault("reinit", None, &dir), TIMEOUT);
    check(
        f.status.success() && f.stdout.contains("reinit ok"),
        "re-init",
        &f,
    );
    let open = span_named(&dir, "b.open");
    assert!(
        !open.attributes.contains_key("nemo.span.truncated"),
        "{open:?}"
    );
    assert!(span_names(&dir).iter().any(|n| n == "b.step"));
}

#[test]
fn setup_shutdown_cycles_keep_memory_flat() {
    let cycles = std::env::var("LENS_SOAK_CYCLES").unwrap_or_else(|_| "1000".into());
    let dir = temp_dir("soak");
    let f = run_with_timeout(
        &mut fault("soak", Some(&cycles), &dir),
        Duration::from_secs(600),
    );
    check(f.status.success(), "soak", &f);
    let (early, late) = (
        stdout_num(&f, "after 20="),
        stdout_num(&f, &format!("after {cycles}=")),
    );
    check(
        late < early + 8 * 1024,
        &format!("RSS grew from {early} KiB to {late} KiB over {cycles} cycles"),
        &f,
    );
    assert!(span_names(&dir).len() >= 5);
}

#[test]
fn an_impossible_queue_size_is_an_error_naming_the_variable() {
    let dir = temp_dir("queue");
    for v in ["1000000000000000", "0", "-3"] {
        let f = run_with_timeout(
            fault("dropped-count", None, &dir).env("OTEL_BSP_MAX_QUEUE_SIZE", v),
            TIMEOUT,
        );
        check(
            f.status.code() == Some(2) && f.stderr.contains("OTEL_BSP_MAX_QUEUE_SIZE"),
            v,
            &f,
        );
    }
}

#[test]
fn the_first_span_created_during_unwinding_does_not_abort() {
    let dir = temp_dir("unwind");
    let f = run_with_timeout(&mut fault("span-in-unwind", None, &dir), TIMEOUT);
    check(
        f.status.success() && f.stdout.contains("survived"),
        "span in a Drop during a panic",
        &f,
    );
    let s = span_named(&dir, "during.unwind");
    assert_eq!(s.status_message.as_deref(), Some("panic: boom"), "{s:?}");
}

#[test]
fn resume_unwind_is_not_labelled_with_an_older_panic() {
    let dir = temp_dir("resume");
    let f = run_with_timeout(&mut fault("resume-unwind", None, &dir), TIMEOUT);
    check(f.status.success(), "resume_unwind", &f);
    let s = span_named(&dir, "resumed");
    assert_ne!(
        s.status_message.as_deref(),
        Some("panic: old panic"),
        "{s:?}"
    );
    assert!(
        s.status_message.is_some(),
        "the span must still be marked ERROR: {s:?}"
    );
}

/// `(name, trace id, span id, parent id, resource process.pid, attribute
/// child_pid)` of every span in `dir/spans.jsonl`.
fn spans_with_pids(dir: &std::path::Path) -> Vec<(String, String, String, String, i64, i64)> {
    let int = |v: &serde_json::Value| {
        let i = &v["intValue"];
        i.as_i64()
            .or_else(|| i.as_str()?.parse().ok())
            .unwrap_or(-1)
    };
    let attr = |list: &serde_json::Value, key: &str| {
        list.as_array()
            .into_iter()
            .flatten()
            .find(|kv| kv["key"] == key)
            .map_or(-1, |kv| int(&kv["value"]))
    };
    let text = std::fs::read_to_string(dir.join("spans.jsonl")).unwrap_or_default();
    let mut out = Vec::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for rs in v["resourceSpans"].as_array().into_iter().flatten() {
            let pid = attr(&rs["resource"]["attributes"], "process.pid");
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                for sp in ss["spans"].as_array().into_iter().flatten() {
                    let text = |k: &str| sp[k].as_str().unwrap_or("").to_owned();
                    out.push((
                        text("name"),
                        text("traceId"),
                        text("spanId"),
                        text("parentSpanId"),
                        pid,
                        attr(&sp["attributes"], "child_pid"),
                    ));
                }
            }
        }
    }
    out
}

/// A child forked while other threads hold open spans keeps recording: its
/// spans are exported by the child (its pid in the resource), with fresh
/// ids, in the parent's trace; the parent's spans are exported once, by
/// the parent.
#[test]
fn a_forked_child_keeps_recording_and_never_exports_the_parents_spans() {
    let dir = temp_dir("fork");
    let f = run_with_timeout(&mut fault("fork", None, &dir), TIMEOUT);
    check(
        f.status.success() && f.stdout.contains("fork ok"),
        "fork",
        &f,
    );
    let num = |key: &str| -> i64 {
        let at = f.stdout.find(key).unwrap() + key.len();
        f.stdout[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (parent, child) = (num("parent="), num("child="));
    let spans = spans_with_pids(&dir);
    let named = |n: &str| spans.iter().filter(|s| s.0 == n).collect::<Vec<_>>();
    for n in [
        "parent.job",
        "parent.worker",
        "parent.before",
        "parent.after",
    ] {
        let s = named(n);
        assert_eq!(s.len(), 1, "{n} exported once: {spans:#?}");
        assert_eq!(s[0].4, parent, "{n} by the parent");
    }
    let job = named("parent.job")[0];
    for n in ["child.span", "child.step"] {
        let s = named(n);
        assert_eq!(s.len(), 1, "{n} exported once: {spans:#?}");
        assert_eq!(s[0].5, child, "{n} recorded in the child");
        assert_eq!(s[0].4, child, "{n} exported by the child (its resource)");
        // the child's span is in the parent's trace, under the span that
        // was current when it forked
        assert_eq!((&s[0].1, &s[0].3), (&job.1, &job.2), "{n}'s parent");
    }
    let ids: std::collections::BTreeSet<&String> = spans.iter().map(|s| &s.2).collect();
    assert_eq!(ids.len(), spans.len(), "fresh span ids: {spans:#?}");
}

#[test]
fn a_zero_schedule_delay_does_not_spin() {
    let dir = temp_dir("idle");
    let f = run_with_timeout(
        fault("idle", None, &dir).env("OTEL_BSP_SCHEDULE_DELAY", "0"),
        TIMEOUT,
    );
    check(f.status.success(), "idle", &f);
    let ms = stdout_num(&f, "idle_cpu_ms=");
    // a spinning export thread would burn ~2000 ms of CPU in the 2 s
    check(ms < 500, &format!("{ms} ms of CPU while idle for 2 s"), &f);
}

#[test]
fn dropped_spans_counts_losses_not_queued_spans() {
    let dir = temp_dir("dropped");
    let f = run_with_timeout(&mut fault("dropped-count", None, &dir), TIMEOUT);
    check(
        f.status.success() && f.stdout.contains("dropped=0"),
        "dropped_spans",
        &f,
    );
    assert_eq!(span_names(&dir).len(), 1000);
}

#[test]
fn every_signal_is_redacted_before_export() {
    let dir = temp_dir("redaction");
    let f = run_with_timeout(
        fault("redaction", None, &dir)
            .env("NEMO_LENS_METRICS_ENABLED", "1")
            .env("NEMO_LENS_LOGS_ENABLED", "1")
            .env("NEMO_LENS_REDACT_KEYS", "email")
            .env("OTEL_RESOURCE_ATTRIBUTES", "deploy.token=SECRET-9,team=nlp"),
        TIMEOUT,
    );
    check(f.status.success(), "redaction", &f);
    let text = std::fs::read_to_string(dir.join("spans.jsonl")).unwrap();
    // each signal reached the file, with its non-sensitive values
    for needle in [
        "scoped.span",
        "fault.scoped",
        "redaction.span",
        "visible",
        "fault.requests",
        "a log line",
        "team",
    ] {
        assert!(text.contains(needle), "{needle} missing from {text}");
    }
    for n in 1..=11 {
        let secret = format!("SECRET-{n}");
        assert!(
            !text.contains(&secret),
            "{secret} exported in clear: {text}"
        );
    }
    assert!(text.matches("[REDACTED]").count() >= 9, "{text}");
}

#[test]
fn a_forked_child_can_set_lens_up_again() {
    let dir = temp_dir("fork-resetup");
    let f = run_with_timeout(&mut fault("fork-resetup", None, &dir), TIMEOUT);
    check(
        f.status.success() && f.stdout.contains("fork-resetup ok"),
        "fork-resetup",
        &f,
    );
    for suffix in ["after-shutdown", "while-live"] {
        let path = dir.join(format!("spans.jsonl.{suffix}"));
        let names: Vec<String> = file_spans(&path).into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["child.own"], "{suffix}: {names:?}");
    }
}

#[test]
fn metrics_recorded_in_a_forked_child_never_hang_it() {
    let dir = temp_dir("fork-metrics");
    let f = run_with_timeout(
        fault("fork-metrics", Some("100"), &dir)
            .env("NEMO_LENS_METRICS_ENABLED", "1")
            .env("OTEL_METRIC_EXPORT_INTERVAL", "1"),
        Duration::from_secs(300),
    );
    check(
        f.status.success() && f.stdout.contains("hung=0"),
        "fork-metrics",
        &f,
    );
}

#[test]
fn short_flush_deadlines_against_a_hung_collector_do_not_pile_up_threads() {
    let addr = hung_collector();
    let dir = temp_dir("flush-loop");
    let f = run_with_timeout(
        fault("flush-loop", None, &dir)
            .env("NEMO_LENS_EXPORTER", "otlp")
            .env("NEMO_LENS_METRICS_ENABLED", "1")
            .env("NEMO_LENS_LOGS_ENABLED", "1")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}")),
        TIMEOUT,
    );
    check(f.status.success(), "flush-loop", &f);
    let (before, most) = (stdout_num(&f, "before="), stdout_num(&f, "most="));
    check(
        most <= before + 4,
        &format!("threads grew from {before} to {most} over 200 flushes"),
        &f,
    );
}

#[test]
fn a_panicking_exporter_or_callback_does_not_stop_export() {
    let dir = temp_dir("panics");
    let out = dir.join("names.txt");
    let f = run_with_timeout(
        fault("panics", Some(out.to_str().unwrap()), &dir).env("NEMO_LENS_METRICS_ENABLED", "1"),
        TIMEOUT,
    );
    check(
        f.status.success() && f.stdout.contains("flush_ok=true dropped=1"),
        "after a panicking export, the next flush works and the lost span is counted",
        &f,
    );
    let names = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(names.contains("after.panic"), "{names}");
    let calls = stdout_num(&f, "callback_calls=");
    check(
        calls >= 2,
        "the metric callback must run again after its panic",
        &f,
    );
}

#[test]
fn a_shutdown_that_gives_up_exports_nothing_more() {
    let dir = temp_dir("abandon");
    let out = dir.join("names.txt");
    let f = run_with_timeout(
        fault("abandon", Some(out.to_str().unwrap()), &dir)
            .env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "10"),
        TIMEOUT,
    );
    check(f.status.success(), "abandon", &f);
    let (at_return, later) = (stdout_num(&f, "at_return="), stdout_num(&f, "later="));
    // at most the one batch that was in flight when the deadline passed
    check(
        later <= at_return + 10,
        &format!("{at_return} exported at shutdown, {later} two seconds later"),
        &f,
    );
}

#[test]
fn a_flush_whose_spans_all_failed_reports_it() {
    let dir = temp_dir("flush-fails");
    let f = run_with_timeout(
        fault("flush-fails", None, &dir).env("NEMO_LENS_FILE_PATH", "/dev/full"),
        TIMEOUT,
    );
    check(
        f.status.success() && f.stdout.contains("flush_ok=false"),
        "force_flush must not report success over spans it lost",
        &f,
    );
}

/// A failing exporter is reported when it first fails, once, naming where
/// spans go; not only at shutdown.
#[test]
fn the_first_export_failure_is_reported_when_it_happens() {
    let dir = temp_dir("first-failure");
    let f = run_with_timeout(
        fault("flush-fails", None, &dir).env("NEMO_LENS_FILE_PATH", "/dev/full"),
        TIMEOUT,
    );
    let failure = "lens: exporting spans to /dev/full failed";
    let at = f.stderr.find(failure);
    let flushed = f.stderr.find("flush-returned");
    check(
        f.stderr.matches(failure).count() == 1 && at.is_some() && at < flushed,
        "one report of the first failed export, before the flush returned",
        &f,
    );
}

/// An exporting setup says once where telemetry goes; `NEMO_LENS_QUIET=1`
/// hides the line.
#[test]
fn setup_says_where_telemetry_goes_unless_quiet() {
    let dir = temp_dir("setup-line");
    let path = dir.join("spans.jsonl");
    let f = run_with_timeout(&mut fault("flush-fails", None, &dir), TIMEOUT);
    let line = f
        .stderr
        .lines()
        .find(|l| l.starts_with("lens: run "))
        .unwrap_or_default()
        .to_owned();
    check(
        f.stderr.matches("lens: run ").count() == 1
            && line.contains("rank 0 of 1")
            && line.contains(&path.display().to_string())
            && line.contains("span groups: job"),
        "one setup line with rank, destination and groups",
        &f,
    );
    let f = run_with_timeout(
        fault("flush-fails", None, &dir).env("NEMO_LENS_QUIET", "1"),
        TIMEOUT,
    );
    check(
        f.status.success() && !f.stderr.contains("lens: run "),
        "NEMO_LENS_QUIET=1 hides the setup line",
        &f,
    );
}

#[test]
fn a_fifo_with_no_reader_fails_setup_instead_of_hanging() {
    let dir = temp_dir("fifo");
    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: creating a FIFO in our own temp dir.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let f = run_with_timeout(
        fault("dropped-count", None, &dir).env("NEMO_LENS_FILE_PATH", &fifo),
        Duration::from_secs(20),
    );
    check(
        !f.timed_out
            && f.status.code() == Some(2)
            && f.stderr.contains("FIFO")
            && f.stderr.contains("NEMO_LENS_FILE_PATH"),
        "setup must fail fast, naming the variable",
        &f,
    );
}

#[test]
fn log_records_lost_to_a_full_queue_are_reported() {
    let dir = temp_dir("log-storm");
    let f = run_with_timeout(
        fault("log-storm", None, &dir)
            .env("NEMO_LENS_LOGS_ENABLED", "1")
            .env("OTEL_BLRP_MAX_QUEUE_SIZE", "64"),
        TIMEOUT,
    );
    check(
        f.status.success()
            && f.stdout.contains("flush=telemetry was lost")
            && f.stdout.contains(
                "log records lost (the export queue was full (raise OTEL_BLRP_MAX_QUEUE_SIZE))",
            ),
        "lost log records must make the flush and the shutdown fail",
        &f,
    );
}

#[test]
fn the_console_exporter_survives_a_closed_pipe_with_default_sigpipe() {
    let mut cmd = tests::lens_command(env!("CARGO_BIN_EXE_lens-fault"));
    cmd.arg("sigpipe")
        .env("NEMO_LENS_EXPORTER", "console")
        .env("NEMO_LENS_METRICS_ENABLED", "0")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    drop(child.stdout.take()); // nobody reads: writes get EPIPE (or SIGPIPE)
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.contains("survived"),
        "{:?}\n{stderr}",
        out.status
    );
}
