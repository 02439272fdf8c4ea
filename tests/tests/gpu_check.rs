//! The `CUDA_VISIBLE_DEVICES` half of `scripts/gpu-check.sh` (ignored; it
//! needs an NVIDIA GPU): lens set up with GPU metrics, one export to a
//! file, then one line `LENS-GPUS {json}` with what lens saw:
//! `visible` (the ids of `lens::gpu::visible_gpus()`, in order), `count`
//! (the `host.gpu.count` resource attribute) and `metric_ids` (the distinct
//! `hw.id`s of the exported `hw.*` points). The script compares it with
//! what CUDA itself enumerates under the same setting.

use std::collections::BTreeSet;
use std::time::Duration;

/// `(host.gpu.count, hw.ids)` from OTLP JSON lines.
fn count_and_ids(text: &str) -> (Option<String>, BTreeSet<String>) {
    let mut count = None;
    let mut ids = BTreeSet::new();
    let value = |kv: &serde_json::Value| {
        kv["value"]
            .as_object()
            .and_then(|o| o.values().next())
            .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned))
    };
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        for rm in v["resourceMetrics"].as_array().into_iter().flatten() {
            for kv in rm["resource"]["attributes"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if kv["key"] == "host.gpu.count" {
                    count = value(kv);
                }
            }
            let metrics = rm["scopeMetrics"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|sm| sm["metrics"].as_array().into_iter().flatten());
            for m in metrics.filter(|m| m["name"].as_str().is_some_and(|n| n.starts_with("hw."))) {
                for kind in ["gauge", "sum"] {
                    for p in m[kind]["dataPoints"].as_array().into_iter().flatten() {
                        for kv in p["attributes"].as_array().into_iter().flatten() {
                            if kv["key"] == "hw.id" {
                                ids.extend(value(kv));
                            }
                        }
                    }
                }
            }
        }
    }
    (count, ids)
}

#[test]
#[ignore = "needs an NVIDIA GPU and driver; run by scripts/gpu-check.sh"]
fn gpu_visible_devices() {
    let visible: Vec<String> = lens::gpu::visible_gpus()
        .into_iter()
        .map(|g| g.id)
        .collect();
    let interval_ms: u64 = std::env::var("OTEL_METRIC_EXPORT_INTERVAL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let path = std::env::temp_dir().join(format!("lens-gpu-devices-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let mut config = lens::LensConfig::from_env().unwrap();
    config.enabled = true;
    config.quiet = true;
    config.exporter = lens::ExporterKind::File;
    config.file_path = Some(path.to_string_lossy().into_owned());
    config.traces_enabled = false;
    let telemetry = lens::TelemetryBuilder::new(config, 0, 1)
        .gpu_metrics(true)
        .allow_reinit(true)
        .install()
        .unwrap();
    // a point to export even without a GPU, so the resource arrives
    lens::metrics::TrainingMetrics::new(&telemetry.meter()).record(
        &lens::metrics::TrainingRecord {
            iterations: Some(1),
            ..Default::default()
        },
    );
    std::thread::sleep(Duration::from_millis(interval_ms * 2 + interval_ms / 2));
    telemetry
        .shutdown(Duration::from_secs(10))
        .into_result()
        .unwrap();
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    let (count, ids) = count_and_ids(&text);
    let line = serde_json::json!({
        "visible": visible,
        "count": count.and_then(|c| c.parse::<u64>().ok()),
        "metric_ids": ids,
    });
    // on a line of its own: the harness may have started one
    println!("\nLENS-GPUS {line}");
}

#[test]
fn count_and_ids_reads_otlp_json_lines() {
    let line = r#"{"resourceMetrics":[{"resource":{"attributes":[{"key":"host.gpu.count","value":{"intValue":"2"}}]},"scopeMetrics":[{"metrics":[{"name":"hw.power","gauge":{"dataPoints":[{"attributes":[{"key":"hw.id","value":{"stringValue":"GPU-a"}}],"asDouble":90.5}]}},{"name":"hw.energy","sum":{"isMonotonic":true,"dataPoints":[{"attributes":[{"key":"hw.id","value":{"stringValue":"GPU-b"}}],"asDouble":1.5}]}},{"name":"nv.dl.loss","gauge":{"dataPoints":[{"attributes":[{"key":"hw.id","value":{"stringValue":"GPU-c"}}],"asDouble":1}]}}]}]}]}"#;
    let (count, ids) = count_and_ids(&format!("{line}\n\nnot json\n"));
    assert_eq!(count.as_deref(), Some("2"));
    assert_eq!(ids.into_iter().collect::<Vec<_>>(), ["GPU-a", "GPU-b"]);
}

/// `gpu_visible_devices` in a child process with `CUDA_VISIBLE_DEVICES`
/// set to `cvd`: its `LENS-GPUS` line.
fn lens_gpus_with(cvd: &str) -> serde_json::Value {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["gpu_visible_devices", "--exact", "--ignored", "--nocapture"])
        .env("CUDA_VISIBLE_DEVICES", cvd)
        .env("OTEL_METRIC_EXPORT_INTERVAL", "200")
        .env_remove("NEMO_LENS_EXPORTER")
        .env_remove("OTEL_SDK_DISABLED")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("LENS-GPUS ").map(|(_, v)| v))
        .unwrap_or_else(|| {
            panic!(
                "no LENS-GPUS line:\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    serde_json::from_str(line).unwrap()
}

/// Whatever the machine: these settings select no GPU for CUDA, and lens
/// agrees end to end (the empty value used to be read as unset).
#[test]
fn settings_that_select_no_gpu_count_zero_end_to_end() {
    for cvd in ["", "0,0", "xyz", "-1", "GPU-"] {
        let v = lens_gpus_with(cvd);
        assert_eq!(v["count"], 0, "CUDA_VISIBLE_DEVICES={cvd:?}: {v}");
        assert_eq!(v["metric_ids"], serde_json::json!([]), "{cvd:?}: {v}");
        assert_eq!(v["visible"], serde_json::json!([]), "{cvd:?}: {v}");
    }
}

/// `scripts/gpu-check.sh selftest`: the script parses (`bash -n`) and its
/// Python comparisons pass and fail on made-up data as they should.
#[test]
fn gpu_check_script_selftest() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::process::Command::new("bash")
        .arg(root.join("scripts/gpu-check.sh"))
        .arg("selftest")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gpu-check.sh selftest failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("selftest: ok"));
}
