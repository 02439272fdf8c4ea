//! Lens beside the real Python library (`nemo-lens` 0.2.0, the peer in
//! `../shared/peers/nemo-lens-0.2.0`, or the folder `LENS_PYTHON_PEER`
//! names), under the same environment: configuration defaults, strategies
//! and their exporting ranks, run ids under SLURM / torchrun / MPI,
//! resource keys, span names, scopes and status, and metric names, kinds,
//! units and bucket boundaries. `tests/python/parity_probe.py` is the
//! Python side, the `lens-parity` probe the Rust side; both print one
//! normalised JSON object. Every difference is asserted as it is, and the
//! Python column of `docs/PARITY.md` is checked against the Python output
//! where a row states what the library writes or defaults to.
//!
//! The peer is installed once into a virtual environment of its own under
//! the target directory (`tests/python/peer-venv.sh`); without the peer the
//! tests print one line saying so and pass.

use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;
use tests::{clean_command, run_with_timeout};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
const PROBE: &str = env!("CARGO_BIN_EXE_lens-parity");

/// The peer's virtual environment's python, installed once per target dir.
fn python() -> Option<&'static Path> {
    static PY: OnceLock<Option<PathBuf>> = OnceLock::new();
    PY.get_or_init(|| {
        let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-peer/venv");
        tests::python_peer(&venv, "parity_python")
    })
    .as_deref()
}

fn run(mut cmd: std::process::Command, env: &[(&str, &str)], what: &str) -> Value {
    // the host's GPUs stay out: both languages count CUDA_VISIBLE_DEVICES
    cmd.env("CUDA_VISIBLE_DEVICES", "0,1");
    for k in [
        "RANK",
        "WORLD_SIZE",
        "TORCHELASTIC_RUN_ID",
        "WANDB_ENTITY",
        "WANDB_PROJECT",
    ] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let f = run_with_timeout(&mut cmd, Duration::from_secs(120));
    assert!(!f.timed_out && f.status.success(), "{what}: {f:?}");
    let line = f.stdout.lines().last().unwrap_or("");
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{what}: {e}: {f:?}"))
}

/// (Python's output, Lens's output) for `mode` under `env`.
fn both(py: &Path, mode: &[&str], env: &[(&str, &str)]) -> (Value, Value) {
    let dir = tempdir(&format!("{}-{}", mode[0], env.len()));
    let mut p = clean_command(py);
    p.arg(format!("{ROOT}/tests/python/parity_probe.py"))
        .args(mode)
        .current_dir(&dir);
    let python = run(p, env, &format!("python {mode:?} {env:?}"));
    let mut r = clean_command(PROBE);
    r.args(mode).current_dir(&dir);
    let file = dir.join("lens.otlp.jsonl");
    if mode[0] == "job" {
        // the one setting the Python library must not see (it has no
        // `file` exporter): where Lens writes what the probe reads back
        r.arg(&file)
            .env("NEMO_LENS_EXPORTER", "file")
            .env("NEMO_LENS_FILE_PATH", &file)
            .env("NEMO_LENS_QUIET", "1")
            .env("NEMO_LENS_PROFILE", "0");
    }
    let rust = run(r, env, &format!("lens {mode:?} {env:?}"));
    let _ = std::fs::remove_dir_all(&dir);
    (python, rust)
}

fn tempdir(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("lens-parity-py-{}-{tag}-{n}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The rows of one `## section` table of docs/PARITY.md: key → (Python, Rust).
fn parity_rows(section: &str) -> BTreeMap<String, (String, String)> {
    let text = std::fs::read_to_string(format!("{ROOT}/docs/PARITY.md")).unwrap();
    let mut out = BTreeMap::new();
    let mut inside = false;
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            inside = h.trim() == section;
            continue;
        }
        if !inside || !line.starts_with("| `") {
            continue;
        }
        let cells: Vec<String> = line
            .trim_matches('|')
            .split(" | ")
            .map(|c| c.replace('`', "").trim().to_owned())
            .collect();
        out.insert(cells[0].clone(), (cells[1].clone(), cells[2].clone()));
    }
    assert!(!out.is_empty(), "no `## {section}` table");
    out
}

#[test]
fn configuration_defaults_and_values_are_python_s() {
    let Some(py) = python() else { return };
    let rows = parity_rows("Environment variables");
    for env in [
        &[][..],
        &[
            ("NEMO_LENS_ENABLED", "yes"),
            ("OTEL_SERVICE_NAME", "trainer"),
            ("NEMO_LENS_EXPORT_STRATEGY", "sampled"),
            ("NEMO_LENS_EXPORT_RANK", "3"),
            ("NEMO_LENS_EXPORT_SAMPLE_RATE", "0.25"),
            ("NEMO_LENS_TRACES_ENABLED", "off"),
            ("NEMO_LENS_SPAN_GROUPS", "per_step"),
            ("NEMO_LENS_RUN_ID", "r1"),
            ("NEMO_LENS_USER_ID", "alice"),
            ("WANDB_ENTITY", "team"),
            ("WANDB_PROJECT", "proj"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "2500"),
        ][..],
    ] {
        let (python, rust) = both(py, &["config"], env);
        assert_eq!(python, rust, "under {env:?}");
        if env.is_empty() {
            // the Python column of every variable the library reads is its
            // default, as the library reports it
            for (var, default) in python.as_object().unwrap() {
                let row = rows
                    .get(var)
                    .unwrap_or_else(|| panic!("PARITY.md has no row for `{var}`"));
                assert_eq!(
                    &row.0,
                    default.as_str().unwrap(),
                    "Python default of `{var}`"
                );
            }
        }
    }
}

#[test]
fn strategies_pick_the_same_ranks() {
    let Some(py) = python() else { return };
    for env in [
        &[("NEMO_LENS_EXPORT_STRATEGY", "all_ranks")][..],
        &[][..],
        &[("NEMO_LENS_EXPORT_RANK", "0")][..],
        &[("NEMO_LENS_EXPORT_RANK", "5")][..],
        &[
            ("NEMO_LENS_EXPORT_STRATEGY", "sampled"),
            ("NEMO_LENS_EXPORT_SAMPLE_RATE", "0.5"),
        ][..],
        &[
            ("NEMO_LENS_EXPORT_STRATEGY", "sampled"),
            ("NEMO_LENS_EXPORT_SAMPLE_RATE", "0.1"),
        ][..],
        &[
            ("NEMO_LENS_EXPORT_STRATEGY", "first_rank_per_node"),
            ("LOCAL_RANK", "0"),
        ][..],
        &[
            ("NEMO_LENS_EXPORT_STRATEGY", "first_rank_per_node"),
            ("LOCAL_RANK", "2"),
        ][..],
    ] {
        let (python, rust) = both(py, &["strategies", "16"], env);
        assert_eq!(python, rust, "exporting ranks under {env:?}");
    }
}

const COMMON: [(&str, &str); 3] = [
    ("NEMO_LENS_ENABLED", "1"),
    ("NEMO_LENS_EXPORT_STRATEGY", "all_ranks"),
    ("NEMO_LENS_SPAN_GROUPS", "all"),
];

fn with_common<'a>(env: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut v = COMMON.to_vec();
    v.extend_from_slice(env);
    v
}

fn obj(v: &Value) -> &Map<String, Value> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
}

/// The keys in `a` and not in `b`.
fn only(a: &Value, b: &Value) -> BTreeSet<String> {
    obj(a)
        .keys()
        .filter(|k| !obj(b).contains_key(*k))
        .cloned()
        .collect()
}

#[test]
fn one_job_under_slurm_torchrun_and_mpi() {
    let Some(py) = python() else { return };
    let is_random = |id: &str| id.len() == 12 && id.chars().all(|c| c.is_ascii_hexdigit());
    let slurm = [
        ("SLURM_JOB_ID", "4242"),
        ("SLURM_STEP_ID", "1"),
        ("SLURM_PROCID", "3"),
        ("SLURM_NTASKS", "4"),
        ("SLURM_JOB_NAME", "pretrain"),
    ];
    let torchrun = [
        ("RANK", "3"),
        ("WORLD_SIZE", "4"),
        ("LOCAL_RANK", "3"),
        ("TORCHELASTIC_RUN_ID", "c0ffee"),
    ];
    let mpi = [
        ("OMPI_COMM_WORLD_RANK", "3"),
        ("OMPI_COMM_WORLD_SIZE", "4"),
        ("OMPI_MCA_ess_base_jobid", "777"),
    ];
    let mut named = torchrun.to_vec();
    named.push(("NEMO_LENS_RUN_ID", "shared"));
    for (launcher, env) in [
        ("SLURM", &slurm[..]),
        ("torchrun", &torchrun[..]),
        ("Open MPI", &mpi[..]),
        ("torchrun + NEMO_LENS_RUN_ID", &named[..]),
    ] {
        let (p, r) = both(py, &["job"], &with_common(env));
        let (pid, rid) = (p["run_id"].as_str().unwrap(), r["run_id"].as_str().unwrap());
        match launcher {
            // one run for both languages
            "SLURM" => assert_eq!((pid, rid), ("4242", "4242")),
            "torchrun + NEMO_LENS_RUN_ID" => assert_eq!((pid, rid), ("shared", "shared")),
            // Python reads no launcher but SLURM: a random id per rank, so a
            // mixed job needs NEMO_LENS_RUN_ID (PARITY.md's hazards)
            _ => {
                assert!(is_random(pid), "{launcher}: Python's run id {pid}");
                assert_eq!(
                    rid,
                    if launcher == "torchrun" {
                        "c0ffee"
                    } else {
                        "777"
                    }
                );
            }
        }
        assert_eq!(
            (&p["exporting"], &r["exporting"]),
            (&json!(true), &json!(true))
        );
        let (pres, rres) = (&p["resource"], &r["resource"]);
        // the keys each writes
        assert_eq!(
            only(pres, rres),
            BTreeSet::from(["service.version".to_owned()]),
            "{launcher}: keys only Python writes"
        );
        let mut lens_only = BTreeSet::from(["nv.dl.rank", "nv.dl.world_size"].map(str::to_owned));
        if launcher.starts_with("torchrun") {
            lens_only.insert("nv.dl.local_rank".to_owned());
        }
        if launcher == "SLURM" {
            lens_only.insert("slurm.step.id".to_owned());
        }
        assert_eq!(
            only(rres, pres),
            lens_only,
            "{launcher}: keys only Lens writes"
        );
        // the values of the keys both write
        let differ: BTreeSet<String> = obj(pres)
            .iter()
            .filter(|(k, v)| obj(rres).get(*k).is_some_and(|rv| rv != *v))
            .map(|(k, _)| k.clone())
            .collect();
        let mut want: BTreeSet<String> = [
            "process.pid",
            "telemetry.sdk.name",
            "telemetry.sdk.language",
            "telemetry.sdk.version",
        ]
        .map(str::to_owned)
        .into();
        if !matches!(launcher, "SLURM" | "torchrun + NEMO_LENS_RUN_ID") {
            want.extend(["nemo.run.id".to_owned(), "service.instance.id".to_owned()]);
        }
        assert_eq!(
            differ, want,
            "{launcher}: values that differ\n{pres}\n{rres}"
        );
        for k in ["dl.rank", "dl.world_size", "service.name", "host.gpu.count"] {
            assert_eq!(pres[k], rres[k], "{launcher}: {k}");
        }
        assert_eq!(pres["dl.rank"], json!("3"));
        // the same spans, status codes; scope and error text as PARITY.md says
        let spans = |v: &Value| -> BTreeMap<String, (String, String, String)> {
            v["spans"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| {
                    let t = |k: &str| s[k].as_str().unwrap().to_owned();
                    (t("name"), (t("scope"), t("status"), t("message")))
                })
                .collect()
        };
        let (ps, rs) = (spans(&p), spans(&r));
        assert_eq!(ps.keys().collect::<Vec<_>>(), rs.keys().collect::<Vec<_>>());
        for (name, (pscope, pstatus, pmsg)) in &ps {
            let (rscope, rstatus, rmsg) = &rs[name];
            assert_eq!(pstatus, rstatus, "{name}");
            assert_eq!(rscope, "nemo.lens", "{name}");
            let helper = name != "fn.step";
            assert_eq!(
                pscope,
                if helper {
                    "nemo.lens.helpers"
                } else {
                    "nemo.lens"
                },
                "{name}: Python's scope"
            );
            if name == "train.step.failed" {
                assert_eq!((pmsg.as_str(), rmsg.as_str()), ("boom", "ValueError: boom"));
            } else {
                assert_eq!((pmsg.as_str(), rmsg.as_str()), ("", ""), "{name}");
            }
        }
        // the metric instruments: identical, boundaries included
        let metrics = |v: &Value| -> BTreeMap<String, Value> {
            v["metrics"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| (m["name"].as_str().unwrap().to_owned(), m.clone()))
                .collect()
        };
        let (pm, rm) = (metrics(&p), metrics(&r));
        assert_eq!(pm.len(), 18, "{pm:?}");
        assert_eq!(pm, rm, "{launcher}: metric instruments");
        if launcher == "SLURM" {
            check_parity_md(&p, &pm);
        }
    }
}

/// The Python column of PARITY.md's attribute and metric rows against what
/// the library wrote.
fn check_parity_md(p: &Value, metrics: &BTreeMap<String, Value>) {
    let attrs = parity_rows("Attribute keys");
    for k in obj(&p["resource"]).keys() {
        let row = attrs
            .get(k)
            .unwrap_or_else(|| panic!("PARITY.md has no row for `{k}`, which Python writes"));
        assert_eq!(&row.0, k, "Python column of `{k}`");
    }
    let rows = parity_rows("Metrics");
    for (name, m) in metrics {
        let unit = m["unit"].as_str().unwrap();
        let want = format!(
            "{}, {}",
            m["kind"].as_str().unwrap(),
            if unit.is_empty() { "none" } else { unit }
        );
        let row = rows
            .get(name)
            .unwrap_or_else(|| panic!("PARITY.md has no row for `{name}`"));
        assert_eq!(row.0, want, "Python column of `{name}`");
    }
}

#[test]
fn fine_buckets_are_an_opt_in_view() {
    let Some(py) = python() else { return };
    let mut env = with_common(&[]);
    env.push(("NEMO_LENS_FINE_BUCKETS", "1"));
    let (p, r) = both(py, &["job"], &env);
    let bounds = |v: &Value, name: &str| -> Value {
        v["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .map(|m| m["bounds"].clone())
            .unwrap_or(Value::Null)
    };
    let sdk: Vec<f64> = lens::metrics::SDK_DEFAULT_BUCKETS.to_vec();
    assert_eq!(
        bounds(&p, "rl.rollout.duration_ms"),
        json!(sdk),
        "Python ignores the variable"
    );
    assert_eq!(
        bounds(&r, "rl.rollout.duration_ms"),
        json!(lens::metrics::DURATION_MS_BUCKETS.to_vec())
    );
    assert_eq!(
        bounds(&r, "gen_ai.client.token.usage"),
        json!(lens::metrics::GEN_AI_TOKEN_BUCKETS.to_vec())
    );
}

/// Runs `program args` under `env` and returns (success, stderr).
fn status(program: &Path, args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let dir = tempdir("hazard");
    let mut cmd = clean_command(program);
    cmd.args(args)
        .current_dir(&dir)
        .env("CUDA_VISIBLE_DEVICES", "");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let f = run_with_timeout(&mut cmd, Duration::from_secs(120));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!f.timed_out, "{f:?}");
    (f.status.success(), f.stderr)
}

/// PARITY.md's "Shared-environment hazards", each as it is.
#[test]
fn shared_environment_hazards() {
    let Some(py) = python() else { return };
    let probe = format!("{ROOT}/tests/python/parity_probe.py");
    let py_job = |env: &[(&str, &str)]| status(py, &[probe.as_str(), "setup"], &with_common(env));
    // a Lens-only exporter crashes the Python ranks that export
    for exporter in ["file", "perfetto"] {
        let (ok, err) = py_job(&[("NEMO_LENS_EXPORTER", exporter)]);
        assert!(
            !ok && err.contains("Unknown exporter type"),
            "{exporter}: {err}"
        );
    }
    // an export rank below -1: Python takes it as the last rank, Lens stops
    let mut cmd = clean_command(py);
    cmd.args([probe.as_str(), "strategies", "4"]);
    let python = run(
        cmd,
        &[("NEMO_LENS_EXPORT_RANK", "-2")],
        "python export rank -2",
    );
    assert_eq!(python, json!({"ranks": [3]}));
    let (ok, err) = status(
        Path::new(PROBE),
        &["strategies", "4"],
        &[("NEMO_LENS_EXPORT_RANK", "-2")],
    );
    assert!(!ok && err.contains("NEMO_LENS_EXPORT_RANK"), "{err}");
    // an OpenTelemetry exporter Lens does not have: Python ignores the
    // variable, Lens stops at setup
    let console = ("NEMO_LENS_EXPORTER", "console");
    let (ok, _) = py_job(&[("OTEL_TRACES_EXPORTER", "zipkin"), console]);
    assert!(ok, "Python ignores OTEL_TRACES_EXPORTER");
    let (ok, err) = status(
        Path::new(PROBE),
        &["job", "/dev/null"],
        &with_common(&[("OTEL_TRACES_EXPORTER", "zipkin"), console]),
    );
    assert!(!ok && err.contains("OTEL_TRACES_EXPORTER"), "{err}");
}
