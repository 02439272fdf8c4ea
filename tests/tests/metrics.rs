//! The instrument sets end to end: a child process (this test binary,
//! re-run with one ignored test selected) sets lens up from the environment,
//! records every instrument once and exits; a real `rotel` collector
//! receives the metrics and every name, unit, type and attribute is checked.
//! Plus: recording allocates nothing once an attribute set exists (counting
//! global allocator), docs/guide/metrics.md lists every metric, and the GPU check
//! `gpu_metrics_on_a_real_gpu` (ignored; `scripts/gpu-check.sh` runs it).

use lens::metrics::{
    GymMetrics, GymRecord, InferenceMetrics, InferenceRecord, RlMetrics, RlRecord, TrainingMetrics,
    TrainingRecord, SDK_DEFAULT_BUCKETS, STEP_DURATION_BUCKETS_S,
};
use lens::semconv as sc;
use std::process::Command;
use std::time::Duration;
use tests::{get, Metric, Rotel};

// ------------------------------------------------------------ allocations

#[global_allocator]
static GLOBAL: tests::CountingAlloc = tests::CountingAlloc;

use tests::allocations;

/// One record of every instrument, as the child sends them.
const INFERENCE: InferenceRecord<'static> = InferenceRecord {
    duration_s: Some(0.2),
    input_tokens: Some(100),
    output_tokens: Some(20),
    model: Some("llama"),
    operation: None,
    provider: None,
    time_to_first_token_s: None,
    time_per_output_token_s: None,
};
const INFERENCE_CHAT: InferenceRecord<'static> = InferenceRecord {
    duration_s: Some(1.5),
    input_tokens: None,
    output_tokens: None,
    model: None,
    operation: Some("chat"),
    provider: Some("vllm"),
    time_to_first_token_s: None,
    time_per_output_token_s: None,
};
const RL: RlRecord = RlRecord {
    reward_mean: Some(0.5),
    kl_divergence: Some(0.01),
    policy_loss: Some(0.25),
    value_loss: Some(0.75),
    entropy: Some(1.5),
    response_length_mean: Some(256.0),
    grad_norm: Some(0.9),
    learning_rate: Some(1e-6),
    tokens_per_sec: Some(5000.0),
    generation_duration_ms: Some(1200.0),
    rollout_duration_ms: Some(3400.0),
};
const GYM: GymRecord = GymRecord {
    request_duration_ms: Some(12.0),
    rollout_duration_ms: Some(800.0),
    verify_duration_ms: Some(30.0),
    verify_success_rate: Some(0.875),
    servers_active: Some(4),
};
const TRAINING: TrainingRecord = TrainingRecord {
    step_duration_s: Some(1.5),
    loss: Some(2.25),
    grad_norm: Some(1.25),
    learning_rate: Some(3e-4),
    tokens_per_sec: Some(120_000.0),
    tflops: Some(410.0),
    iterations: Some(1),
};

#[test]
fn recording_allocates_nothing_once_warm() {
    use opentelemetry::metrics::MeterProvider as _;
    let exporter = opentelemetry_sdk::metrics::InMemoryMetricExporter::default();
    let provider = opentelemetry_sdk::metrics::SdkMeterProvider::builder()
        .with_reader(opentelemetry_sdk::metrics::PeriodicReader::builder(exporter).build())
        .build();
    let meter = provider.meter("alloc");
    let (inf, rl, gym, train) = (
        InferenceMetrics::new(&meter),
        RlMetrics::new(&meter),
        GymMetrics::new(&meter),
        TrainingMetrics::new(&meter),
    );
    let all = || {
        inf.record(&INFERENCE);
        inf.record(&INFERENCE_CHAT);
        rl.record(&RL);
        gym.record(&GYM);
        train.record(&TRAINING);
    };
    all(); // first records create the SDK's attribute sets and our cached arrays
    let n = allocations(|| {
        for _ in 0..1000 {
            all();
        }
    });
    assert_eq!(n, 0, "1000 rounds of records allocated {n} times");
    // the counter works
    assert!(allocations(|| drop(std::hint::black_box(vec![1u8; 8]))) > 0);
    provider.shutdown().unwrap();
}

// ------------------------------------------------------------- the child

const CHILD_ENV: &str = "LENS_METRICS_TEST_CHILD";

/// Run only as the child of `every_instrument_arrives_as_specified`: sets
/// lens up from the environment, records every instrument, shuts down.
#[test]
#[ignore = "child process of every_instrument_arrives_as_specified"]
fn instruments_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let config = lens::LensConfig::from_env().unwrap();
    let telemetry = lens::setup_telemetry(config, 0, 1).unwrap();
    assert!(telemetry.is_exporting());
    let meter = telemetry.meter();
    InferenceMetrics::new(&meter).record(&INFERENCE);
    // a second set on the same meter shares the instruments
    InferenceMetrics::new(&meter).record(&INFERENCE_CHAT);
    RlMetrics::new(&meter).record(&RL);
    GymMetrics::new(&meter).record(&GYM);
    let train = TrainingMetrics::new(&meter);
    for _ in 0..3 {
        train.record(&TRAINING);
    }
    telemetry
        .shutdown(Duration::from_secs(10))
        .into_result()
        .unwrap();
}

fn run_child(env: &[(&str, String)]) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "instruments_child",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    for (k, _) in std::env::vars() {
        if k.starts_with("NEMO_LENS_") || k.starts_with("OTEL_") || k.starts_with("SLURM_") {
            cmd.env_remove(k);
        }
    }
    cmd.env(CHILD_ENV, "1")
        .env("NEMO_LENS_ENABLED", "1")
        .env("NEMO_LENS_EXPORT_STRATEGY", "all_ranks");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "child failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

// --------------------------------------------------------- the expected

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Histogram,
    Gauge,
    Counter,
}

/// Every metric of the four sets: name, kind, unit, value recorded (the sum
/// for histograms and counters).
fn expected() -> Vec<(&'static str, Kind, &'static str)> {
    use Kind::*;
    vec![
        (sc::METRIC_GEN_AI_SERVER_REQUEST_DURATION, Histogram, "s"),
        (sc::METRIC_GEN_AI_CLIENT_TOKEN_USAGE, Histogram, "{token}"),
        (sc::METRIC_RL_REWARD_MEAN, Gauge, ""),
        (sc::METRIC_RL_KL_DIVERGENCE, Gauge, ""),
        (sc::METRIC_RL_POLICY_LOSS, Gauge, ""),
        (sc::METRIC_RL_VALUE_LOSS, Gauge, ""),
        (sc::METRIC_RL_ENTROPY, Gauge, ""),
        (sc::METRIC_RL_RESPONSE_LENGTH_MEAN, Gauge, ""),
        (sc::METRIC_RL_GRAD_NORM, Gauge, ""),
        (sc::METRIC_RL_LEARNING_RATE, Gauge, ""),
        (sc::METRIC_RL_THROUGHPUT_TOKENS_PER_SEC, Gauge, "{token}/s"),
        (sc::METRIC_RL_GENERATION_DURATION_MS, Histogram, "ms"),
        (sc::METRIC_RL_ROLLOUT_DURATION_MS, Histogram, "ms"),
        (sc::METRIC_GYM_SERVER_REQUEST_DURATION_MS, Histogram, "ms"),
        (sc::METRIC_GYM_ROLLOUT_DURATION_MS, Histogram, "ms"),
        (sc::METRIC_GYM_VERIFY_DURATION_MS, Histogram, "ms"),
        (sc::METRIC_GYM_VERIFY_SUCCESS_RATE, Gauge, ""),
        (sc::METRIC_GYM_SERVERS_ACTIVE, Gauge, ""),
        (sc::METRIC_NV_DL_STEP_DURATION, Histogram, "s"),
        (sc::METRIC_NV_DL_LOSS, Gauge, "1"),
        (sc::METRIC_NV_DL_GRAD_NORM, Gauge, "1"),
        (sc::METRIC_NV_DL_LEARNING_RATE, Gauge, "1"),
        (
            sc::METRIC_NV_DL_THROUGHPUT_TOKENS_PER_SEC,
            Gauge,
            "{token}/s",
        ),
        (sc::METRIC_NV_DL_THROUGHPUT_TFLOPS, Gauge, "{TFLOP}/s"),
        (sc::METRIC_NV_DL_ITERATIONS, Counter, "{iteration}"),
    ]
}

/// Every `hw.*` metric of the GPU telemetry: name, kind (observable up-down
/// counters arrive as non-monotonic sums), unit.
fn expected_gpu() -> Vec<(&'static str, &'static str, &'static str)> {
    vec![
        (sc::METRIC_HW_GPU_UTILIZATION, "gauge", "1"),
        (sc::METRIC_HW_GPU_MEMORY_UTILIZATION, "gauge", "1"),
        (sc::METRIC_HW_GPU_MEMORY_USAGE, "up-down counter", "By"),
        (sc::METRIC_HW_GPU_MEMORY_LIMIT, "up-down counter", "By"),
        (sc::METRIC_HW_POWER, "gauge", "W"),
        (sc::METRIC_HW_ENERGY, "counter", "J"),
        (sc::METRIC_HW_TEMPERATURE, "gauge", "Cel"),
    ]
}

fn num(s: Option<&str>) -> f64 {
    s.unwrap_or_else(|| panic!("missing value"))
        .parse()
        .unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

fn sorted_attrs(m: &Metric, i: usize) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = m.points[i]
        .attributes
        .iter()
        .map(|(k, _)| {
            (
                k.clone(),
                get(&m.points[i].attributes, k).unwrap().to_owned(),
            )
        })
        .collect();
    v.sort();
    v
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<_> = p
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    v.sort();
    v
}

/// The explicit bounds rotel printed for point `i`.
fn bounds(m: &Metric, i: usize) -> Vec<f64> {
    m.points[i]
        .fields
        .iter()
        .filter(|(k, _)| k.starts_with("ExplicitBounds"))
        .map(|(_, v)| v.parse().unwrap())
        .collect()
}

#[test]
fn every_instrument_arrives_as_specified() {
    let rotel = Rotel::start();
    let run_id = "instruments";
    run_child(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", rotel.grpc_endpoint()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".to_owned()),
        ("NEMO_LENS_RUN_ID", run_id.to_owned()),
    ]);
    let names: Vec<_> = expected().iter().map(|e| e.0).collect();
    let r = rotel.wait_for(Duration::from_secs(20), "every metric", |r| {
        names.iter().all(|n| {
            r.metrics
                .iter()
                .any(|m| &m.name == n && get(&m.resource, sc::NEMO_RUN_ID) == Some(run_id))
        })
    });
    let mine: Vec<&Metric> = r
        .metrics
        .iter()
        .filter(|m| get(&m.resource, sc::NEMO_RUN_ID) == Some(run_id))
        .collect();
    let metric = |name: &str| -> &Metric {
        mine.iter()
            .rev()
            .find(|m| m.name == name)
            .copied()
            .unwrap_or_else(|| panic!("no {name}"))
    };
    for (name, kind, unit) in expected() {
        let m = metric(name);
        assert_eq!(m.unit, unit, "unit of {name}");
        let (data_type, monotonic) = match kind {
            Kind::Histogram => ("Histogram", None),
            Kind::Gauge => ("Gauge", None),
            Kind::Counter => ("Sum", Some(true)),
        };
        assert_eq!(m.data_type, data_type, "type of {name}");
        if monotonic.is_some() {
            assert_eq!(m.is_monotonic, monotonic, "{name} monotonic");
        }
        assert_eq!(
            m.scope.split_whitespace().next(),
            Some("nemo.lens"),
            "{name}"
        );
        assert!(!m.points.is_empty(), "{name} has no point");
    }

    // inference: one duration point per attribute set, defaults applied
    let d = metric(sc::METRIC_GEN_AI_SERVER_REQUEST_DURATION);
    assert_eq!(d.points.len(), 2, "{d:?}");
    let mut sets: Vec<_> = (0..2).map(|i| (sorted_attrs(d, i), i)).collect();
    sets.sort();
    assert_eq!(
        sets[0].0,
        pairs(&[
            (sc::GEN_AI_OPERATION_NAME, "chat"),
            (sc::GEN_AI_PROVIDER_NAME, "vllm"),
        ])
    );
    assert_eq!(num(get(&d.points[sets[0].1].fields, "Sum")), 1.5);
    assert_eq!(
        sets[1].0,
        pairs(&[
            (
                sc::GEN_AI_OPERATION_NAME,
                sc::GEN_AI_OPERATION_NAME_TEXT_COMPLETION
            ),
            (sc::GEN_AI_PROVIDER_NAME, sc::GEN_AI_PROVIDER_NAME_NEMO),
            (sc::GEN_AI_REQUEST_MODEL, "llama"),
        ])
    );
    assert_eq!(num(get(&d.points[sets[1].1].fields, "Sum")), 0.2);
    let b = bounds(d, 0);
    assert_eq!(bounds(d, 1), SDK_DEFAULT_BUCKETS);
    assert_eq!(b, SDK_DEFAULT_BUCKETS);

    // token usage: one point per token type
    let t = metric(sc::METRIC_GEN_AI_CLIENT_TOKEN_USAGE);
    assert_eq!(t.points.len(), 2, "{t:?}");
    let mut by_type: Vec<_> = (0..2)
        .map(|i| (sorted_attrs(t, i), num(get(&t.points[i].fields, "Sum"))))
        .collect();
    by_type.sort_by(|a, b| a.0.cmp(&b.0));
    let with_type = |ty: &str| {
        pairs(&[
            (sc::GEN_AI_OPERATION_NAME, "text_completion"),
            (sc::GEN_AI_PROVIDER_NAME, "nemo"),
            (sc::GEN_AI_REQUEST_MODEL, "llama"),
            (sc::GEN_AI_TOKEN_TYPE, ty),
        ])
    };
    assert_eq!(
        by_type,
        vec![
            (with_type(sc::GEN_AI_TOKEN_TYPE_INPUT), 100.0),
            (with_type(sc::GEN_AI_TOKEN_TYPE_OUTPUT), 20.0)
        ]
    );
    let b = bounds(t, 0);
    assert_eq!(b, SDK_DEFAULT_BUCKETS);

    // values and bounds of the rest; no attributes on their points
    let gauges = [
        (sc::METRIC_RL_REWARD_MEAN, RL.reward_mean),
        (sc::METRIC_RL_KL_DIVERGENCE, RL.kl_divergence),
        (sc::METRIC_RL_POLICY_LOSS, RL.policy_loss),
        (sc::METRIC_RL_VALUE_LOSS, RL.value_loss),
        (sc::METRIC_RL_ENTROPY, RL.entropy),
        (sc::METRIC_RL_RESPONSE_LENGTH_MEAN, RL.response_length_mean),
        (sc::METRIC_RL_GRAD_NORM, RL.grad_norm),
        (sc::METRIC_RL_LEARNING_RATE, RL.learning_rate),
        (sc::METRIC_RL_THROUGHPUT_TOKENS_PER_SEC, RL.tokens_per_sec),
        (sc::METRIC_GYM_VERIFY_SUCCESS_RATE, GYM.verify_success_rate),
        (sc::METRIC_GYM_SERVERS_ACTIVE, Some(4.0)),
        (sc::METRIC_NV_DL_LOSS, TRAINING.loss),
        (sc::METRIC_NV_DL_GRAD_NORM, TRAINING.grad_norm),
        (sc::METRIC_NV_DL_LEARNING_RATE, TRAINING.learning_rate),
        (
            sc::METRIC_NV_DL_THROUGHPUT_TOKENS_PER_SEC,
            TRAINING.tokens_per_sec,
        ),
        (sc::METRIC_NV_DL_THROUGHPUT_TFLOPS, TRAINING.tflops),
    ];
    for (name, v) in gauges {
        let m = metric(name);
        assert_eq!(m.points.len(), 1, "{name}");
        assert_eq!(num(get(&m.points[0].fields, "Value")), v.unwrap(), "{name}");
        assert!(m.points[0].attributes.is_empty(), "{name}: {m:?}");
    }
    let histograms = [
        (
            sc::METRIC_RL_GENERATION_DURATION_MS,
            1200.0,
            1,
            &SDK_DEFAULT_BUCKETS[..],
        ),
        (
            sc::METRIC_RL_ROLLOUT_DURATION_MS,
            3400.0,
            1,
            &SDK_DEFAULT_BUCKETS[..],
        ),
        (
            sc::METRIC_GYM_SERVER_REQUEST_DURATION_MS,
            12.0,
            1,
            &SDK_DEFAULT_BUCKETS[..],
        ),
        (
            sc::METRIC_GYM_ROLLOUT_DURATION_MS,
            800.0,
            1,
            &SDK_DEFAULT_BUCKETS[..],
        ),
        (
            sc::METRIC_GYM_VERIFY_DURATION_MS,
            30.0,
            1,
            &SDK_DEFAULT_BUCKETS[..],
        ),
        (
            sc::METRIC_NV_DL_STEP_DURATION,
            4.5,
            3,
            &STEP_DURATION_BUCKETS_S[..],
        ),
    ];
    for (name, sum, count, want_bounds) in histograms {
        let m = metric(name);
        assert_eq!(m.points.len(), 1, "{name}");
        assert_eq!(num(get(&m.points[0].fields, "Sum")), sum, "{name}");
        assert_eq!(
            num(get(&m.points[0].fields, "Count")),
            f64::from(count),
            "{name}"
        );
        let b = bounds(m, 0);
        assert_eq!(b, want_bounds, "{name}");
        assert!(m.points[0].attributes.is_empty(), "{name}: {m:?}");
    }
    let it = metric(sc::METRIC_NV_DL_ITERATIONS);
    assert_eq!(num(get(&it.points[0].fields, "Value")), 3.0);
    assert!(it.points[0].attributes.is_empty());

    // GPU telemetry is opt-in: off here, so no hw.* metric at all
    assert!(
        mine.iter().all(|m| !m.name.starts_with("hw.")),
        "hw.* without NEMO_LENS_GPU_METRICS"
    );
}

#[test]
fn gpu_metrics_on_without_a_gpu_change_nothing_else() {
    // NEMO_LENS_GPU_METRICS=1 on a machine without NVML: setup succeeds, the
    // other metrics arrive, no hw.* metric, nothing on stderr about it
    if !lens::gpu::visible_gpus().is_empty() {
        eprintln!("skipped: this machine has a GPU");
        return;
    }
    let rotel = Rotel::start();
    let run_id = "gpu-off";
    run_child(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", rotel.grpc_endpoint()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".to_owned()),
        ("NEMO_LENS_RUN_ID", run_id.to_owned()),
        ("NEMO_LENS_GPU_METRICS", "1".to_owned()),
    ]);
    let r = rotel.wait_for(Duration::from_secs(20), "metrics", |r| {
        r.metrics.iter().any(|m| {
            m.name == sc::METRIC_NV_DL_ITERATIONS
                && get(&m.resource, sc::NEMO_RUN_ID) == Some(run_id)
        })
    });
    assert!(
        r.metrics.iter().all(|m| !m.name.starts_with("hw.")),
        "hw.* metrics without a GPU"
    );
}

#[test]
fn guide_lists_every_metric() {
    let section = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/guide/metrics.md"
    ))
    .unwrap();
    let names = expected()
        .into_iter()
        .map(|e| e.0)
        .chain(expected_gpu().into_iter().map(|e| e.0));
    for name in names {
        assert!(
            section.contains(&format!("`{name}`")),
            "docs/guide/metrics.md does not list `{name}`"
        );
    }
}

// ----------------------------------------------------------- the GPU check

/// `(key, value)` of an OTLP/JSON attribute list.
fn json_attrs(v: &serde_json::Value) -> Vec<(String, String)> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|kv| {
                    let key = kv["key"].as_str().unwrap_or_default().to_owned();
                    let value = kv["value"]
                        .as_object()
                        .and_then(|o| o.values().next())
                        .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned))
                        .unwrap_or_default();
                    (key, value)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// From OTLP JSON lines: the `host.gpu.count` resource attribute and every
/// point of each metric whose name starts with a prefix in `prefixes`, as
/// `(name, unit, kind, value, attributes)`; the last export wins.
#[allow(clippy::type_complexity)]
fn read_export(
    text: &str,
    prefixes: &[&str],
) -> (
    Option<String>,
    Vec<(String, String, String, String, Vec<(String, String)>)>,
) {
    let mut gpu_count = None;
    let mut last: std::collections::BTreeMap<String, Vec<_>> = Default::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for rm in v["resourceMetrics"].as_array().into_iter().flatten() {
            for (k, val) in json_attrs(&rm["resource"]["attributes"]) {
                if k == sc::HOST_GPU_COUNT {
                    gpu_count = Some(val);
                }
            }
            for sm in rm["scopeMetrics"].as_array().into_iter().flatten() {
                for m in sm["metrics"].as_array().into_iter().flatten() {
                    let name = m["name"].as_str().unwrap_or_default().to_owned();
                    if !prefixes.iter().any(|p| name.starts_with(p)) {
                        continue;
                    }
                    let unit = m["unit"].as_str().unwrap_or_default().to_owned();
                    let mut points = Vec::new();
                    for kind in ["gauge", "sum", "histogram"] {
                        let Some(data) = m.get(kind) else { continue };
                        let kind = match (kind, data["isMonotonic"].as_bool()) {
                            ("sum", Some(true)) => "counter",
                            ("sum", _) => "up-down counter",
                            (k, _) => k,
                        };
                        for p in data["dataPoints"].as_array().into_iter().flatten() {
                            let value = ["asDouble", "asInt", "sum"]
                                .iter()
                                .find_map(|k| p.get(*k))
                                .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned))
                                .unwrap_or_default();
                            let mut attrs = json_attrs(&p["attributes"]);
                            attrs.sort();
                            points.push((
                                name.clone(),
                                unit.clone(),
                                kind.to_owned(),
                                value,
                                attrs,
                            ));
                        }
                    }
                    last.insert(name, points);
                }
            }
        }
    }
    (gpu_count, last.into_values().flatten().collect())
}

/// Run on a machine with an NVIDIA GPU by `scripts/gpu-check.sh`: lens with
/// the file exporter and GPU metrics on, one export interval, then prints
/// every `hw.*` point and `host.gpu.count`, and checks them.
#[test]
#[ignore = "needs an NVIDIA GPU and driver; run by scripts/gpu-check.sh"]
fn gpu_metrics_on_a_real_gpu() {
    let gpus = lens::gpu::visible_gpus();
    println!(
        "CUDA_VISIBLE_DEVICES={:?}",
        std::env::var("CUDA_VISIBLE_DEVICES").ok()
    );
    println!("visible GPUs (NVML): {}", gpus.len());
    for g in &gpus {
        println!("  {g:?}");
    }
    let interval_ms: u64 = std::env::var("OTEL_METRIC_EXPORT_INTERVAL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let path = std::env::var("LENS_GPU_CHECK_FILE").map_or_else(
        |_| std::env::temp_dir().join(format!("lens-gpu-check-{}.jsonl", std::process::id())),
        std::path::PathBuf::from,
    );
    let _ = std::fs::remove_file(&path);
    let mut config = lens::LensConfig::from_env().unwrap();
    config.enabled = true;
    config.exporter = lens::ExporterKind::File;
    config.file_path = Some(path.to_string_lossy().into_owned());
    config.traces_enabled = false;
    let telemetry = lens::TelemetryBuilder::new(config, 0, 1)
        .gpu_metrics(true)
        .allow_reinit(true)
        .install()
        .unwrap();
    // a marker the export pipeline works even without a GPU
    TrainingMetrics::new(&telemetry.meter()).record(&TrainingRecord {
        iterations: Some(1),
        ..Default::default()
    });
    // 2.5 intervals unless the check asks for more
    let intervals: f64 = std::env::var("LENS_GPU_CHECK_WAIT_INTERVALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2.5);
    std::thread::sleep(Duration::from_secs_f64(
        interval_ms as f64 / 1000.0 * intervals,
    ));
    telemetry
        .shutdown(Duration::from_secs(10))
        .into_result()
        .unwrap();

    let text = std::fs::read_to_string(&path).unwrap();
    let (gpu_count, points) = read_export(&text, &["hw.", sc::METRIC_NV_DL_ITERATIONS]);
    println!("export file: {}", path.display());
    println!("resource {} = {gpu_count:?}", sc::HOST_GPU_COUNT);
    for (name, unit, kind, value, attrs) in &points {
        let attrs: Vec<String> = attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!(
            "{name} [{kind}, {unit}] = {value}  {{{}}}",
            attrs.join(", ")
        );
    }
    assert!(
        points.iter().any(|p| p.0 == sc::METRIC_NV_DL_ITERATIONS),
        "the export pipeline wrote nothing"
    );
    assert!(
        !gpus.is_empty(),
        "NVML did not load or sees no GPU (driver, libnvidia-ml.so.1, CUDA_VISIBLE_DEVICES?)"
    );
    // every problem at once, so one run on the GPU machine tells all
    let mut problems: Vec<String> = Vec::new();
    // one discovery: the count is the number of devices the metrics report
    if gpu_count != Some(gpus.len().to_string()) {
        problems.push(format!(
            "{} = {gpu_count:?}, NVML sees {}",
            sc::HOST_GPU_COUNT,
            gpus.len()
        ));
    }
    for (name, kind, unit) in expected_gpu() {
        let of_metric: Vec<_> = points.iter().filter(|p| p.0 == name).collect();
        if name == sc::METRIC_HW_ENERGY && of_metric.is_empty() {
            println!("note: {name} not reported (needs Volta or newer)");
            continue;
        }
        for g in &gpus {
            let Some(p) = of_metric
                .iter()
                .find(|p| p.4.contains(&(sc::HW_ID.to_owned(), g.id.clone())))
            else {
                problems.push(format!("no {name} point for {} ({})", g.id, g.name));
                continue;
            };
            if (p.1.as_str(), p.2.as_str()) != (unit, kind) {
                problems.push(format!("{name} is {} {}, want {kind} {unit}", p.2, p.1));
            }
            let has = |k: &str, v: &str| p.4.contains(&(k.to_owned(), v.to_owned()));
            let mut want = vec![
                (sc::HW_TYPE, sc::HW_TYPE_GPU),
                (sc::HW_VENDOR, sc::HW_VENDOR_NVIDIA),
                (sc::HW_NAME, g.name.as_str()),
            ];
            if let Some(model) = &g.model {
                want.push((sc::HW_MODEL, model.as_str()));
            }
            if name == sc::METRIC_HW_GPU_UTILIZATION {
                want.push((sc::HW_GPU_TASK, sc::HW_GPU_TASK_GENERAL));
            }
            for (k, v) in want {
                if !has(k, v) {
                    problems.push(format!("{name} of {}: no {k}={v}", g.id));
                }
            }
            match p.3.parse::<f64>() {
                Ok(v) if unit == "1" && !(0.0..=1.0).contains(&v) => {
                    problems.push(format!("{name} of {} = {v}, outside 0..1", g.id))
                }
                Ok(v) if v < 0.0 => problems.push(format!("{name} of {} = {v}", g.id)),
                Ok(_) => {}
                Err(e) => problems.push(format!("{name} of {}: value {:?}: {e}", g.id, p.3)),
            }
        }
    }
    assert!(
        problems.is_empty(),
        "GPU check failed:\n  {}",
        problems.join("\n  ")
    );
    println!("GPU check passed: {} GPU(s)", gpus.len());
}
