//! Settings given in code on `TelemetryBuilder` win over their `OTEL_*`
//! variables (code over environment over default), are checked as the
//! variables are, with the same errors, and what the builder adds (span
//! processors, a sampler, metric readers and views) sees the telemetry.

use lens::otel_sdk::metrics::{InMemoryMetricExporter, Instrument, PeriodicReader, Stream};
use lens::otel_sdk::trace::{InMemorySpanExporter, Sampler, SimpleSpanProcessor};
use lens::{ExporterKind, LensConfig, OtlpProtocol, TelemetryBuilder};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use tests::{free_port, Rotel};

static LOCK: Mutex<()> = Mutex::new(());

/// Serialises the tests (setup and the environment are per process) and
/// clears the variables they set.
fn serial() -> MutexGuard<'static, ()> {
    let g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    for (k, _) in std::env::vars() {
        if k.starts_with("OTEL_") || k.starts_with("NEMO_LENS_") {
            // SAFETY: tests in this binary are serialised by `LOCK`; no
            // other thread reads the environment meanwhile.
            unsafe { std::env::remove_var(k) };
        }
    }
    g
}

fn set(k: &str, v: &str) {
    // SAFETY: as in `serial`
    unsafe { std::env::set_var(k, v) };
}

fn enabled() -> LensConfig {
    let mut c = LensConfig::default();
    c.enabled = true;
    c.quiet = true;
    c.export_strategy = "all_ranks".into();
    c.metrics_enabled = false;
    c.logs_enabled = false;
    c
}

/// Spans to a real collector at the endpoint and protocol given in code,
/// while the variables name a dead port and the other protocol.
fn code_endpoint_and_protocol_beat_the_variables(protocol: OtlpProtocol, env_protocol: &str) {
    let _s = serial();
    let rotel = Rotel::start();
    let dead = format!("http://127.0.0.1:{}", free_port());
    set("OTEL_EXPORTER_OTLP_ENDPOINT", &dead);
    set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &dead);
    set("OTEL_EXPORTER_OTLP_PROTOCOL", env_protocol);
    let endpoint = match protocol {
        OtlpProtocol::Grpc => rotel.grpc_endpoint(),
        _ => rotel.http_endpoint(),
    };
    let mut cfg = enabled();
    cfg.exporter = ExporterKind::Otlp;
    let name = format!("code.endpoint.{protocol:?}");
    let h = TelemetryBuilder::new(cfg, 0, 1)
        .with_endpoint(endpoint)
        .with_otlp_protocol(protocol)
        .with_export_timeout(Duration::from_secs(5))
        .allow_reinit(true)
        .install()
        .unwrap();
    drop(lens::span_cm!(name.clone()));
    let report = h.shutdown(Duration::from_secs(10));
    assert!(report.is_clean(), "{report}");
    rotel.wait_for(Duration::from_secs(20), &name, |r| {
        r.spans.iter().any(|s| s.name == name)
    });
}

#[test]
fn endpoint_and_protocol_in_code_beat_the_variables_over_grpc() {
    code_endpoint_and_protocol_beat_the_variables(OtlpProtocol::Grpc, "http/protobuf");
}

#[test]
fn endpoint_and_protocol_in_code_beat_the_variables_over_http() {
    // the endpoint in code is a base URL, as the variable is: /v1/traces
    // is appended
    code_endpoint_and_protocol_beat_the_variables(OtlpProtocol::HttpProtobuf, "grpc");
}

/// The error setup gives for `builder`'s configuration.
fn setup_error(builder: TelemetryBuilder) -> String {
    builder
        .allow_reinit(true)
        .install()
        .unwrap_err()
        .to_string()
}

#[test]
fn a_bad_value_in_code_gives_the_variable_s_error_naming_the_method() {
    let _s = serial();
    type InCode = fn(TelemetryBuilder) -> TelemetryBuilder;
    let cases: [(&str, &str, &str, InCode); 3] = [
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "collector:4317",
            "TelemetryBuilder::with_endpoint",
            |b| b.with_endpoint("collector:4317"),
        ),
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "ftp://collector",
            "TelemetryBuilder::with_endpoint",
            |b| b.with_endpoint("ftp://collector"),
        ),
        (
            "OTEL_BSP_EXPORT_TIMEOUT",
            "90000000",
            "TelemetryBuilder::with_export_timeout",
            |b| b.with_export_timeout(Duration::from_millis(90_000_000)),
        ),
    ];
    for (var, value, method, in_code) in cases {
        set(var, value);
        let from_env = setup_error(TelemetryBuilder::new(enabled(), 0, 1));
        // SAFETY: as in `serial`
        unsafe { std::env::remove_var(var) };
        let from_code = setup_error(in_code(TelemetryBuilder::new(enabled(), 0, 1)));
        assert!(
            from_env.contains(var) && from_env.contains(value),
            "{from_env}"
        );
        assert_eq!(from_code, from_env.replace(var, method));
    }
    // a disabled setup checks them too: every rank validates
    let e = setup_error(TelemetryBuilder::new(LensConfig::default(), 0, 1).with_endpoint(" "));
    assert!(e.contains("with_endpoint"), "{e}");
}

#[test]
fn span_path_and_context_in_code_beat_their_variables() {
    let _s = serial();
    // with a configuration made in code, setup reads the variables (strictly)
    set("NEMO_LENS_SPAN_PATH", "fast");
    let e = setup_error(TelemetryBuilder::new(enabled(), 0, 1));
    assert_eq!(
        e,
        "invalid value \"fast\" for NEMO_LENS_SPAN_PATH; expected one of: lens, sdk"
    );
    set("NEMO_LENS_OTEL_CONTEXT", "none");
    // set in code, neither variable is read
    let mut cfg = enabled();
    cfg.span_path = Some(lens::SpanPath::Sdk);
    cfg.otel_context = Some(lens::OtelContext::Ids);
    let exporter = InMemorySpanExporter::default();
    let h = TelemetryBuilder::new(cfg, 0, 1)
        .with_span_exporter(exporter.clone())
        .allow_reinit(true)
        .install()
        .unwrap();
    drop(lens::span_cm!("code.path"));
    assert!(h.force_flush().is_clean());
    assert_eq!(exporter.get_finished_spans().unwrap().len(), 1);
    let _ = h.shutdown(Duration::from_secs(5));
}

#[test]
fn an_added_span_processor_sees_the_spans() {
    let _s = serial();
    let exported = InMemorySpanExporter::default();
    let seen = InMemorySpanExporter::default();
    let h = TelemetryBuilder::new(enabled(), 0, 1)
        .with_span_exporter(exported.clone())
        .with_span_processor(SimpleSpanProcessor::new(seen.clone()))
        .allow_reinit(true)
        .install()
        .unwrap();
    drop(lens::span_cm!("code.processor"));
    assert!(h.force_flush().is_clean());
    let names = |e: &InMemorySpanExporter| -> Vec<String> {
        let spans = e.get_finished_spans().unwrap();
        spans.iter().map(|s| s.name.to_string()).collect()
    };
    assert_eq!(names(&seen), ["code.processor"]);
    assert_eq!(names(&exported), ["code.processor"]);
    let _ = h.shutdown(Duration::from_secs(5));
}

#[test]
fn a_sampler_in_code_beats_otel_traces_sampler() {
    let _s = serial();
    set("OTEL_TRACES_SAMPLER", "always_on");
    let run = |sampler: Option<Sampler>| {
        let exporter = InMemorySpanExporter::default();
        let mut b = TelemetryBuilder::new(enabled(), 0, 1)
            .with_span_exporter(exporter.clone())
            .allow_reinit(true);
        if let Some(s) = sampler {
            b = b.with_sampler(s);
        }
        let h = b.install().unwrap();
        drop(lens::span_cm!("code.sampled"));
        assert!(h.force_flush().is_clean());
        // (the in-memory exporter forgets its spans at shutdown)
        let n = exporter.get_finished_spans().unwrap().len();
        let _ = h.shutdown(Duration::from_secs(5));
        n
    };
    assert_eq!(run(None), 1, "the variable's sampler keeps the span");
    assert_eq!(
        run(Some(Sampler::AlwaysOff)),
        0,
        "the sampler in code drops it"
    );
    // a bad variable is not read when code gives the sampler
    set("OTEL_TRACES_SAMPLER", "sometimes");
    assert_eq!(run(Some(Sampler::AlwaysOn)), 1);
    let e = setup_error(TelemetryBuilder::new(enabled(), 0, 1));
    assert!(
        e.contains("OTEL_TRACES_SAMPLER") && e.contains("sometimes"),
        "{e}"
    );
}

#[test]
fn a_view_renames_a_metric_and_an_added_reader_gets_the_metrics() {
    let _s = serial();
    let mut cfg = enabled();
    cfg.metrics_enabled = true;
    let exported = InMemoryMetricExporter::default();
    let extra = InMemoryMetricExporter::default();
    let h = TelemetryBuilder::new(cfg, 0, 1)
        .with_metric_exporter(exported.clone())
        .with_metric_reader(PeriodicReader::builder(extra.clone()).build())
        .with_view(|i: &Instrument| {
            (i.name() == "code.view.requests")
                .then(|| Stream::builder().with_name("requests_total").build().ok())
                .flatten()
        })
        .allow_reinit(true)
        .install()
        .unwrap();
    let counter = lens::otel::global::meter("builder_config")
        .u64_counter("code.view.requests")
        .build();
    counter.add(3, &[]);
    assert!(h.force_flush().is_clean());
    let names = |e: &InMemoryMetricExporter| -> Vec<String> {
        let mut out = Vec::new();
        for rm in e.get_finished_metrics().unwrap() {
            for sm in rm.scope_metrics() {
                for m in sm.metrics() {
                    out.push(m.name().to_owned());
                }
            }
        }
        out
    };
    for e in [&exported, &extra] {
        let n = names(e);
        assert!(n.iter().any(|n| n == "requests_total"), "{n:?}");
        assert!(!n.iter().any(|n| n == "code.view.requests"), "{n:?}");
    }
    let _ = h.shutdown(Duration::from_secs(5));
}

/// The headers a real OTLP receiver got (tests/python/header_sink.py: a
/// grpcio server and an HTTP server recording each request's headers).
struct HeaderSink {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<serde_json::Value>,
    grpc: u16,
    http: u16,
}

impl HeaderSink {
    fn start() -> Self {
        use std::io::BufRead;
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/header_sink.py");
        let mut child = std::process::Command::new("python3")
            .args([script, "--seconds", "120"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs tests/python/header_sink.py (grpcio comes with opentelemetry-exporter-otlp)");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        let ports: serde_json::Value = lines
            .recv_timeout(Duration::from_secs(30))
            .expect("the header sink prints its ports");
        let port = |k: &str| ports[k].as_u64().unwrap() as u16;
        let (grpc, http) = (port("grpc"), port("http"));
        HeaderSink {
            child,
            lines,
            grpc,
            http,
        }
    }

    /// The headers of the next trace export over `transport`.
    fn next_trace_export(&self, transport: &str) -> Vec<(String, String)> {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            let Ok(v) = self.lines.recv_timeout(left) else {
                break;
            };
            let path = v["path"].as_str().unwrap_or("");
            if v["transport"] == transport && path.contains("race") {
                return v["headers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| {
                        (
                            p[0].as_str().unwrap().to_owned(),
                            p[1].as_str().unwrap().to_owned(),
                        )
                    })
                    .collect();
            }
        }
        panic!("no trace export over {transport} reached the header sink in 20 s");
    }
}

impl Drop for HeaderSink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Headers given in code replace the same names of
/// `OTEL_EXPORTER_OTLP_HEADERS` (every value of them), and the variable's
/// other headers are still sent: seen by a real receiver over both
/// transports.
#[test]
fn headers_in_code_beat_the_same_names_in_the_variables() {
    let _s = serial();
    let sink = HeaderSink::start();
    set(
        "OTEL_EXPORTER_OTLP_HEADERS",
        "x-team=from-env,x-env-only=kept",
    );
    for (protocol, transport, port) in [
        (OtlpProtocol::Grpc, "grpc", sink.grpc),
        (OtlpProtocol::HttpProtobuf, "http", sink.http),
        (OtlpProtocol::HttpJson, "http", sink.http),
    ] {
        let mut cfg = enabled();
        cfg.exporter = ExporterKind::Otlp;
        let h = TelemetryBuilder::new(cfg, 0, 1)
            .with_endpoint(format!("http://127.0.0.1:{port}"))
            .with_otlp_protocol(protocol)
            .with_header("x-team", "from-code")
            .with_header("authorization", "Bearer t0ken")
            .allow_reinit(true)
            .install()
            .unwrap();
        drop(lens::span_cm!("code.headers"));
        let report = h.shutdown(Duration::from_secs(10));
        assert!(report.is_clean(), "{protocol:?}: {report}");
        let got = sink.next_trace_export(transport);
        let values = |name: &str| -> Vec<&str> {
            got.iter()
                .filter(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
                .collect()
        };
        assert_eq!(values("x-team"), ["from-code"], "{protocol:?}: {got:?}");
        assert_eq!(values("x-env-only"), ["kept"], "{protocol:?}: {got:?}");
        assert_eq!(
            values("authorization"),
            ["Bearer t0ken"],
            "{protocol:?}: {got:?}"
        );
    }
}

#[test]
fn a_bad_header_in_code_names_the_method_and_hides_the_value() {
    let _s = serial();
    for (name, value) in [
        ("bad name", "v"),
        ("", "v"),
        ("x-key-bin", "v"),
        ("x-ok", "line\nbreak"),
        ("x-ok", "caf\u{e9}"),
    ] {
        let e = setup_error(
            TelemetryBuilder::new(enabled(), 0, 1)
                .with_header(name, value)
                .with_header("x-secret", "s3cret-value"),
        );
        assert!(e.contains("TelemetryBuilder::with_header"), "{e}");
        assert!(e.contains("printable ASCII"), "{e}");
        assert!(!e.contains(value) || value == "v", "{e}");
    }
}
