//! `setup_telemetry` and the handle, in-process.

mod common;

use common::Capture;

use lens::otel::trace::Status;
use lens::{managed_span, span_cm, ExporterKind, LensConfig, SetupError, TelemetryBuilder};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use tests::{sockets, threads};

static LOCK: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn enabled(spec: &str) -> LensConfig {
    let mut c = LensConfig::default();
    c.enabled = true;
    c.span_groups = spec.into();
    c.export_strategy = "all_ranks".into();
    c
}

/// Rank 0 of 1 exporting spans matching `spec` into a fresh [`Capture`].
fn install_capture(spec: &str) -> (lens::TelemetryHandle, Capture) {
    let exporter = Capture::default();
    let h = TelemetryBuilder::new(enabled(spec), 0, 1)
        .with_span_exporter(exporter.clone())
        .install()
        .unwrap();
    (h, exporter)
}

/// Telemetry threads (lens's own, the SDK's processors, tokio workers) that
/// exist in `after` but not in `before`, by thread id. Other tests' threads
/// come and go meanwhile, so only names telemetry could start count.
fn new_threads(
    before: &std::collections::BTreeMap<String, String>,
    after: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
    after
        .iter()
        .filter(|(tid, _)| !before.contains_key(*tid))
        .filter(|(_, name)| {
            ["lens", "OpenTelemetry", "tokio"]
                .iter()
                .any(|p| name.starts_with(p))
        })
        .map(|(_, name)| name.clone())
        .collect()
}

#[test]
fn disabled_and_non_exporting_ranks_start_nothing() {
    let _s = serial();
    let (t0, s0) = (threads(), sockets());
    // disabled
    let h = lens::setup_telemetry(LensConfig::default(), 0, 8).unwrap();
    assert!(!h.is_exporting() && !h.is_enabled());
    assert!(
        managed_span!("job", "x").is_none(),
        "no group may be enabled"
    );
    // enabled, but single_rank exports from the last rank only (with the
    // profile off: on, the rank records its steps' phases in memory, with
    // no thread and no socket either; tests/rank_profile.rs checks that)
    let mut cfg = enabled("all");
    cfg.export_strategy = "single_rank".into();
    cfg.profile = false;
    let h2 = lens::setup_telemetry(cfg, 0, 8).unwrap();
    assert!(h2.is_enabled() && !h2.is_exporting());
    assert!(
        managed_span!("job", "x").is_none(),
        "no group may be enabled"
    );
    std::thread::sleep(Duration::from_millis(50));
    let started = new_threads(&t0, &threads());
    assert!(
        started.is_empty(),
        "a non-exporting setup started threads: {started:?}"
    );
    assert!(sockets() <= s0, "a non-exporting setup opened sockets");
    drop((h, h2));
    // the probe can fail: an exporting OTLP rank does start threads
    let h3 = TelemetryBuilder::new(enabled("all"), 7, 8)
        .install()
        .unwrap();
    assert!(h3.is_exporting());
    // the export threads may take a moment to appear on a loaded machine
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut started = new_threads(&t0, &threads());
    while started.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        started = new_threads(&t0, &threads());
    }
    assert!(!started.is_empty(), "the thread probe saw nothing");
    h3.shutdown(Duration::from_secs(1));
}

#[test]
fn second_enabled_setup_is_an_error_unless_reinit() {
    let _s = serial();
    let (h, exporter) = install_capture("default");
    let err = lens::setup_telemetry(enabled("default"), 0, 1).unwrap_err();
    assert!(matches!(err, SetupError::AlreadyInitialized));
    assert!(err.to_string().contains("allow_reinit"), "{err}");
    let h2 = TelemetryBuilder::new(enabled("default"), 0, 1)
        .with_span_exporter(exporter)
        .allow_reinit(true)
        .install()
        .unwrap();
    drop(h2);
    drop(h);
    // after shutdown a fresh setup works again
    let h = lens::setup_telemetry(enabled("default"), 0, 1).unwrap();
    h.shutdown(Duration::from_secs(1));
}

#[test]
fn bad_config_fails_before_anything_is_installed_on_every_rank() {
    let _s = serial();
    for rank in [0, 3] {
        let mut c = enabled("default,stpe");
        c.export_strategy = "single_rank".into();
        let e = lens::setup_telemetry(c, rank, 4).unwrap_err();
        assert!(e.to_string().contains("stpe"), "{e}");
        let mut c = enabled("default");
        c.export_strategy = "nope".into();
        let e = lens::setup_telemetry(c, rank, 4).unwrap_err();
        assert!(e.to_string().contains("export_strategy"), "{e}");
        // disabled configs are validated too
        let mut c = LensConfig::default();
        c.export_sample_rate = 2.0;
        assert!(lens::setup_telemetry(c, rank, 4).is_err());
    }
    // nothing is left installed
    let h = lens::setup_telemetry(enabled("default"), 0, 1).unwrap();
    h.shutdown(Duration::from_secs(1));
}

#[test]
fn shutdown_truncates_open_spans_innermost_first_and_is_idempotent() {
    let _s = serial();
    let (h, exporter) = install_capture("all");
    let job = span_cm!("job");
    let step = managed_span!("step", "step");
    let done = span_cm!("done");
    drop(done);
    h.shutdown(Duration::from_secs(5)).into_result().unwrap();
    h.shutdown(Duration::from_secs(5)).into_result().unwrap(); // idempotent
    drop(step);
    drop(job);
    let spans = exporter.finished();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
    assert_eq!(
        names,
        ["done", "step", "job"],
        "innermost first, each exactly once"
    );
    for s in &spans[1..] {
        assert!(s
            .attributes
            .iter()
            .any(|kv| kv.key.as_str() == "nemo.span.truncated"
                && kv.value == lens::otel::Value::Bool(true)));
        let ev = s
            .events
            .iter()
            .find(|e| e.name == "nemo.span.truncated")
            .unwrap();
        assert!(ev
            .attributes
            .iter()
            .any(|kv| kv.key.as_str() == "nemo.span.truncated.reason"
                && kv.value.as_str() == "still open at telemetry shutdown"));
        assert_eq!(s.status, Status::Unset);
    }
    assert!(!spans[0]
        .attributes
        .iter()
        .any(|kv| kv.key.as_str() == "nemo.span.truncated"));
    // after shutdown, sites are off again
    assert!(managed_span!("step", "late").is_none());
}

/// Open spans are tracked per thread in lists that outlive their thread (an
/// exited thread's list is reused by the next new thread): shutdown must
/// still end a span made on a thread that has exited (the span moved to
/// this one), a span held open by a live worker thread, and nothing that
/// ended, whichever list it was registered in.
#[test]
fn shutdown_truncates_spans_of_other_and_exited_threads() {
    let _s = serial();
    let (h, exporter) = install_capture("all");
    // made on a thread that exits; its list goes back to the pool
    let moved = std::thread::spawn(|| span_cm!("moved").into_span())
        .join()
        .unwrap();
    // a live worker: one span ended, one held open until after shutdown
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        drop(span_cm!("short"));
        let held = span_cm!("held");
        started_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        drop(held);
    });
    started_rx.recv().unwrap();
    // more thread churn: lists are reused, spans in them end normally
    for i in 0..8 {
        std::thread::spawn(move || drop(span_cm!("churn", i = i)))
            .join()
            .unwrap();
    }
    h.shutdown(Duration::from_secs(5)).into_result().unwrap();
    release_tx.send(()).unwrap();
    worker.join().unwrap();
    drop(moved); // already ended: no second export

    let spans = exporter.finished();
    let truncated = |s: &lens::otel_sdk::trace::SpanData| {
        s.attributes
            .iter()
            .any(|kv| kv.key.as_str() == "nemo.span.truncated")
    };
    let mut got: Vec<(String, bool)> = spans
        .iter()
        .map(|s| (s.name.to_string(), truncated(s)))
        .collect();
    got.sort();
    let mut want: Vec<(String, bool)> = vec![
        ("held".into(), true),
        ("moved".into(), true),
        ("short".into(), false),
    ];
    want.extend((0..8).map(|_| ("churn".to_owned(), false)));
    want.sort();
    assert_eq!(got, want, "each span exactly once, open ones truncated");
}

#[test]
fn drop_flushes_and_custom_strategy_decides() {
    let _s = serial();
    let exporter = Capture::default();
    {
        let _h = TelemetryBuilder::new(enabled("step"), 2, 4)
            .with_span_exporter(exporter.clone())
            .with_export_strategy(|_, rank, _| rank == 2)
            .install()
            .unwrap();
        drop(managed_span!("step", "s"));
    }
    assert_eq!(exporter.finished().len(), 1, "drop must flush");
    let h = TelemetryBuilder::new(enabled("step"), 1, 4)
        .with_span_exporter(exporter.clone())
        .with_export_strategy(|_, rank, _| rank == 2)
        .install()
        .unwrap();
    assert!(!h.is_exporting());
}

#[test]
fn resource_attributes_with_caller_precedence() {
    let _s = serial();
    let exporter = Capture::default();
    let mut cfg = enabled("all");
    cfg.run_id = Some("run7".into());
    cfg.user = Some("alice".into());
    cfg.wandb_project = Some("proj".into());
    let h = TelemetryBuilder::new(cfg, 3, 8)
        .with_span_exporter(exporter.clone())
        .with_resource_attribute("host.name", "caller-host")
        .with_resource_attribute("team", "pretrain")
        .install()
        .unwrap();
    drop(span_cm!("r"));
    h.shutdown(Duration::from_secs(5)).into_result().unwrap();
    assert_eq!(exporter.finished().len(), 1);
    let get = |k: &str| exporter.resource_attr(k);
    assert_eq!(get("nv.dl.rank").as_deref(), Some("3"));
    assert_eq!(get("nv.dl.world_size").as_deref(), Some("8"));
    // the released Python library's names too (issue 43)
    assert_eq!(get("dl.rank").as_deref(), Some("3"));
    assert_eq!(get("dl.world_size").as_deref(), Some("8"));
    assert_eq!(get("nemo.run.id").as_deref(), Some("run7"));
    assert_eq!(get("service.instance.id").as_deref(), Some("run7-rank3"));
    assert_eq!(get("nemo.user.id").as_deref(), Some("alice"));
    assert_eq!(get("wandb.project").as_deref(), Some("proj"));
    assert_eq!(get("service.name").as_deref(), Some("nemo"));
    assert_eq!(
        get("host.name").as_deref(),
        Some("caller-host"),
        "caller beats detected"
    );
    assert_eq!(get("team").as_deref(), Some("pretrain"));
    assert_eq!(get("process.pid"), Some(std::process::id().to_string()));
}

#[test]
fn file_exporter_writes_otlp_json_lines() {
    let _s = serial();
    let dir = std::env::temp_dir().join(format!("lens-file-{}", std::process::id()));
    let mut cfg = enabled("all");
    cfg.exporter = ExporterKind::File;
    cfg.file_path = Some(dir.join("rank{rank}.jsonl").to_string_lossy().into_owned());
    let h = TelemetryBuilder::new(cfg, 5, 8).install().unwrap();
    assert_eq!(h.file_path().unwrap(), dir.join("rank5.jsonl"));
    {
        let _g = span_cm!("file.parent", prompt = "secret words");
        drop(span_cm!("file.child", n = 3));
    }
    h.shutdown(Duration::from_secs(5)).into_result().unwrap();
    let text = std::fs::read_to_string(dir.join("rank5.jsonl")).unwrap();
    let mut names = Vec::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("each line is JSON");
        for rs in v["resourceSpans"].as_array().unwrap() {
            for ss in rs["scopeSpans"].as_array().unwrap() {
                for s in ss["spans"].as_array().unwrap() {
                    names.push(s["name"].as_str().unwrap().to_owned());
                    // OTLP/JSON: ids are hex strings
                    assert_eq!(s["traceId"].as_str().unwrap().len(), 32);
                    assert_eq!(s["spanId"].as_str().unwrap().len(), 16);
                }
            }
        }
    }
    assert!(!text.contains("secret words"));
    assert_eq!(names, ["file.child", "file.parent"]);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn unknown_protocol_is_a_config_error() {
    let _s = serial();
    // SAFETY: tests in this binary are serialised by `serial()`; no other
    // thread reads the environment concurrently here.
    unsafe { std::env::set_var("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "carrier-pigeon") };
    let e = lens::setup_telemetry(enabled("all"), 0, 1).unwrap_err();
    unsafe { std::env::remove_var("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL") };
    let msg = e.to_string();
    assert!(
        msg.contains("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL")
            && msg.contains("carrier-pigeon")
            && msg.contains("http/protobuf"),
        "{msg}"
    );
}

/// Lost telemetry is a report naming the signal, the count and the cause,
/// never an error (issue 38, item 1): a file that cannot be written (disk
/// full) and a collector that refuses the connection.
#[test]
fn shutdown_reports_what_was_lost_and_why() {
    let _g = serial();
    let mut cfg = enabled("default");
    cfg.exporter = ExporterKind::File;
    cfg.file_path = Some("/dev/full".into());
    cfg.metrics_enabled = false;
    let h = lens::setup_telemetry(cfg, 0, 1).unwrap();
    for i in 0..5 {
        drop(span_cm!("disk.full", i = i));
    }
    let report = h.shutdown(Duration::from_secs(5));
    assert_eq!(report.traces.lost, 5, "{report:?}");
    assert_eq!(report.traces.exported, 0, "{report:?}");
    assert!(
        matches!(&report.traces.cause, Some(lens::LossCause::WriteFailed { detail, .. })
            if detail.contains("No space left")),
        "{report:?}"
    );
    assert!(
        report.metrics.is_clean() && report.logs.is_clean(),
        "{report:?}"
    );
    let line = report.to_string();
    assert!(
        line.starts_with("telemetry was lost") && line.contains("traces: 5 of 5 spans lost"),
        "{line}"
    );
    assert!(report.clone().into_result().is_err());
    // idempotent: a second shutdown has nothing more to say
    assert!(h.shutdown(Duration::from_secs(1)).is_clean());

    // a port nobody listens on
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::env::set_var(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        format!("http://127.0.0.1:{port}"),
    );
    let mut cfg = enabled("default");
    cfg.exporter = ExporterKind::Otlp;
    cfg.metrics_enabled = false;
    let h = lens::setup_telemetry(cfg, 0, 1);
    std::env::remove_var("OTEL_EXPORTER_OTLP_ENDPOINT");
    let h = h.unwrap();
    drop(span_cm!("refused"));
    let report = h.shutdown(Duration::from_secs(5));
    assert_eq!(
        (report.traces.lost, report.traces.timed_out),
        (1, false),
        "{report:?}"
    );
    assert!(
        matches!(&report.traces.cause, Some(lens::LossCause::Unreachable { destination, .. })
            if destination.contains(&port.to_string())),
        "{report:?}"
    );
}
