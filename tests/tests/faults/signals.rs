//! SIGTERM / SIGINT: lens flushes and otherwise leaves signal handling as
//! the process had it.

use crate::support::*;

fn with_app_handler(how: &str) {
    let dir = temp_dir(&format!("app-{how}"));
    let f = run_with_timeout_and(
        &mut fault("app-handler", Some(how), &dir),
        TIMEOUT,
        |child, wait| {
            assert!(wait("ready"), "the probe never got ready");
            kill(child, libc::SIGTERM);
        },
    );
    check(
        f.status.success() && f.stdout.contains("checkpoint done"),
        &format!("{how}: the application's own SIGTERM handler must run and the process must end normally"),
        &f,
    );
    let names = span_names(&dir);
    for n in ["fault.step", "app.checkpoint", "fault.job"] {
        assert!(
            names.iter().any(|s| s == n),
            "{how}: {n} not exported: {names:?}"
        );
    }
    // the job span ended normally, after the checkpoint: not truncated
    let job = span_named(&dir, "fault.job");
    assert!(
        !job.attributes.contains_key("nemo.span.truncated"),
        "{job:?}"
    );
}

#[test]
fn app_handler_installed_before_with_sigaction_survives() {
    with_app_handler("sigaction-before");
}

#[test]
fn app_handler_installed_after_with_sigaction_survives() {
    with_app_handler("sigaction-after");
}

#[test]
fn app_handler_installed_before_with_signal_hook_survives() {
    with_app_handler("signal-hook-before");
}

#[test]
fn app_handler_installed_after_with_signal_hook_survives() {
    with_app_handler("signal-hook-after");
}

#[test]
fn app_handler_installed_after_with_tokio_survives() {
    with_app_handler("tokio-after");
}

/// Lens is the only handler over the default disposition: it ends the open
/// spans (truncated), flushes, then dies by the signal as the process would
/// have.
fn dies_by(mode: &str, sig: i32) -> (Finished, std::path::PathBuf) {
    let dir = temp_dir(&format!("{mode}-{sig}"));
    let f = run_with_timeout_and(&mut fault(mode, None, &dir), TIMEOUT, |child, wait| {
        assert!(wait("ready"), "the probe never got ready");
        kill(child, sig);
    });
    check(
        f.signal() == Some(sig),
        &format!("{mode}: must die by signal {sig}"),
        &f,
    );
    (f, dir)
}

#[test]
fn sole_handler_flushes_truncated_spans_then_dies_by_sigterm() {
    let (_, dir) = dies_by("sole", libc::SIGTERM);
    let job = span_named(&dir, "fault.job");
    assert!(
        job.attributes.contains_key("nemo.span.truncated"),
        "{job:?}"
    );
}

#[test]
fn sole_handler_dies_by_sigint() {
    dies_by("sole", libc::SIGINT);
}

#[test]
fn an_ignored_sigint_stays_ignored() {
    let dir = temp_dir("sigint-ignored");
    let f = run_with_timeout_and(
        &mut fault("sigint-ignored", None, &dir),
        TIMEOUT,
        |child, wait| {
            assert!(wait("ready"), "the probe never got ready");
            kill(child, libc::SIGINT);
            std::thread::sleep(std::time::Duration::from_millis(300));
            kill(child, libc::SIGINT);
            std::thread::sleep(std::time::Duration::from_millis(300));
            assert!(
                child.try_wait().unwrap().is_none(),
                "an ignored SIGINT killed the process"
            );
            kill(child, libc::SIGTERM);
        },
    );
    check(
        f.signal() == Some(libc::SIGTERM),
        "SIGTERM must still end it",
        &f,
    );
    assert!(span_names(&dir).iter().any(|n| n == "fault.job"));
}

#[test]
fn the_hook_follows_the_live_handle_across_a_resetup() {
    let (_, dir) = dies_by("resetup", libc::SIGTERM);
    let names = span_names(&dir);
    assert!(names.iter().any(|n| n == "first.span"), "{names:?}");
    assert!(
        names.iter().any(|n| n == "fault.job"),
        "the live pipeline's open span was lost: {names:?}"
    );
}

#[test]
fn a_closed_stderr_does_not_break_the_hook() {
    let (_, dir) = dies_by("stderr-closed", libc::SIGTERM);
    assert!(span_names(&dir).iter().any(|n| n == "fault.job"));
    // and a second SIGTERM-style death is still possible: run it again
    let (_, _) = dies_by("stderr-closed", libc::SIGTERM);
}

#[test]
fn shutdown_with_a_closed_stderr_does_not_panic() {
    let dir = temp_dir("stderr-closed-shutdown");
    // the queue holds one span: the warning about lost spans is written
    let f = run_with_timeout(
        fault("stderr-closed", Some("shutdown"), &dir).env("OTEL_BSP_MAX_QUEUE_SIZE", "1"),
        TIMEOUT,
    );
    check(
        f.status.success() && f.stdout.contains("shut down"),
        "shutdown must not panic",
        &f,
    );
}

#[test]
fn a_sigterm_flush_with_a_callback_reading_the_handle_ends() {
    let dir = temp_dir("callback-signal");
    let f = run_with_timeout_and(
        fault("callback-reads-handle", Some("signal"), &dir).env("NEMO_LENS_METRICS_ENABLED", "1"),
        TIMEOUT,
        |child, wait| {
            assert!(wait("ready"), "the probe never got ready");
            kill(child, libc::SIGTERM);
        },
    );
    check(f.signal() == Some(libc::SIGTERM), "must die by SIGTERM", &f);
}

#[test]
fn the_signal_flush_has_a_deadline() {
    let addr = hung_collector(); // accepts connections, never answers
    let dir = temp_dir("signal-deadline");
    let mut cmd = fault("sole", None, &dir);
    cmd.env("NEMO_LENS_EXPORTER", "otlp")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}"))
        .env("NEMO_LENS_SIGNAL_FLUSH_TIMEOUT", "1");
    let mut sent = None;
    let f = run_with_timeout_and(&mut cmd, TIMEOUT, |child, wait| {
        assert!(wait("ready"), "the probe never got ready");
        sent = Some(std::time::Instant::now());
        kill(child, libc::SIGTERM);
    });
    check(f.signal() == Some(libc::SIGTERM), "must die by SIGTERM", &f);
    let after = sent.unwrap().elapsed();
    check(
        after < std::time::Duration::from_secs(4),
        &format!("died {after:?} after SIGTERM with NEMO_LENS_SIGNAL_FLUSH_TIMEOUT=1"),
        &f,
    );
}

#[test]
fn a_sigterm_during_shutdown_waits_for_its_export() {
    let dir = temp_dir("sigterm-in-shutdown");
    let out = dir.join("names.txt");
    let f = run_with_timeout(
        &mut fault("sigterm-in-shutdown", Some(out.to_str().unwrap()), &dir),
        TIMEOUT,
    );
    check(f.signal() == Some(libc::SIGTERM), "must die by SIGTERM", &f);
    let names = std::fs::read_to_string(&out).unwrap_or_default();
    assert_eq!(names.matches("slow.span").count(), 5, "{names}");
}

#[test]
fn an_application_handler_without_sa_restart_still_interrupts_calls() {
    let dir = temp_dir("eintr");
    let f = run_with_timeout_and(&mut fault("eintr", None, &dir), TIMEOUT, |child, wait| {
        assert!(wait("ready"), "the probe never got ready");
        std::thread::sleep(std::time::Duration::from_millis(200));
        kill(child, libc::SIGTERM);
    });
    check(
        f.status.success() && f.stdout.contains("read interrupted"),
        "lens must keep the application's SA_RESTART choice",
        &f,
    );
}

#[test]
fn a_one_shot_application_handler_still_lets_the_second_signal_kill() {
    let dir = temp_dir("resethand");
    let f = run_with_timeout_and(
        &mut fault("resethand", None, &dir),
        TIMEOUT,
        |child, wait| {
            assert!(wait("ready"), "the probe never got ready");
            kill(child, libc::SIGINT);
            std::thread::sleep(std::time::Duration::from_millis(500));
            assert!(
                child.try_wait().unwrap().is_none(),
                "the first SIGINT must be the application's"
            );
            kill(child, libc::SIGINT);
        },
    );
    check(
        f.signal() == Some(libc::SIGINT),
        "the second SIGINT must kill",
        &f,
    );
}

#[test]
fn a_second_signal_during_the_flush_kills_at_once() {
    let addr = hung_collector();
    let dir = temp_dir("second-signal");
    let mut cmd = fault("sole", None, &dir);
    cmd.env("NEMO_LENS_EXPORTER", "otlp")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}"))
        .env("NEMO_LENS_SIGNAL_FLUSH_TIMEOUT", "20");
    let mut second = None;
    let f = run_with_timeout_and(&mut cmd, TIMEOUT, |child, wait| {
        assert!(wait("ready"), "the probe never got ready");
        kill(child, libc::SIGTERM);
        std::thread::sleep(std::time::Duration::from_millis(500));
        second = Some(std::time::Instant::now());
        kill(child, libc::SIGINT);
    });
    let after = second.unwrap().elapsed();
    check(f.signal().is_some(), "must die by a signal", &f);
    check(
        after < std::time::Duration::from_secs(5),
        &format!("died {after:?} after the second signal (flush deadline 20 s)"),
        &f,
    );
}

#[test]
fn a_sigterm_during_shutdown_is_not_swallowed_by_a_normal_exit() {
    let dir = temp_dir("sigterm-then-exit");
    let out = dir.join("names.txt");
    let f = run_with_timeout(
        &mut fault("sigterm-then-exit", Some(out.to_str().unwrap()), &dir),
        TIMEOUT,
    );
    check(
        f.signal() == Some(libc::SIGTERM),
        "main returned during the signal flush: the process must still die of SIGTERM",
        &f,
    );
    assert!(std::fs::read_to_string(&out)
        .unwrap_or_default()
        .contains("slow.span"));
}

#[test]
fn recording_goes_on_in_order_after_a_signal_flush_the_application_survives() {
    let dir = temp_dir("keeps-running");
    let file = dir.join("spans.jsonl");
    let f = run_with_timeout_and(
        fault("keeps-running", Some(file.to_str().unwrap()), &dir)
            // nothing but the signal's flush exports before shutdown
            .env("OTEL_BSP_SCHEDULE_DELAY", "600000")
            .env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "100000")
            .env("OTEL_BSP_MAX_QUEUE_SIZE", "1000000"),
        TIMEOUT,
        |child, wait| {
            assert!(wait("ready"), "the probe never got ready");
            kill(child, libc::SIGTERM);
        },
    );
    check(
        f.status.success() && f.stdout.contains("flushed"),
        "the application's handler took SIGTERM: lens must flush and the process go on to a normal end",
        &f,
    );
    let number_after = |prefix: &str| -> Vec<i64> {
        let line = f.stdout.lines().find_map(|l| l.strip_prefix(prefix));
        let line = line.unwrap_or_else(|| panic!("no {prefix:?} line: {}", f.stdout));
        line.split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect()
    };
    let ended_before_signal = number_after("ready: ended ");
    let recorded = number_after("recorded ")[0] as usize;
    // the spans of thread `t` in `spans`, as their sequence numbers, in
    // the order they were exported
    let seqs = |spans: &[tests::FileSpan], t: i64| -> Vec<i64> {
        spans
            .iter()
            .filter(|s| s.name == "run.span" && s.int_attr("run.thread") == Some(t))
            .map(|s| {
                s.int_attr("run.seq")
                    .unwrap_or_else(|| panic!("no run.seq: {s:?}"))
            })
            .collect()
    };
    let at_flush = file_spans(&dir.join("at-flush.jsonl"));
    let spans = file_spans(&file);
    for t in 0..2 {
        // the flush exported every span the thread had ended before the
        // signal, and only in order
        let flushed = seqs(&at_flush, t);
        assert!(
            flushed.len() as i64 >= ended_before_signal[t as usize]
                && flushed.iter().copied().eq(0..flushed.len() as i64),
            "thread {t}: the signal flush must export every span ended before the signal \
             ({}), in order: {flushed:?}",
            ended_before_signal[t as usize]
        );
    }
    let parents: Vec<_> = spans.iter().filter(|s| s.name == "run.parent").collect();
    assert_eq!(parents.len(), 2, "one parent per thread");
    let mut exported = 0;
    for t in 0..2 {
        let flushed = seqs(&at_flush, t);
        let parent = parents
            .iter()
            .find(|p| p.int_attr("run.thread") == Some(t))
            .unwrap_or_else(|| panic!("no parent of thread {t}"));
        // open across the signal: ended by the thread, not truncated
        assert!(
            !parent.attributes.contains_key("nemo.span.truncated"),
            "{parent:?}"
        );
        // every span of the thread, exactly once, in the order it ended
        let all = seqs(&spans, t);
        assert!(
            all.iter().copied().eq(0..all.len() as i64),
            "thread {t}: spans lost, repeated or out of order across the signal flush: {all:?}"
        );
        let mine: Vec<_> = spans
            .iter()
            .filter(|s| s.name == "run.span" && s.int_attr("run.thread") == Some(t))
            .collect();
        for s in &mine {
            assert_eq!(s.parent_span_id, parent.span_id, "thread {t}: {s:?}");
            assert!(!s.attributes.contains_key("nemo.span.truncated"), "{s:?}");
        }
        let after = mine
            .iter()
            .filter(|s| s.bool_attr("run.after_signal") == Some(true))
            .count();
        assert!(
            after > 0 && after < mine.len() && all.len() > flushed.len(),
            "thread {t}: {after} of {} spans after the signal, {} flushed: the test must record on both sides",
            mine.len(),
            flushed.len()
        );
        exported += mine.len();
    }
    assert_eq!(exported, recorded, "every recorded span exported once");
}
