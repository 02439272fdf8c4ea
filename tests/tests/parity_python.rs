//! Lens beside the real Python library (`nemo-lens` 0.2.0, the peer in
//! `../shared/peers/nemo-lens-0.2.0`, or the folder `LENS_PYTHON_PEER`
//! names), under the same environment: configuration defaults, strategies
//! and their exporting ranks, run ids under SLURM / torchrun / MPI,
//! resource keys, span names, scopes and status, metric names, kinds,
//! units and bucket boundaries, the variables behind every detected
//! attribute, resource precedence, error messages, baggage and carriers,
//! exception events, the variables the library reads, its groups, keys
//! and instruments, and a forked child. `tests/python/parity_probe.py` is the
//! Python side, the `lens-parity` probe the Rust side; both print one
//! normalised JSON object. Every difference is asserted as it is, and the
//! Python column of every row of `docs/PARITY.md` is checked against the
//! Python output (the mixed-job row by `mixed_job.rs`).
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

/// Variables of the developer's shell or a CI pod that resource detection
/// reads (`SLURM_*` and `OTEL_*` go with `clean_command`).
const DETECTED: [&str; 21] = [
    "RANK",
    "WORLD_SIZE",
    "TORCHELASTIC_RUN_ID",
    "WANDB_ENTITY",
    "WANDB_PROJECT",
    "KUBERNETES_SERVICE_HOST",
    "KUBERNETES_NAMESPACE",
    "K8S_NAMESPACE",
    "K8S_POD_NAME",
    "K8S_POD_UID",
    "K8S_NODE_NAME",
    "K8S_CONTAINER_NAME",
    "K8S_JOB_NAME",
    "POD_NAMESPACE",
    "POD_NAME",
    "POD_UID",
    "NODE_NAME",
    "CONTAINER_NAME",
    "JOB_NAME",
    "HOSTNAME",
    "DEPLOYMENT_ENV",
];

/// `env` value that removes the variable instead of setting it.
const UNSET: &str = "\u{0}unset";

fn run(mut cmd: std::process::Command, env: &[(&str, &str)], what: &str) -> Value {
    // the host's GPUs stay out: both languages count CUDA_VISIBLE_DEVICES
    cmd.env("CUDA_VISIBLE_DEVICES", "0,1");
    for k in DETECTED
        .iter()
        .chain(&["ENVIRONMENT", "RUST_BACKTRACE", "RUST_LIB_BACKTRACE"])
    {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        if *v == UNSET {
            cmd.env_remove(k);
        } else {
            cmd.env(k, v);
        }
    }
    let f = run_with_timeout(&mut cmd, Duration::from_secs(120));
    assert!(!f.timed_out && f.status.success(), "{what}: {f:?}");
    let line = f.stdout.lines().last().unwrap_or("");
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{what}: {e}: {f:?}"))
}

/// (Python's output, Lens's output) for `mode` under `env`.
fn both(py: &Path, mode: &[&str], env: &[(&str, &str)]) -> (Value, Value) {
    (one(Some(py), mode, env), one(None, mode, env))
}

/// The Python probe's output (`py`), else Lens's, for `mode` under `env`.
fn one(py: Option<&Path>, mode: &[&str], env: &[(&str, &str)]) -> Value {
    let dir = tempdir(&format!("{}-{}", mode[0], env.len()));
    if let Some(py) = py {
        let mut p = clean_command(py);
        p.arg(format!("{ROOT}/tests/python/parity_probe.py"))
            .args(mode)
            .current_dir(&dir);
        let python = run(p, env, &format!("python {mode:?} {env:?}"));
        let _ = std::fs::remove_dir_all(&dir);
        return python;
    }
    let mut r = clean_command(PROBE);
    r.args(mode).current_dir(&dir);
    let file = dir.join("lens.otlp.jsonl");
    if matches!(mode[0], "job" | "resource") {
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
    rust
}

fn tempdir(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("lens-parity-py-{}-{tag}-{n}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The rows of one `## section` table of docs/PARITY.md: key → (Python,
/// Rust), backticks removed.
fn parity_rows(section: &str) -> BTreeMap<String, (String, String)> {
    let text = std::fs::read_to_string(format!("{ROOT}/docs/PARITY.md")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = BTreeMap::new();
    let mut inside = false;
    for (i, line) in lines.iter().enumerate() {
        if let Some(h) = line.strip_prefix("## ") {
            inside = h.trim() == section;
            continue;
        }
        let header = lines.get(i + 1).is_some_and(|n| n.starts_with("|---"));
        if !inside || !line.starts_with("| ") || header {
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

/// The Python column of `key` in `rows`.
fn py_cell<'a>(rows: &'a BTreeMap<String, (String, String)>, key: &str) -> &'a str {
    &rows
        .get(key)
        .unwrap_or_else(|| panic!("PARITY.md has no row `{key}`"))
        .0
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
            // managed_span and span_cm use the helpers module's tracer,
            // trace_fn and get_tracer() the library's scope
            let helper = !matches!(name.as_str(), "fn.step" | "left.open");
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
            } else if name == "block.failed" {
                assert_eq!((pmsg.as_str(), rmsg.as_str()), ("Boom: boom", "Boom: boom"));
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
            check_exceptions_and_truncation(&p, &r);
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

/// The span named `name` in a `job` output.
fn span<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no span {name} in {v}"))
}

/// The attributes of a span's `exception` event.
fn exception_event(s: &Value) -> &Map<String, Value> {
    let e = s["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "exception")
        .unwrap_or_else(|| panic!("no exception event: {s}"));
    obj(&e["attributes"])
}

/// PARITY.md's exception rows and the span still open at shutdown, against
/// the `job` outputs.
fn check_exceptions_and_truncation(p: &Value, r: &Value) {
    let wire = parity_rows("Wire formats and behaviour");
    assert_eq!(
        py_cell(&wire, "error status description"),
        "span_cm: TypeName: message; managed_span: the bare message"
    );
    let types: Vec<(&str, &str)> = [
        ("train.step.failed", "ValueError"),
        ("block.failed", "Boom"),
    ]
    .into_iter()
    .map(|(name, rust_type)| {
        let (pe, re) = (
            exception_event(span(p, name)),
            exception_event(span(r, name)),
        );
        assert_eq!(
            (&pe["exception.message"], &re["exception.message"]),
            (&json!("boom"), &json!("boom"))
        );
        assert!(
            re["exception.type"]
                .as_str()
                .unwrap()
                .ends_with(&format!("::{rust_type}")),
            "{re:?}"
        );
        // a stack trace always; `escaped` as a string
        assert!(pe["exception.stacktrace"]
            .as_str()
            .is_some_and(|t| t.contains("Traceback")));
        assert!(
            !re.contains_key("exception.stacktrace"),
            "no RUST_BACKTRACE: {re:?}"
        );
        assert_eq!(pe["exception.escaped"], json!("False"));
        assert!(!re.contains_key("exception.escaped"));
        (name, pe["exception.type"].as_str().unwrap())
    })
    .collect();
    assert_eq!(
        types,
        [
            ("train.step.failed", "ValueError"),
            ("block.failed", "__main__.Boom")
        ]
    );
    assert_eq!(
        py_cell(&wire, "exception.type value"),
        "module.QualName, the bare QualName for a builtin (__main__.Boom, ValueError)"
    );
    assert_eq!(py_cell(&wire, "exception.stacktrace"), "always");
    assert_eq!(
        py_cell(&wire, "exception.escaped"),
        "False, a string, from both helpers"
    );
    // a span still open at shutdown: both mark it the same way
    let (pt, rt) = (span(p, "left.open"), span(r, "left.open"));
    assert_eq!(pt["attributes"], json!({"nemo.span.truncated": "true"}));
    assert_eq!(
        pt["events"],
        json!([{"name": "nemo.span.truncated",
                "attributes": {"nemo.span.truncated.reason": "still open at telemetry shutdown"}}])
    );
    assert_eq!(
        (&pt["attributes"], &pt["events"]),
        (&rt["attributes"], &rt["events"])
    );
}

/// `resource` mode: one rank set up under `env` with the caller's
/// attributes `caller`; Python's (`py`) or Lens's.
fn resource_of(py: Option<&Path>, env: &[(&str, &str)], caller: &str) -> Value {
    one(py, &["resource", caller], &with_common(env))
}

/// The variable names of a "`A`, else `B` (…)" cell, in order.
fn var_tokens(cell: &str) -> Vec<String> {
    cell.split(" (")
        .next()
        .unwrap()
        .split(", else ")
        .map(str::trim)
        .filter(|t| {
            !t.is_empty()
                && t.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
        .map(str::to_owned)
        .collect()
}

/// For each attribute, the variables it is read from, in the order they
/// win: every candidate set (to its own name) at once, the winner noted
/// and removed, until the attribute is no longer written.
fn chains(
    py: Option<&Path>,
    gate: &[(&str, &str)],
    candidates: &BTreeMap<String, Vec<String>>,
) -> BTreeMap<String, Vec<String>> {
    let mut left = candidates.clone();
    let mut out: BTreeMap<String, Vec<String>> =
        left.keys().map(|k| (k.clone(), Vec::new())).collect();
    let mut done = BTreeSet::new();
    while done.len() < left.len() {
        let mut env: Vec<(&str, &str)> = gate.to_vec();
        for (attr, vars) in &left {
            if !done.contains(attr) {
                env.extend(vars.iter().map(|v| (v.as_str(), v.as_str())));
            }
        }
        let res = resource_of(py, &env, "-");
        for (attr, vars) in left.iter_mut() {
            if done.contains(attr) {
                continue;
            }
            match res["resource"][attr].as_str() {
                Some(v) if vars.iter().any(|x| x == v) => {
                    out.get_mut(attr).unwrap().push(v.to_owned());
                    vars.retain(|x| x != v);
                }
                _ => {
                    done.insert(attr.clone());
                }
            }
        }
    }
    out
}

/// The resource rows of PARITY.md's "Wire formats and behaviour": where
/// each detected attribute comes from, when it is written, its type, the
/// precedence of the layers, and the values both write.
#[test]
fn resource_detection_is_python_s() {
    let Some(py) = python() else { return };
    let wire = parity_rows("Wire formats and behaviour");
    // the variables behind each attribute, and their order
    let rows: BTreeMap<String, (String, String)> = wire
        .iter()
        .filter_map(|(k, v)| Some((k.strip_suffix(" variable")?.to_owned(), v.clone())))
        .collect();
    assert!(rows.len() >= 14, "{rows:?}");
    let mut candidates: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (attr, (p, r)) in &rows {
        let mut c = var_tokens(p);
        for v in var_tokens(r) {
            if !c.contains(&v) {
                c.push(v);
            }
        }
        candidates.insert(attr.clone(), c);
    }
    let job_id: BTreeMap<String, Vec<String>> = candidates
        .remove_entry("slurm.job.id")
        .into_iter()
        .collect();
    let gate = [
        ("SLURM_JOB_ID", "4242"),
        ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
    ];
    for lang in [Some(py), None] {
        let mut found = chains(lang, &gate, &candidates);
        found.extend(chains(lang, &[], &job_id));
        for (attr, vars) in found {
            let (p, r) = &rows[&attr];
            if lang.is_some() {
                assert_eq!(
                    p,
                    &vars.join(", else "),
                    "Python column of `{attr} variable`"
                );
            } else {
                assert_eq!(var_tokens(r), vars, "Rust column of `{attr} variable`");
            }
        }
    }
    // when SLURM attributes are written
    let alias = [("SLURM_JOBID", "7"), ("SLURM_JOB_NAME", "n")];
    let (p, r) = (
        resource_of(Some(py), &alias, "-"),
        resource_of(None, &alias, "-"),
    );
    assert!(
        !obj(&p["resource"]).keys().any(|k| k.starts_with("slurm.")),
        "{p}"
    );
    assert_eq!(r["resource"]["slurm.job.id"], json!("7"));
    assert_eq!(
        py_cell(&wire, "SLURM attributes present"),
        "only when SLURM_JOB_ID is set"
    );
    // when Kubernetes attributes are written: the variable, or a path
    let pod = [("K8S_POD_NAME", "p")];
    let p = resource_of(Some(py), &pod, "-");
    let paths: Vec<&str> = p["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        py_cell(&wire, "Kubernetes attributes present"),
        format!(
            "KUBERNETES_SERVICE_HOST set or {} present",
            paths.join(" or ")
        )
    );
    if !paths.iter().any(|p| Path::new(p).exists()) {
        let r = resource_of(None, &pod, "-");
        for v in [&p, &r] {
            assert!(
                !obj(&v["resource"]).keys().any(|k| k.starts_with("k8s.")),
                "{v}"
            );
        }
    }
    // precedence: a key in exactly two layers for every pair but
    // (own, detected), which follows from the others
    const ENV: usize = 0;
    const OWN: usize = 1;
    const CALLER: usize = 2;
    const DETECTED: usize = 3;
    let env = [
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "host.name=env,dl.rank=env,x.ec=env",
        ),
        ("SLURM_JOB_ID", "4242"),
    ];
    let caller = "dl.world_size=caller,x.ec=caller,slurm.job.id=caller";
    for (lang, own) in [(Some(py), "the library's own"), (None, "lens's own")] {
        let res = resource_of(lang, &env, caller);
        let v = |k: &str| res["resource"][k].as_str().unwrap_or("").to_owned();
        let beats = [
            (v("dl.rank") == "env", ENV, OWN),
            (v("x.ec") == "env", ENV, CALLER),
            (v("host.name") == "env", ENV, DETECTED),
            (v("dl.world_size") == "caller", CALLER, OWN),
            (v("slurm.job.id") == "caller", CALLER, DETECTED),
        ]
        .map(|(a_wins, a, b)| if a_wins { (a, b) } else { (b, a) });
        let mut orders = Vec::new();
        for a in 0..4 {
            for b in 0..4 {
                for c in 0..4 {
                    let Some(d) = 6usize.checked_sub(a + b + c) else {
                        continue;
                    };
                    let order = [a, b, c, d];
                    let distinct: BTreeSet<_> = order.iter().collect();
                    let pos = |l: usize| order.iter().position(|x| *x == l).unwrap();
                    if distinct.len() == 4 && beats.iter().all(|(w, l)| pos(*l) < pos(*w)) {
                        orders.push(order);
                    }
                }
            }
        }
        assert_eq!(orders.len(), 1, "{beats:?}");
        let names = [
            "OTEL_RESOURCE_ATTRIBUTES",
            own,
            "caller-supplied",
            "detected",
        ];
        let said = orders[0].map(|l| names[l]).join(" < ");
        let (p, r) = &wire["resource precedence"];
        let cell = if lang.is_some() { p } else { r };
        assert_eq!(cell.split(" (").next().unwrap(), said);
    }
    // values both write, and their types
    let env = [
        ("NEMO_LENS_RUN_ID", "r1"),
        ("RANK", "2"),
        ("WORLD_SIZE", "4"),
        ("SLURM_JOB_ID", "4242"),
        ("SLURM_NNODES", "2"),
        ("SLURM_NTASKS", "8"),
    ];
    let (p, r) = (
        resource_of(Some(py), &env, "-"),
        resource_of(None, &env, "-"),
    );
    for v in [&p, &r] {
        assert_eq!(v["resource"]["service.instance.id"], json!("r1-rank2"));
        assert_eq!(v["resource"]["dl.rank"], json!("2"));
        for k in ["slurm.nnodes", "slurm.ntasks"] {
            assert_eq!(v["types"][k], json!("string"), "{k}");
        }
    }
    assert_eq!(
        py_cell(&wire, "service.instance.id value"),
        "{run_id}-rank{rank}"
    );
    // the rank the probe passes (the launcher's); a caller's dl.* replaces
    // the library's own (precedence above)
    assert_eq!(
        py_cell(&wire, "rank attribute source"),
        "the rank argument of setup_telemetry (a caller-supplied dl.rank replaces it)"
    );
    assert_eq!(
        py_cell(&wire, "slurm.nnodes, slurm.ntasks value type"),
        "string"
    );
    let differ: Vec<&String> = obj(&p["types"])
        .iter()
        .filter(|(k, t)| r["types"].get(k.as_str()).is_some_and(|rt| rt != *t))
        .map(|(k, _)| k)
        .collect();
    assert!(differ.is_empty(), "types that differ: {differ:?}\n{p}\n{r}");
    assert_eq!(p["resource"]["service.version"], json!("0.2.0"));
    assert!(py_cell(&wire, "service.version value").contains("(0.2.0)"));
    let sdk = |v: &Value| {
        format!(
            "{}, {}",
            v["resource"]["telemetry.sdk.name"].as_str().unwrap(),
            v["resource"]["telemetry.sdk.language"].as_str().unwrap()
        )
    };
    assert_eq!(py_cell(&wire, "telemetry.sdk.name, .language"), sdk(&p));
    assert_eq!(wire["telemetry.sdk.name, .language"].1, sdk(&r));
    // the GPU count: the list, else nvidia-smi (a stand-in on PATH)
    let bin = tempdir("nvidia-smi");
    let smi = bin.join("nvidia-smi");
    std::fs::write(&smi, "#!/bin/sh\nprintf '1\\n1\\n1\\n'\n").unwrap();
    std::fs::set_permissions(&smi, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = bin.to_str().unwrap();
    for (cuda, path, want_py, want_rust) in [
        ("", "/nonexistent", json!("0"), json!("0")),
        ("0,1", "/nonexistent", json!("2"), json!("2")),
        (UNSET, path, json!("3"), Value::Null),
        (UNSET, "/nonexistent", Value::Null, Value::Null),
    ] {
        let env = [("CUDA_VISIBLE_DEVICES", cuda), ("PATH", path)];
        let (p, r) = (
            resource_of(Some(py), &env, "-"),
            resource_of(None, &env, "-"),
        );
        assert_eq!(p["resource"]["host.gpu.count"], want_py, "Python, {env:?}");
        assert_eq!(r["resource"]["host.gpu.count"], want_rust, "Lens, {env:?}");
    }
    let _ = std::fs::remove_dir_all(&bin);
    assert_eq!(
        py_cell(&wire, "host.gpu.count source"),
        "CUDA_VISIBLE_DEVICES, else nvidia-smi; omitted when neither answers; an empty CUDA_VISIBLE_DEVICES gives 0"
    );
}

/// PARITY.md's "Error messages": where the Python library fails on each
/// sample, with which message, and that Lens fails reading the
/// configuration, with the Rust column's message.
#[test]
fn error_messages_are_python_s() {
    let Some(py) = python() else { return };
    let rows = parity_rows("Error messages");
    let probe = format!("{ROOT}/tests/python/parity_probe.py");
    let mut spec_check = None;
    for (sample, (pcell, rcell)) in &rows {
        let (var, value) = sample.split_once('=').unwrap();
        let mut env = vec![("NEMO_LENS_ENABLED", "1")];
        env.retain(|(k, _)| *k != var);
        env.push((var, value));
        // rank 0 of 1 exports; rank 0 of 2 does not (the last rank does)
        let at = |world: &str| {
            let mut cmd = clean_command(py);
            cmd.args([probe.as_str(), "errors", "0", world]);
            run(cmd, &env, &format!("python errors {sample}"))
        };
        let (exporting, other) = (at("1"), at("2"));
        let stage = |v: &Value| v["stage"].as_str().unwrap().to_owned();
        let ranks = match (stage(&exporting).as_str(), stage(&other).as_str()) {
            (a, b) if a == b => "every rank",
            (_, "none") => "the exporting rank only",
            other => panic!("{sample}: {other:?}"),
        };
        let when = match (stage(&exporting).as_str(), exporting["providers"].as_bool()) {
            ("from_env", _) => "reading the configuration",
            ("setup_telemetry", Some(true)) => {
                "in setup_telemetry, after its providers are installed"
            }
            ("setup_telemetry", Some(false)) => {
                "in setup_telemetry, before any provider is installed"
            }
            other => panic!("{sample}: {other:?}"),
        };
        let want = format!(
            "{ranks}, {when}: {}: {}",
            exporting["type"].as_str().unwrap(),
            exporting["error"].as_str().unwrap()
        );
        assert_eq!(pcell, &want, "Python column of `{sample}`");
        if var == "NEMO_LENS_SPAN_GROUPS" {
            spec_check = Some(format!("{ranks}, {when}"));
        }
        // Lens: every rank, reading the configuration (the probe links
        // every family, so more group names are valid than the table's)
        let (ok, err) = status(Path::new(PROBE), &["config"], &env);
        let head = rcell.split("; valid names are").next().unwrap();
        assert!(
            !ok && err.replace('`', "").contains(head),
            "{sample}: {err}"
        );
    }
    let wire = parity_rows("Wire formats and behaviour");
    assert_eq!(
        Some(py_cell(&wire, "span-group spec check").to_owned()),
        spec_check
    );
}

/// PARITY.md's propagation and baggage rows, from a rank that does not
/// export in both languages.
#[test]
fn propagation_and_baggage_are_python_s() {
    let Some(py) = python() else { return };
    let wire = parity_rows("Wire formats and behaviour");
    let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let env = |baggage: &str| -> Vec<(String, String)> {
        [
            ("NEMO_LENS_ENABLED", "1"),
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("NEMO_LENS_QUIET", "1"),
            ("TRACEPARENT", parent),
            ("TRACESTATE", "a=1"),
            ("BAGGAGE", baggage),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .to_vec()
    };
    let both_of = |e: &[(String, String)]| {
        let e: Vec<(&str, &str)> = e.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        both(py, &["propagate"], &e)
    };
    let (p, r) = both_of(&env("k1= a+b%2Bc%20 ,k2=x,kp=v;p=1"));
    // a rank that does not export forwards the context it was handed
    for v in [&p, &r] {
        assert_eq!(v["exporting"], json!(false));
        assert_eq!(v["carrier"]["traceparent"], json!(parent));
        assert_eq!(v["carrier"]["tracestate"], json!("a=1"));
    }
    assert_eq!(
        py_cell(&wire, "propagator on a non-exporting rank"),
        "W3C TraceContext and Baggage"
    );
    assert_eq!(
        py_cell(&wire, "trace context"),
        "W3C traceparent and tracestate"
    );
    // decoding: `+` a space, then trimmed; properties kept in the value
    // (Python) or as metadata (Lens)
    assert_eq!(
        p["entries"],
        json!({"k1": "a b+c", "k2": "x", "kp": "v;p=1"})
    );
    assert_eq!(r["entries"], json!({"k1": "a b+c", "k2": "x", "kp": "v"}));
    assert_eq!(
        py_cell(&wire, "baggage value decoding"),
        "unquote_plus, then trimmed"
    );
    assert_eq!(
        py_cell(&wire, "baggage properties (k=v;p=1)"),
        "kept inside the value"
    );
    // encoding a value set in code
    assert_eq!(
        (&p["encoded"], &r["encoded"]),
        (&json!("k=a+b%2Bc"), &json!("k=a%20b%2Bc"))
    );
    assert_eq!(
        py_cell(&wire, "baggage value encoding"),
        "quote_plus: a space as +, + as %2B"
    );
    // keys: any text in Python, W3C tokens in Lens
    assert_eq!(
        (&p["odd_key"], &r["odd_key"]),
        (&json!("a+key%2F%C3%A9=v"), &json!(""))
    );
    assert_eq!(py_cell(&wire, "baggage keys"), "any text, percent-encoded");
    // entries per context, and per header
    assert_eq!(
        (&p["many_set"], &p["many_sent"], &r["many_set"]),
        (&json!(200), &json!(180), &json!(64))
    );
    assert_eq!(
        py_cell(&wire, "baggage entries per context"),
        "no limit (a header carries 180)"
    );
    // the header limits, read
    let m190: Vec<String> = (0..190).map(|i| format!("k{i:03}=v")).collect();
    let big = format!("big={},k=v", "x".repeat(4093));
    let over = format!("a={},b={}", "x".repeat(4094), "x".repeat(4094));
    let (p, r) = both_of(&env(&m190.join(",")));
    assert_eq!(
        (obj(&p["entries"]).len(), obj(&r["entries"]).len()),
        (180, 64)
    );
    let (p, r) = both_of(&env(&big));
    assert_eq!(
        (&p["entries"], &r["entries"]),
        (&json!({"k": "v"}), &json!({"k": "v"}))
    );
    let (p, r) = both_of(&env(&over));
    assert_eq!((&p["entries"], &r["entries"]), (&json!({}), &json!({})));
    assert_eq!(
        py_cell(&wire, "baggage limits"),
        "180 members, 4096 bytes a member, 8192 bytes a header"
    );
    // member order: as set (Python)
    let (p, _) = both_of(&env("z=1,a=2,m=3"));
    assert_eq!(p["carrier"]["baggage"], json!("z=1,a=2,m=3"));
    assert_eq!(
        py_cell(&wire, "baggage member order"),
        "the order the entries were set"
    );
    // the NCCL byte carrier: the same JSON bytes; Python reads Lens's JSON
    // form, not its compact one, and garbage gives its caller's context
    let (p, r) = both_of(&env("k2=x"));
    assert_eq!(p["nccl"], r["nccl"], "byte carrier sent to Python");
    assert_eq!(p["garbage_gives_current"], json!(true));
    let hex: String = r["nccl"]
        .as_str()
        .unwrap()
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect();
    for (bytes, read) in [
        (hex.as_str(), json!(parent)),
        (r["compact"].as_str().unwrap(), Value::Null),
    ] {
        let mut e = env("k2=x");
        e.push(("LENS_BYTES".into(), bytes.into()));
        let e: Vec<(&str, &str)> = e.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let p = one(Some(py), &["propagate"], &e);
        assert_eq!(p["read"]["traceparent"], read);
    }
    assert_eq!(
        py_cell(&wire, "byte carrier read (NCCL)"),
        "the W3C carrier map as UTF-8 JSON; anything else gives the caller's current context"
    );
    let sent = "the carrier map as JSON (json.dumps), UTF-8";
    assert_eq!(py_cell(&wire, "byte carrier sent to Python"), sent);
    assert_eq!(py_cell(&wire, "byte carrier between Rust ranks"), sent);
}

/// The Python column of every variable: a value where the library (or
/// the OpenTelemetry SDK under it) looks the variable up while a job sets
/// up, records and shuts down, `(not read)` where it does not; and the
/// scopes of its tracer, meter and bridged log records.
#[test]
fn variables_the_library_reads() {
    let Some(py) = python() else { return };
    let env = with_common(&[
        ("NEMO_LENS_EXPORTER", "console"),
        ("NEMO_LENS_LOGS_ENABLED", "1"),
    ]);
    let mut cmd = clean_command(py);
    cmd.args([&format!("{ROOT}/tests/python/parity_probe.py"), "reads"]);
    let out = run(cmd, &env, "python reads");
    let reads: BTreeSet<&str> = out["reads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(reads.contains("NEMO_LENS_ENABLED"), "{reads:?}");
    for (var, (p, _)) in parity_rows("Environment variables") {
        assert_eq!(
            p == "(not read)",
            !reads.contains(var.as_str()),
            "`{var}`: Python column {p:?}, read: {}",
            reads.contains(var.as_str())
        );
    }
    // OTEL_SDK_DISABLED: the SDK under Python honours it as Lens does
    let (p, r) = both(py, &["job"], &with_common(&[("OTEL_SDK_DISABLED", "true")]));
    for v in [&p, &r] {
        assert_eq!(
            (&v["spans"], &v["metrics"]),
            (&json!([]), &json!([])),
            "{v}"
        );
    }
    // scopes
    let scope = parity_rows("Instrumentation scope");
    assert_eq!(
        (&out["tracer_scope"], &out["meter_scope"]),
        (&json!("nemo.lens"), &json!("nemo.lens"))
    );
    assert_eq!(py_cell(&scope, "spans and metrics"), "nemo.lens");
    assert_eq!(
        py_cell(&scope, "tracer and meter of that scope"),
        "get_tracer(), get_meter()"
    );
    assert_eq!(out["log_scope"], json!("probe.logger"));
    assert_eq!(
        py_cell(&scope, "bridged log records"),
        "the Python logger's name"
    );
}

/// What the library has and has not: its span groups and presets, the
/// span-group families (none in 0.2.0), the attribute keys it names or
/// writes, and the metrics its instrument sets create.
#[test]
fn groups_keys_and_metrics_the_library_has() {
    let Some(py) = python() else { return };
    let mut cmd = clean_command(py);
    cmd.args([&format!("{ROOT}/tests/python/parity_probe.py"), "catalog"]);
    let cat = run(cmd, &[], "python catalog");
    assert_eq!(cat["unimported"], json!([]));
    assert_eq!(
        cat["subclasses"],
        json!([]),
        "SpanGroup families in the library"
    );
    let sorted = |cell: &str| -> Value {
        let mut v: Vec<&str> = cell.split(", ").collect();
        v.sort_unstable();
        json!(v)
    };
    for (key, (p, _)) in parity_rows("Span-group presets") {
        match key.strip_prefix("base ") {
            Some(preset) => assert_eq!(sorted(&p), cat["presets"][preset], "{key}"),
            None => assert!(p.starts_with("—"), "{key}: 0.2.0 has no such family"),
        }
    }
    for (key, (p, _)) in parity_rows("Span groups") {
        if key == "base" {
            assert_eq!(sorted(&p), cat["groups"]);
        } else {
            assert!(p.starts_with("—"), "{key}: 0.2.0 has no such family");
        }
    }
    // keys: its semconv names, and what a job and a detected resource write
    let mut keys: BTreeSet<String> = cat["semconv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let (job, _) = both(py, &["job"], &with_common(&[]));
    for s in job["spans"].as_array().unwrap() {
        keys.extend(obj(&s["attributes"]).keys().cloned());
        for e in s["events"].as_array().unwrap() {
            keys.extend(obj(&e["attributes"]).keys().cloned());
        }
    }
    keys.remove("iteration"); // the probe's own attribute
    let all = [
        ("SLURM_JOB_ID", "1"),
        ("SLURM_JOB_NAME", "n"),
        ("SLURM_NODELIST", "a"),
        ("SLURM_NNODES", "1"),
        ("SLURM_NTASKS", "1"),
        ("SLURM_PARTITION", "p"),
        ("SLURM_CLUSTER_NAME", "c"),
        ("KUBERNETES_SERVICE_HOST", "h"),
        ("K8S_NAMESPACE", "n"),
        ("K8S_POD_NAME", "p"),
        ("K8S_POD_UID", "u"),
        ("K8S_NODE_NAME", "n"),
        ("K8S_CONTAINER_NAME", "c"),
        ("K8S_JOB_NAME", "j"),
        ("DEPLOYMENT_ENV", "d"),
        ("NEMO_LENS_USER_ID", "u"),
        ("WANDB_ENTITY", "e"),
        ("WANDB_PROJECT", "p"),
    ];
    let written = resource_of(Some(py), &all, "-");
    keys.extend(obj(&written["resource"]).keys().cloned());
    let rows = parity_rows("Attribute keys");
    for (key, (p, _)) in &rows {
        if p == key {
            assert!(
                keys.contains(key),
                "`{key}`: the library neither names nor writes it"
            );
        } else {
            assert!(
                p.starts_with("—"),
                "`{key}`: Python column {p:?} is not checked"
            );
            assert!(!keys.contains(key), "`{key}`: the library has it");
        }
    }
    let written_keys: BTreeSet<&String> = keys
        .iter()
        .filter(|k| !cat["semconv"].as_array().unwrap().contains(&json!(k)))
        .collect();
    for k in written_keys {
        assert!(
            rows.contains_key(k),
            "PARITY.md has no row for `{k}`, which Python writes"
        );
    }
    // metrics: its three instrument sets, all of whose instruments the job
    // records
    assert_eq!(
        cat["record_functions"],
        json!([
            "nemo.lens.instruments.gym.record_gym_metrics",
            "nemo.lens.instruments.inference.record_inference_metrics",
            "nemo.lens.instruments.rl.record_rl_metrics"
        ])
    );
    let created: BTreeSet<&str> = job["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    for (name, (p, _)) in parity_rows("Metrics") {
        assert_eq!(
            p.starts_with("—"),
            !created.contains(name.as_str()),
            "`{name}`: {p}"
        );
    }
}

/// PARITY.md's row on a child forked while telemetry is live, on the
/// Python side (Lens's is the `faults` test's).
#[test]
fn a_forked_python_child_keeps_recording() {
    let Some(py) = python() else { return };
    let mut cmd = clean_command(py);
    cmd.args([&format!("{ROOT}/tests/python/parity_probe.py"), "fork"]);
    let out = run(cmd, &with_common(&[]), "python fork");
    // the child's own span only: the parent's queue and open span dropped;
    // the parent's resource (its pid)
    assert_eq!(out["child"]["names"], json!(["child"]), "{out}");
    assert_eq!(out["child"]["resource_pids"], json!([out["pid"]]));
    assert_ne!(out["child"]["pid"], out["pid"]);
    assert_eq!(out["parent"], json!(["parent.ended", "parent.open"]));
    let wire = parity_rows("Wire formats and behaviour");
    assert_eq!(
        py_cell(&wire, "a child forked while telemetry is live"),
        "keeps recording: the SDK's batch processor restarts its thread in the child and drops the parent's queue; 0.2.0's span closer forgets the parent's open spans; the resource is the parent's (its process.pid)"
    );
}
