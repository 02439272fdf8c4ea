//! The consumer examples run as their headers say: the quickstart with no
//! environment at all (it turns telemetry on and picks the file exporter in
//! its own code), every other example with the `NEMO_LENS_*` variables its
//! header names, over OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, and
//! each under `lens record`. None of them turns telemetry on behind the
//! user's back: with no environment, only the quickstart records.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tests::{clean_command, example_binary, get, lens_cli_binary, run_ok, Rotel};

/// Runs example `name` with telemetry on, to `file`, with `env` as well
/// (as its header's command line does); checks it printed where the
/// telemetry went and returns the file's text.
fn run_to_file(name: &str, file: &Path, env: &[(&str, &str)]) -> String {
    let mut cmd = clean_command(example_binary(name));
    cmd.env("NEMO_LENS_ENABLED", "1")
        .env("NEMO_LENS_EXPORTER", "file")
        .env("NEMO_LENS_FILE_PATH", file)
        .envs(env.iter().copied());
    let stdout = String::from_utf8_lossy(&run_ok(&mut cmd).stdout).into_owned();
    assert!(
        stdout.contains(&file.display().to_string()),
        "{name} must print where telemetry went: {stdout}"
    );
    std::fs::read_to_string(file).unwrap()
}

/// (span names, metric names, log bodies) in an OTLP JSON lines file.
fn contents(text: &str) -> (BTreeSet<String>, BTreeSet<String>, Vec<String>) {
    let (mut spans, mut metrics, mut logs) = (BTreeSet::new(), BTreeSet::new(), Vec::new());
    for line in text.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).expect("every line is one JSON request");
        for rs in v["resourceSpans"].as_array().into_iter().flatten() {
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                for s in ss["spans"].as_array().into_iter().flatten() {
                    spans.insert(s["name"].as_str().unwrap().to_owned());
                }
            }
        }
        for rm in v["resourceMetrics"].as_array().into_iter().flatten() {
            for sm in rm["scopeMetrics"].as_array().into_iter().flatten() {
                for m in sm["metrics"].as_array().into_iter().flatten() {
                    metrics.insert(m["name"].as_str().unwrap().to_owned());
                }
            }
        }
        for rl in v["resourceLogs"].as_array().into_iter().flatten() {
            for sl in rl["scopeLogs"].as_array().into_iter().flatten() {
                for r in sl["logRecords"].as_array().into_iter().flatten() {
                    assert_eq!(r["traceId"].as_str().map(str::len).unwrap_or(32), 32);
                    logs.push(r["body"]["stringValue"].as_str().unwrap_or("").to_owned());
                }
            }
        }
    }
    (spans, metrics, logs)
}

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("lens-examples-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{name}.jsonl"));
    let _ = std::fs::remove_file(&p);
    p
}

fn has_all(set: &BTreeSet<String>, want: &[&str]) {
    for w in want {
        assert!(set.contains(*w), "missing {w}; got {set:?}");
    }
}

/// The README's first command: no environment, no collector, a file.
#[test]
fn quickstart_writes_the_file_with_no_environment() {
    let dir = fresh_dir("quickstart-bare");
    let mut cmd = clean_command(example_binary("quickstart"));
    cmd.current_dir(&dir);
    let stdout = String::from_utf8_lossy(&run_ok(&mut cmd).stdout).into_owned();
    let files = files_under(&dir.join("lens-telemetry"));
    assert_eq!(files.len(), 1, "one file under lens-telemetry/: {files:?}");
    // the path as the user's shell would take it: relative to where they ran
    let written = Path::new("lens-telemetry").join(files[0].file_name().unwrap());
    assert!(
        stdout.contains(&format!("telemetry went to {} (", written.display())),
        "the quickstart prints where its spans went: {stdout}"
    );
    let (spans, _, _) = contents(&std::fs::read_to_string(&files[0]).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    has_all(
        &spans,
        &[
            "job",
            "model.init",
            "train.step",
            "forward_backward",
            "optimizer_step",
            "checkpoint.save",
            "evaluate",
            "eval.pass",
        ],
    );
}

/// The quickstart's last line is the `lens report` command for its own
/// output; that command, and its `--html` form, work as printed.
#[test]
fn quickstart_prints_a_report_command_that_works() {
    let file = tmp("quickstart-report");
    let mut cmd = clean_command(example_binary("quickstart"));
    // where the file goes is the only choice made here
    cmd.env("NEMO_LENS_FILE_PATH", &file);
    let stdout = String::from_utf8_lossy(&run_ok(&mut cmd).stdout).into_owned();
    let last = stdout.lines().last().unwrap_or("");
    let printed = last
        .strip_prefix("look at it: cargo run --release -p nemo-lens-cli -- ")
        .and_then(|rest| rest.split("    (").next())
        .unwrap_or_else(|| panic!("the last line names the report command: {last:?}"));
    let args: Vec<&str> = printed.split_whitespace().collect();
    assert_eq!(args, ["report", &*file.display().to_string()]);

    let report = run_ok(std::process::Command::new(lens_cli_binary()).args(&args));
    let text = String::from_utf8_lossy(&report.stdout);
    for name in ["train.step", "forward_backward", "checkpoint.save"] {
        assert!(text.contains(name), "report names {name}:\n{text}");
    }

    let html = file.with_extension("html");
    run_ok(
        std::process::Command::new(lens_cli_binary())
            .args(["report", "--html"])
            .arg(&html)
            .arg(&file),
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("data-rank=\"0\""), "one lane for rank 0");
}

/// Runs an example shipped inside `nemo-lens` in a fresh folder with
/// telemetry to a file, the `per_step` groups and `env`; checks it printed
/// `run RUN: done` and returns the text of `FILE` under `lens-telemetry/`.
fn run_shipped(example: &str, env: &[(&str, &str)], run: &str, file: &str) -> String {
    let dir = std::env::temp_dir().join(format!("lens-{example}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = clean_command(example_binary(example));
    cmd.current_dir(&dir)
        .env("NEMO_LENS_ENABLED", "1")
        .env("NEMO_LENS_EXPORTER", "file")
        .env("NEMO_LENS_SPAN_GROUPS", "per_step")
        .envs(env.iter().copied());
    let out = String::from_utf8_lossy(&run_ok(&mut cmd).stdout).into_owned();
    assert!(out.contains(&format!("run {run}: done")), "{out}");
    let text = std::fs::read_to_string(dir.join("lens-telemetry").join(file)).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    text
}

/// The example shipped inside the `nemo-lens` package runs as its doc says:
/// configuration from the environment, rank and run id from the launcher.
#[test]
fn the_example_shipped_with_nemo_lens_runs() {
    let text = run_shipped(
        "train_loop",
        &[
            ("TORCHELASTIC_RUN_ID", "tl"),
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("NEMO_LENS_EXPORT_STRATEGY", "all_ranks"),
        ],
        "tl",
        "tl-rank1.otlp.jsonl",
    );
    let (spans, _, _) = contents(&text);
    has_all(
        &spans,
        &[
            "train.job",
            "train.step",
            "forward_backward",
            "optimizer_step",
            "eval.pass",
        ],
    );
}

/// The `tracing` example shipped inside `nemo-lens`: candle's pattern (a
/// span made once per layer, entered per forward), routed per entry, gives
/// one lens span per entry under the step around it.
#[test]
fn the_tracing_example_shipped_with_nemo_lens_records_each_entry() {
    let text = run_shipped(
        "tracing_model",
        &[
            ("NEMO_LENS_RUN_ID", "tm"),
            (
                "NEMO_LENS_TRACING_GROUPS",
                "tracing_model=forward_backward:per_entry",
            ),
        ],
        "tm",
        "tm-rank0.otlp.jsonl",
    );
    let mut spans = Vec::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for rs in v["resourceSpans"].as_array().into_iter().flatten() {
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                spans.extend(ss["spans"].as_array().into_iter().flatten().cloned());
            }
        }
    }
    let ids = |name: &str| -> Vec<String> {
        spans
            .iter()
            .filter(|s| s["name"] == name)
            .map(|s| s["spanId"].as_str().unwrap().to_owned())
            .collect()
    };
    let steps = ids("train.step");
    assert_eq!(steps.len(), 3, "three steps");
    let linear: Vec<&serde_json::Value> = spans.iter().filter(|s| s["name"] == "linear").collect();
    assert_eq!(linear.len(), 12, "one span per layer per step (4 x 3)");
    for step in &steps {
        let under = linear
            .iter()
            .filter(|s| s["parentSpanId"].as_str() == Some(step.as_str()))
            .count();
        assert_eq!(under, 4, "four layer entries under step {step}");
    }
}

#[test]
fn megatron_pretrain_spans_metrics_and_logs() {
    let (spans, metrics, logs) = contents(&run_to_file(
        "megatron_pretrain",
        &tmp("megatron"),
        &[
            ("NEMO_LENS_LOGS_ENABLED", "1"),
            ("NEMO_LENS_SPAN_GROUPS", "per_step,microbatch"),
        ],
    ));
    has_all(
        &spans,
        &[
            "pretrain.job",
            "train.step",
            "microbatch",
            "data.next_batch",
            "allreduce.grads",
            "forward_backward",
            "optimizer.step",
            "checkpoint.save",
            "evaluate",
        ],
    );
    assert!(
        !spans.contains("layer.forward"),
        "layer is not in the spec of the example's header"
    );
    has_all(
        &metrics,
        &[
            "nv.dl.step.duration",
            "nv.dl.loss",
            "nv.dl.iterations",
            "nv.dl.throughput.tokens_per_sec",
        ],
    );
    assert!(
        logs.iter().any(|l| l.starts_with("step 3 loss")),
        "{logs:?}"
    );
    assert!(
        logs.iter().any(|l| l.starts_with("saved checkpoint")),
        "{logs:?}"
    );
}

#[test]
fn nemo_rl_grpo_phases_and_metrics() {
    let (spans, metrics, _) = contents(&run_to_file(
        "nemo_rl_grpo",
        &tmp("grpo"),
        &[("NEMO_LENS_SPAN_GROUPS", "per_step,logprob")],
    ));
    has_all(
        &spans,
        &[
            "grpo.job",
            "rl.step",
            "rollout",
            "generation",
            "logprob",
            "reward",
            "advantage",
            "policy_update",
        ],
    );
    has_all(
        &metrics,
        &[
            "rl.reward.mean",
            "rl.kl_divergence",
            "rl.rollout.duration_ms",
            "rl.generation.duration_ms",
            "gen_ai.server.request.duration",
            "gen_ai.client.token.usage",
        ],
    );
}

#[test]
fn token_streaming_records_ttft_and_tpot() {
    let (spans, metrics, _) = contents(&run_to_file(
        "token_streaming",
        &tmp("streaming"),
        &[("NEMO_LENS_SPAN_GROUPS", "per_step")],
    ));
    has_all(&spans, &["generate", "prefill", "decode"]);
    assert!(!spans.contains("sample"), "`sample` is only under `all`");
    has_all(
        &metrics,
        &[
            "gen_ai.server.time_to_first_token",
            "gen_ai.server.time_per_output_token",
            "gen_ai.server.request.duration",
            "gen_ai.client.token.usage",
        ],
    );
}

#[test]
fn nemo_gym_server_joins_the_callers_trace() {
    let text = run_to_file(
        "nemo_gym_server",
        &tmp("gym"),
        &[("NEMO_LENS_SPAN_GROUPS", "all")],
    );
    let (spans, metrics, _) = contents(&text);
    has_all(
        &spans,
        &[
            "rollout_collection",
            "POST /run",
            "verify",
            "aggregate_metrics",
        ],
    );
    has_all(
        &metrics,
        &[
            "gym.server.request_duration_ms",
            "gym.verify.duration_ms",
            "gym.verify.success_rate",
            "gym.rollout.duration_ms",
        ],
    );
    // every server span is in the client's trace (traceparent over HTTP)
    let traces: BTreeSet<&str> = text
        .lines()
        .flat_map(|l| {
            l.match_indices("\"traceId\":\"")
                .map(move |(i, _)| &l[i + 11..i + 43])
        })
        .collect();
    assert_eq!(traces.len(), 1, "{traces:?}");
}

#[test]
fn examples_export_over_otlp_when_on_and_an_endpoint_is_set() {
    let rotel = Rotel::start();
    let mut cmd = clean_command(example_binary("nemo_rl_grpo"));
    // OTLP is the default exporter: on, and where the collector is
    cmd.env("NEMO_LENS_ENABLED", "1")
        .env("NEMO_LENS_SPAN_GROUPS", "per_step")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", rotel.grpc_endpoint())
        .env("NEMO_LENS_RUN_ID", "grpo-otlp");
    run_ok(&mut cmd);
    let r = rotel.wait_for(Duration::from_secs(20), "grpo spans and metrics", |r| {
        !r.spans_named("policy_update").is_empty()
            && r.metrics.iter().any(|m| m.name == "rl.reward.mean")
    });
    assert_eq!(
        get(&r.span("grpo.job").resource, "nemo.run.id"),
        Some("grpo-otlp")
    );
    let g = r.metric("rl.reward.mean");
    assert_eq!(g.data_type, "Gauge");
}

#[test]
fn nemo_gym_server_spans_reach_the_collector_in_the_clients_trace() {
    // the tower layer's SERVER spans, under the reqwest client's span
    let rotel = Rotel::start();
    let mut cmd = clean_command(example_binary("nemo_gym_server"));
    cmd.env("NEMO_LENS_ENABLED", "1")
        .env("NEMO_LENS_SPAN_GROUPS", "all")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", rotel.grpc_endpoint())
        .env("NEMO_LENS_RUN_ID", "gym-otlp");
    run_ok(&mut cmd);
    let r = rotel.wait_for(Duration::from_secs(20), "gym server spans", |r| {
        r.spans_named("POST /run").len() == 8 && !r.spans_named("rollout_collection").is_empty()
    });
    let client = r.span("rollout_collection");
    for s in r.spans_named("POST /run") {
        assert_eq!(s.parent_id, client.span_id, "a child of the client's span");
        assert_eq!(s.trace_id, client.trace_id);
        assert_eq!(get(&s.attributes, "http.route"), Some("/run"));
        assert_eq!(get(&s.attributes, "http.request.method"), Some("POST"));
        assert_eq!(get(&s.attributes, "http.response.status_code"), Some("200"));
    }
    let verify = r.spans_named("verify");
    assert_eq!(verify.len(), 8);
    assert!(verify.iter().all(|v| v.trace_id == client.trace_id));
}

/// A fresh, empty folder for one test.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lens-ex-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The files under `dir` (none when it does not exist), sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    files
}

/// Every example that runs to its end by itself (not the MPI one, which
/// `mpirun` starts, nor the W3C service, which serves until stopped), with
/// the arguments that keep it short.
const SELF_CONTAINED: &[(&str, &[&str])] = &[
    ("quickstart", &[]),
    ("megatron_pretrain", &[]),
    ("nemo_rl_grpo", &[]),
    ("token_streaming", &[]),
    ("nemo_gym_server", &[]),
    ("train_loop", &[]),
    ("tracing_model", &[]),
    ("ddp_sync", &["--world", "2", "--steps", "3"]),
];

/// No example turns telemetry on behind the user's back: with no
/// environment every one but the quickstart (whose `main` chooses a file,
/// in plain sight) runs, exits 0 and records nothing.
#[test]
fn with_no_environment_only_the_quickstart_records() {
    for (name, args) in SELF_CONTAINED {
        let dir = fresh_dir(&format!("bare-{name}"));
        let mut cmd = clean_command(example_binary(name));
        cmd.args(*args).current_dir(&dir);
        run_ok(&mut cmd);
        let files = files_under(&dir.join("lens-telemetry"));
        if *name == "quickstart" {
            assert_eq!(files.len(), 1, "the quickstart records: {files:?}");
        } else {
            assert!(
                files.is_empty(),
                "{name} recorded with no environment: {files:?}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// `lens record -- EXAMPLE` records every example that runs by itself: the
/// command exits 0, each rank's file in the run directory holds spans, and
/// the report names the HTML page.
#[test]
fn every_example_records_under_lens_record() {
    for (name, args) in SELF_CONTAINED {
        let dir = fresh_dir(&format!("record-{name}"));
        let out_dir = dir.join("run");
        let mut cmd = clean_command(lens_cli_binary());
        cmd.current_dir(&dir)
            .arg("record")
            .arg("--out")
            .arg(&out_dir)
            .arg("--")
            .arg(example_binary(name))
            .args(*args);
        if *name == "tracing_model" {
            // the bridge records only the targets it is told to route
            cmd.env(
                "NEMO_LENS_TRACING_GROUPS",
                "tracing_model=forward_backward:per_entry",
            );
        }
        let out = run_ok(&mut cmd);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("HTML report:"), "{name}: {stdout}");
        let ranks = if *name == "ddp_sync" { 2 } else { 1 };
        for rank in 0..ranks {
            let file = out_dir.join(format!("rank{rank}.otlp.jsonl"));
            let text = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("{name}: {}: {e}\n{stdout}", file.display()));
            let (spans, _, _) = contents(&text);
            assert!(spans.len() >= 3, "{name}, rank {rank}: spans {spans:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
