//! The log bridge: end to end against a real collector (`rotel`), the probe
//! program as a separate process (the bridge installs process-wide loggers),
//! and in-process behaviour on an in-memory log exporter.

use lens::logs::log;
use lens::logs::{
    setup_logging_bridge, setup_logging_bridge_with_provider, InstallStatus, Level, LogBridgeLayer,
    LogBridgeOptions,
};
use lens::otel::trace::{
    Span as _, SpanContext, TraceContextExt as _, Tracer as _, TracerProvider as _,
};
use lens::otel_sdk::logs::{InMemoryLogExporter, SdkLogRecord, SdkLoggerProvider};
use lens::otel_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use std::process::Output;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use tests::{get, Log, Received, Rotel};
use tracing_subscriber::layer::SubscriberExt as _;

const PROBE: &str = env!("CARGO_BIN_EXE_lens-probe");

fn probe(env: &[(&str, String)]) -> Output {
    let mut cmd = tests::lens_command(PROBE);
    cmd.args(["logs", "sync"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    tests::run_ok(&mut cmd)
}

/// The records the probe emits that pass its filters (`trainer` and below,
/// info and above), each exactly once.
const BRIDGED: [&str; 7] = [
    "log outside span",
    "log in job",
    "tracing in job",
    "log in step",
    "tracing in step",
    "log after second setup",
    "tracing after second setup",
];

fn logs_of<'a>(r: &'a Received, run_id: &str) -> Vec<&'a Log> {
    r.logs
        .iter()
        .filter(|l| get(&l.resource, "nemo.run.id") == Some(run_id))
        .collect()
}

fn body(l: &Log) -> &str {
    get(&l.fields, "Body").unwrap_or("")
}

fn field<'a>(l: &'a Log, key: &str) -> &'a str {
    get(&l.fields, key).unwrap_or_else(|| panic!("no {key:?} in {l:?}"))
}

/// Runs the probe's `logs` mode against `rotel` and checks everything it
/// should have exported.
fn check_probe_run(rotel: &Rotel, run_id: &str, mut env: Vec<(&'static str, String)>) {
    env.push(("NEMO_LENS_LOGS_ENABLED", "1".into()));
    env.push(("NEMO_LENS_RUN_ID", run_id.into()));
    let out = probe(&env);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("bridge active=true log=Installed tracing=Installed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("bridge active=true log=Reused tracing=Reused"),
        "the second setup reuses the installed hooks: {stdout}"
    );
    rotel.wait_for(
        Duration::from_secs(20),
        &format!("logs and spans of {run_id}"),
        |r| {
            logs_of(r, run_id).len() >= BRIDGED.len()
                && r.spans.iter().any(|s| {
                    s.name == "probe.logs.after" && get(&s.resource, "nemo.run.id") == Some(run_id)
                })
        },
    );
    // anything duplicated or unfiltered would have been sent in the same
    // export as the rest; give the collector a moment to print it anyway
    std::thread::sleep(Duration::from_millis(500));
    let r = rotel.received();
    let logs = logs_of(&r, run_id);
    let mut bodies: Vec<&str> = logs.iter().map(|l| body(l)).collect();
    bodies.sort_unstable();
    let mut expected = BRIDGED.to_vec();
    expected.sort_unstable();
    assert_eq!(
        bodies, expected,
        "each bridged record once; none below the level, none of another target"
    );

    let span = |name: &str| {
        r.spans
            .iter()
            .find(|s| s.name == name && get(&s.resource, "nemo.run.id") == Some(run_id))
            .unwrap_or_else(|| panic!("no span {name} of {run_id}"))
    };
    let (job, step, after) = (
        span("probe.logs.job"),
        span("probe.logs.step"),
        span("probe.logs.after"),
    );
    let log = |b: &str| *logs.iter().find(|l| body(l) == b).unwrap();
    for (b, s) in [
        ("log in job", job),
        ("tracing in job", job),
        ("log in step", step),
        ("tracing in step", step),
        ("log after second setup", after),
        ("tracing after second setup", after),
    ] {
        let l = log(b);
        assert_eq!(
            field(l, "Trace ID"),
            s.trace_id,
            "{b}: trace id of {}",
            s.name
        );
        assert_eq!(field(l, "Span ID"), s.span_id, "{b}: span id of {}", s.name);
        assert_eq!(field(l, "Flags"), "1", "{b}: sampled");
    }
    assert!(!job.trace_id.is_empty() && step.trace_id == job.trace_id);

    let outside = log("log outside span");
    assert_eq!(
        field(outside, "Trace ID"),
        "",
        "outside any span: no trace id"
    );
    assert_eq!(field(outside, "Span ID"), "");

    // severity from `log` and from `tracing`
    for (b, text, number) in [
        ("log in job", "INFO", "9"),
        ("tracing in job", "WARN", "13"),
        ("log in step", "ERROR", "17"),
        ("tracing in step", "INFO", "9"),
    ] {
        assert_eq!(field(log(b), "SeverityText"), text, "{b}");
        assert_eq!(field(log(b), "SeverityNumber"), number, "{b}");
    }
    // the target becomes the instrumentation scope; fields become attributes
    assert_eq!(log("log in job").scope, "trainer::loop");
    assert_eq!(log("log in step").scope, "trainer");
    assert_eq!(get(&log("tracing in job").attributes, "step"), Some("7"));
    // when it happened, not only when the SDK saw it
    for l in &logs {
        let ts: u64 = field(l, "Timestamp").parse().unwrap();
        let observed: u64 = field(l, "ObservedTimestamp").parse().unwrap();
        assert!(ts > 0 && ts <= observed, "{l:?}");
    }
    // the logs carry the rank's resource like spans do
    assert_eq!(get(&outside.resource, "service.name"), Some("nemo"));
    assert_eq!(get(&outside.resource, "nv.dl.rank"), Some("0"));
}

#[test]
fn records_arrive_with_span_ids_severity_filters_and_no_duplicates_over_grpc() {
    let rotel = Rotel::start();
    let env = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", rotel.grpc_endpoint()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".to_owned()),
    ];
    check_probe_run(&rotel, "logs-grpc", env);
}

#[test]
fn records_arrive_over_http_protobuf_and_http_json() {
    let rotel = Rotel::start();
    for (protocol, run_id) in [("http/protobuf", "logs-http"), ("http/json", "logs-json")] {
        let env = vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", rotel.http_endpoint()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol.to_owned()),
        ];
        check_probe_run(&rotel, run_id, env);
    }
}

#[test]
fn the_logs_protocol_variable_overrides_the_general_one() {
    // traces over gRPC, logs alone over http/protobuf to their own endpoint
    let rotel = Rotel::start();
    let env = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", rotel.grpc_endpoint()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".to_owned()),
        (
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
            format!("{}/v1/logs", rotel.http_endpoint()),
        ),
        (
            "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL",
            "http/protobuf".to_owned(),
        ),
    ];
    check_probe_run(&rotel, "logs-mixed", env);
}

#[test]
fn nothing_is_bridged_when_logs_are_disabled_or_the_rank_does_not_export() {
    let rotel = Rotel::start();
    let endpoint = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", rotel.grpc_endpoint()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".to_owned()),
    ];
    // logs disabled (the default): spans arrive, log records do not
    let mut env = endpoint.clone();
    env.push(("NEMO_LENS_RUN_ID", "logs-off".into()));
    let out = probe(&env);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("bridge active=false log=NotRequested tracing=NotRequested"),
        "{stdout}"
    );
    // logs enabled, but this rank does not export
    let mut env = endpoint;
    env.extend([
        ("NEMO_LENS_RUN_ID", "logs-rank0".to_owned()),
        ("NEMO_LENS_LOGS_ENABLED", "1".to_owned()),
        ("NEMO_LENS_EXPORT_STRATEGY", "single_rank".to_owned()),
        ("RANK", "0".to_owned()),
        ("WORLD_SIZE", "2".to_owned()),
    ]);
    let out = probe(&env);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("exporting=false"), "{stdout}");
    assert!(
        stdout.contains("bridge active=false log=NotRequested tracing=NotRequested"),
        "{stdout}"
    );

    rotel.wait_for(Duration::from_secs(20), "spans of logs-off", |r| {
        r.spans.iter().any(|s| {
            s.name == "probe.logs.after" && get(&s.resource, "nemo.run.id") == Some("logs-off")
        })
    });
    std::thread::sleep(Duration::from_millis(500));
    let r = rotel.received();
    assert!(r.logs.is_empty(), "no log record at all: {:?}", r.logs);
    assert!(
        !r.spans
            .iter()
            .any(|s| get(&s.resource, "nemo.run.id") == Some("logs-rank0")),
        "the non-exporting rank sends nothing"
    );
}

// ---- in-process behaviour on an in-memory log exporter ----------------------

/// The bridge is process-wide state: in-process tests take turns.
static LOCK: Mutex<()> = Mutex::new(());

struct Fixture {
    logs: InMemoryLogExporter,
    provider: SdkLoggerProvider,
    spans: InMemorySpanExporter,
    _lock: MutexGuard<'static, ()>,
}

impl Fixture {
    /// A fresh in-memory logger provider bridged with `options`, and lens
    /// spans going to an in-memory span exporter.
    fn new(options: LogBridgeOptions) -> Fixture {
        let lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let logs = InMemoryLogExporter::default();
        let provider = SdkLoggerProvider::builder()
            .with_simple_exporter(logs.clone())
            .build();
        let bridge = setup_logging_bridge_with_provider(&provider, options).unwrap();
        assert!(bridge.is_active());
        assert!(bridge.log_status().is_bridging(), "{bridge:?}");
        let spans = InMemorySpanExporter::default();
        let tp = SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .build();
        lens::set_tracer_provider(&tp);
        Fixture {
            logs,
            provider,
            spans,
            _lock: lock,
        }
    }

    fn records(&self) -> Vec<SdkLogRecord> {
        records(&self.logs)
    }

    fn bodies(&self) -> Vec<String> {
        bodies(&self.logs)
    }

    fn record(&self, body: &str) -> SdkLogRecord {
        let all = self.bodies();
        let i = all
            .iter()
            .position(|b| b == body)
            .unwrap_or_else(|| panic!("no record {body:?}; got {all:?}"));
        self.records().swap_remove(i)
    }
}

fn records(logs: &InMemoryLogExporter) -> Vec<SdkLogRecord> {
    logs.get_emitted_logs()
        .unwrap()
        .into_iter()
        .map(|l| l.record)
        .collect()
}

fn bodies(logs: &InMemoryLogExporter) -> Vec<String> {
    records(logs)
        .iter()
        .map(|r| match r.body() {
            Some(lens::otel::logs::AnyValue::String(s)) => s.as_str().to_owned(),
            other => format!("{other:?}"),
        })
        .collect()
}

fn ids(r: &SdkLogRecord) -> Option<(String, String)> {
    r.trace_context()
        .map(|t| (t.trace_id.to_string(), t.span_id.to_string()))
}

fn span_ids(cx: &SpanContext) -> Option<(String, String)> {
    Some((cx.trace_id().to_string(), cx.span_id().to_string()))
}

fn scoped<T>(subscriber: impl tracing::Subscriber + Send + Sync, f: impl FnOnce() -> T) -> T {
    tracing::subscriber::with_default(subscriber, f)
}

#[test]
fn lens_span_ids_reach_log_and_tracing_records_in_process() {
    let f = Fixture::new(LogBridgeOptions::new().with_target("trainer"));
    let subscriber = tracing_subscriber::registry().with(LogBridgeLayer::new());
    let cx = scoped(subscriber, || {
        let g = lens::span_cm!("in.process");
        let cx = g.context().span().span_context().clone();
        log::info!(target: "trainer", "via log");
        tracing::info!(target: "trainer", "via tracing");
        cx
    });
    assert!(cx.is_valid());
    assert_eq!(ids(&f.record("via log")), span_ids(&cx));
    assert_eq!(ids(&f.record("via tracing")), span_ids(&cx));
    for l in f.logs.get_emitted_logs().unwrap() {
        assert!(l.record.timestamp().is_some(), "event time is set");
        assert_eq!(l.record.target().map(|t| t.as_ref()), Some("trainer"));
        assert_eq!(l.instrumentation.name(), "nemo.lens");
    }
    assert_eq!(f.spans.get_finished_spans().unwrap().len(), 1);
}

#[test]
fn tracing_opentelemetry_spans_give_their_ids_to_events() {
    let f = Fixture::new(LogBridgeOptions::new().with_target("trainer"));
    let tp = SdkTracerProvider::builder()
        .with_simple_exporter(f.spans.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(tp.tracer("tracing")))
        .with(LogBridgeLayer::new());
    scoped(subscriber, || {
        let span = tracing::info_span!("tracing.span");
        let _e = span.enter();
        tracing::warn!(target: "trainer", "inside a tracing span");
        log::warn!(target: "trainer", "log inside a tracing span");
    });
    let spans = f.spans.get_finished_spans().unwrap();
    let s = spans.iter().find(|s| s.name == "tracing.span").unwrap();
    assert_eq!(
        ids(&f.record("inside a tracing span")),
        span_ids(&s.span_context)
    );
    assert_eq!(
        ids(&f.record("log inside a tracing span")),
        span_ids(&s.span_context)
    );
    // and a raw OpenTelemetry span made current works as well
    let tracer = tp.tracer("raw");
    let raw = tracer.start("raw");
    let cx = raw.span_context().clone();
    let _g = lens::otel::Context::current_with_span(raw).attach();
    log::info!(target: "trainer", "inside a raw span");
    assert_eq!(ids(&f.record("inside a raw span")), span_ids(&cx));
}

#[test]
fn level_and_target_filters_apply_to_log_and_tracing() {
    let f = Fixture::new(
        LogBridgeOptions::new()
            .with_level(Level::Warn)
            .with_targets(["trainer", "data::loader"]),
    );
    let subscriber = tracing_subscriber::registry().with(LogBridgeLayer::new());
    scoped(subscriber, || {
        log::warn!(target: "trainer", "a");
        log::error!(target: "trainer::deep::module", "b");
        tracing::warn!(target: "data::loader::worker", "c");
        log::info!(target: "trainer", "below level");
        tracing::info!(target: "trainer", "tracing below level");
        log::error!(target: "trainers", "sibling prefix");
        tracing::error!(target: "data", "parent of a target");
        log::error!(target: "opentelemetry_sdk", "the SDK's own logs");
        tracing::error!(target: "tonic::transport", "the exporter's network stack");
    });
    assert_eq!(f.bodies(), ["a", "b", "c"]);
}

#[test]
fn setting_up_twice_never_duplicates_and_the_latest_setup_wins() {
    let f = Fixture::new(LogBridgeOptions::new().with_target("trainer"));
    // the same provider again (a program calling setup twice)
    let again = setup_logging_bridge_with_provider(
        &f.provider,
        LogBridgeOptions::new().with_target("trainer"),
    )
    .unwrap();
    assert_eq!(again.log_status(), InstallStatus::Reused);
    // two bridge layers in one subscriber (say, one per setup call)
    let subscriber = tracing_subscriber::registry()
        .with(LogBridgeLayer::new())
        .with(again.layer());
    scoped(subscriber, || {
        log::info!(target: "trainer", "log once");
        tracing::info!(target: "trainer", "tracing once");
    });
    assert_eq!(f.bodies(), ["log once", "tracing once"]);

    // a new provider and options replace the old ones
    let newer = InMemoryLogExporter::default();
    let provider = SdkLoggerProvider::builder()
        .with_simple_exporter(newer.clone())
        .build();
    let b = setup_logging_bridge_with_provider(
        &provider,
        LogBridgeOptions::new()
            .with_level(Level::Debug)
            .with_target("eval"),
    )
    .unwrap();
    assert_eq!(b.log_status(), InstallStatus::Reused);
    let subscriber = tracing_subscriber::registry().with(LogBridgeLayer::new());
    scoped(subscriber, || {
        log::debug!(target: "eval", "new level and target");
        tracing::debug!(target: "eval", "tracing too");
        log::info!(target: "trainer", "old target");
    });
    assert_eq!(f.bodies().len(), 2, "the replaced bridge gets nothing more");
    assert_eq!(bodies(&newer), ["new level and target", "tracing too"]);
}

#[test]
fn the_layer_filters_nothing_for_other_layers_and_can_be_switched_off() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    struct Count(Arc<AtomicUsize>);
    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Count {
        fn on_event(&self, _: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let f = Fixture::new(
        LogBridgeOptions::new()
            .with_level(Level::Error)
            .with_target("trainer")
            .with_tracing(false),
    );
    let seen = Arc::new(AtomicUsize::new(0));
    let subscriber = tracing_subscriber::registry()
        .with(LogBridgeLayer::new())
        .with(Count(seen.clone()));
    scoped(subscriber, || {
        tracing::error!(target: "trainer", "tracing switched off");
        tracing::debug!(target: "elsewhere", "below the bridge's level");
        log::error!(target: "trainer", "log still on");
    });
    assert_eq!(seen.load(Ordering::SeqCst), 2, "the other layer sees all");
    assert_eq!(f.bodies(), ["log still on"]);
}

#[test]
fn an_inactive_handle_stops_the_bridge_and_installs_nothing() {
    let f = Fixture::new(LogBridgeOptions::new());
    log::info!(target: "app", "before");
    let handle = lens::setup_telemetry(lens::LensConfig::default(), 0, 1).unwrap();
    let b = setup_logging_bridge(&handle, LogBridgeOptions::new()).unwrap();
    assert!(!b.is_active());
    assert_eq!(b.log_status(), InstallStatus::NotRequested);
    assert_eq!(b.tracing_subscriber_status(), InstallStatus::NotRequested);
    log::error!(target: "app", "after");
    let subscriber = tracing_subscriber::registry().with(b.layer());
    scoped(
        subscriber,
        || tracing::error!(target: "app", "tracing after"),
    );
    assert_eq!(f.bodies(), ["before"]);
    assert!(
        !log::log_enabled!(target: "app", log::Level::Error),
        "max level off"
    );
}
