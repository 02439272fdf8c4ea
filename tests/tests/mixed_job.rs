//! A mixed job as a user runs it: one `mpirun -np 4` (Open MPI's MPMD form,
//! `-np 2 python … : -np 2 rust …`) with two ranks of the real Python
//! library (`nemo-lens` 0.2.0, the peer `tests/parity_python.rs` installs)
//! and two Rust ranks using lens, started through `lens exec`, configured
//! once (one `NEMO_LENS_*` / `OTEL_*` environment for all), exporting OTLP
//! to a real collector. Checked from what the collector received: one
//! trace (every rank's `train.step` is a child of `lens exec`'s span), one
//! run (`nemo.run.id` and `service.instance.id`'s prefix equal on all four
//! ranks, handed down by `lens exec` in `NEMO_LENS_RUN_ID`), and one set of
//! metric series (the RL instruments the two languages share: the same
//! name, unit, kind and bucket boundaries from both).
//!
//! How the trace and the run are shared is what a user does (docs/PARITY.md,
//! "A mixed job"): `lens exec` hands `TRACEPARENT` and `NEMO_LENS_RUN_ID`
//! down through `mpirun`; a Rust rank attaches
//! `lens::propagation::context_from_env()`, a Python rank
//! `extract_context({"traceparent": os.environ["TRACEPARENT"]})` (the
//! Python library reads no `TRACEPARENT` by itself), and a Python rank
//! passes the launcher's rank and world size to `setup_telemetry`.
//!
//! Without the peer or without `mpirun`, the test prints one line saying
//! so and passes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tests::{get, lens_cli_binary, lens_command, run_with_timeout, Rotel};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
const PROBE: &str = env!("CARGO_BIN_EXE_lens-parity");

fn mpirun() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("mpirun"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        println!("mixed_job: skipped, no mpirun on PATH (install Open MPI)");
    }
    found
}

#[test]
fn two_python_and_two_rust_ranks_under_mpirun_are_one_trace_one_run_one_set_of_series() {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-peer/venv");
    let Some(py) = tests::python_peer(&venv, "mixed_job") else {
        return;
    };
    let Some(mpirun) = mpirun() else { return };
    let rotel = Rotel::start();
    // the job's one configuration, as a user exports it before the launch
    let mut cmd = lens_command(lens_cli_binary());
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", rotel.grpc_endpoint())
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .env("OTEL_METRIC_EXPORT_INTERVAL", "60000")
        .env("NEMO_LENS_QUIET", "1")
        .env("CUDA_VISIBLE_DEVICES", "")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1");
    for k in ["RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID"] {
        cmd.env_remove(k);
    }
    cmd.args(["exec", "--"])
        .arg(&mpirun)
        .args(["--oversubscribe", "-np", "2"])
        .arg(&py)
        .arg(format!("{ROOT}/tests/python/parity_probe.py"))
        .args(["rank", ":", "-np", "2", PROBE, "rank"]);
    let f = run_with_timeout(&mut cmd, Duration::from_secs(180));
    assert!(!f.timed_out && f.status.success(), "the job: {f:?}");

    let r = rotel.wait_for(Duration::from_secs(30), "4 steps and both metrics", |r| {
        r.spans_named("train.step").len() >= 4
            && r.spans.iter().any(|s| s.name.starts_with("exec "))
            && r.metrics
                .iter()
                .filter(|m| m.name == "rl.generation.duration_ms")
                .count()
                >= 4
    });
    let exec = r
        .spans
        .iter()
        .find(|s| s.name.starts_with("exec "))
        .expect("lens exec's span");
    let run_id = get(&exec.resource, "nemo.run.id").expect("exec's run id");
    let steps = r.spans_named("train.step");
    assert_eq!(steps.len(), 4, "{steps:#?}");
    let mut languages = BTreeMap::new();
    for s in &steps {
        let rank = get(&s.resource, "dl.rank").expect("dl.rank").to_owned();
        let lang = get(&s.resource, "telemetry.sdk.language").unwrap_or("?");
        languages.insert(rank.clone(), lang.to_owned());
        // one trace: every rank's step under the launcher's span
        assert_eq!(s.trace_id, exec.trace_id, "rank {rank}'s trace");
        assert_eq!(s.parent_id, exec.span_id, "rank {rank}'s parent");
        // one run
        assert_eq!(get(&s.resource, "nemo.run.id"), Some(run_id), "rank {rank}");
        assert_eq!(
            get(&s.resource, "service.instance.id"),
            Some(format!("{run_id}-rank{rank}").as_str())
        );
        assert_eq!(get(&s.resource, "dl.world_size"), Some("4"));
    }
    let want: BTreeMap<String, String> = [
        ("0", "python"),
        ("1", "python"),
        ("2", "rust"),
        ("3", "rust"),
    ]
    .iter()
    .map(|(r, l)| (r.to_string(), l.to_string()))
    .collect();
    assert_eq!(languages, want, "ranks 0-1 Python, 2-3 Rust");

    // one set of series: each shared instrument has one descriptor
    // (unit, kind, monotonicity, bucket boundaries) across the four ranks
    for name in ["rl.reward.mean", "rl.generation.duration_ms"] {
        let mut by_lang: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for m in r.metrics.iter().filter(|m| m.name == name) {
            let lang = get(&m.resource, "telemetry.sdk.language").unwrap_or("?");
            assert_eq!(get(&m.resource, "nemo.run.id"), Some(run_id), "{name}");
            let bounds: Vec<&(String, String)> = m
                .points
                .iter()
                .flat_map(|p| &p.fields)
                .filter(|(k, _)| k.starts_with("ExplicitBounds"))
                .collect();
            by_lang.entry(lang.to_owned()).or_default().insert(format!(
                "unit={:?} type={} monotonic={:?} bounds={bounds:?}",
                m.unit, m.data_type, m.is_monotonic
            ));
        }
        assert_eq!(
            by_lang.keys().map(String::as_str).collect::<Vec<_>>(),
            ["python", "rust"],
            "{name} from both languages"
        );
        let all: BTreeSet<&String> = by_lang.values().flatten().collect();
        assert_eq!(all.len(), 1, "{name}: one descriptor, got {by_lang:#?}");
        if name == "rl.generation.duration_ms" {
            assert!(
                all.iter().any(|d| d.contains("ExplicitBounds")),
                "{name}: the boundaries are compared: {all:?}"
            );
        }
    }
}
