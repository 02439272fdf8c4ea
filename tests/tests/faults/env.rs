//! A hostile environment: every variable lens reads (its own `NEMO_LENS_*`,
//! the standard `OTEL_*` ones, including those the OpenTelemetry SDK and
//! OTLP exporter read for it, and the launcher's SLURM / Kubernetes / CUDA /
//! rank / trace-context variables), given in turn garbage, non-UTF-8 bytes,
//! a 1 MiB value, broken percent escapes, a relative path into missing
//! folders, an empty string and out-of-range numbers.
//!
//! For each, `lens-probe` runs as a child process (mode `spans`; `logs` for
//! the log variables) and must finish in time without a panic or a signal,
//! and either succeed (the value ignored, perhaps with a warning) or fail
//! with an error that names the variable. A run whose only error is that
//! the exports failed at shutdown passes too: the value was accepted, and
//! the OTLP cases export to a closed port on purpose.
//!
//! `LENS_FAULTS_VARS=A,B` limits the run to those variables.

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long one probe run may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Probe runs at a time.
const WORKERS: usize = 4;
/// A closed local port: OTLP exports fail at once.
const DEAD_ENDPOINT: &str = "http://127.0.0.1:1";
/// A valid launcher traceparent, for the variables read next to it.
const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/// What else a variable needs set to be read at all.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Context {
    /// The file exporter (the default of every case).
    File,
    /// The file exporter at its default path (under the working folder,
    /// named after the run id).
    DefaultFilePath,
    /// The OTLP exporter for every signal, towards [`DEAD_ENDPOINT`].
    Otlp,
    /// Logs on (mode `logs`, so records go through the batch processor).
    Logs,
    /// The rank-aware sampler on.
    Sampler,
    /// The rank-aware sampler on with a ratio sampler.
    SamplerRatio,
    /// `single_rank` strategy.
    SingleRank,
    /// `sampled` strategy.
    SampledRanks,
    /// `first_rank_per_node` strategy (reads the local rank).
    PerNode,
    /// GPU metrics on.
    Gpu,
    /// Inside Kubernetes.
    K8s,
    /// A launcher trace context.
    Traced,
}

impl Context {
    fn env(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Context::File | Context::DefaultFilePath => &[],
            Context::Otlp => &[
                ("NEMO_LENS_EXPORTER", "otlp"),
                ("NEMO_LENS_LOGS_ENABLED", "1"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", DEAD_ENDPOINT),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "2000"),
            ],
            Context::Logs => &[("NEMO_LENS_LOGS_ENABLED", "1")],
            Context::Sampler => &[("NEMO_LENS_SAMPLER_ENABLED", "1")],
            Context::SamplerRatio => &[
                ("NEMO_LENS_SAMPLER_ENABLED", "1"),
                ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ],
            Context::SingleRank => &[("NEMO_LENS_EXPORT_STRATEGY", "single_rank")],
            Context::SampledRanks => &[("NEMO_LENS_EXPORT_STRATEGY", "sampled")],
            Context::PerNode => &[("NEMO_LENS_EXPORT_STRATEGY", "first_rank_per_node")],
            Context::Gpu => &[("NEMO_LENS_GPU_METRICS", "1")],
            Context::K8s => &[("KUBERNETES_SERVICE_HOST", "10.0.0.1")],
            Context::Traced => &[("TRACEPARENT", TRACEPARENT)],
        }
    }

    fn mode(self) -> &'static str {
        match self {
            Context::Logs => "logs",
            _ => "spans",
        }
    }
}

/// Every variable lens reads, with the context it is read in.
fn variables() -> Vec<(String, Context)> {
    use Context::*;
    let mut v: Vec<(String, Context)> = Vec::new();
    let mut add = |names: &[&str], cx: Context| {
        v.extend(names.iter().map(|n| ((*n).to_owned(), cx)));
    };
    // lens's configuration (config.rs)
    add(
        &[
            "NEMO_LENS_ENABLED",
            "NEMO_LENS_EXPORT_STRATEGY",
            "NEMO_LENS_SAMPLER_ENABLED",
            "NEMO_LENS_TRACES_ENABLED",
            "NEMO_LENS_METRICS_ENABLED",
            "NEMO_LENS_LOGS_ENABLED",
            "NEMO_LENS_SPAN_GROUPS",
            "NEMO_LENS_EXPORTER",
            "NEMO_LENS_RUN_ID",
            "NEMO_LENS_USER_ID",
            "NEMO_LENS_FILE_PATH",
            "NEMO_LENS_FLUSH_ON_SIGNAL",
            "NEMO_LENS_SPAN_PATH",
            "NEMO_LENS_OTEL_CONTEXT",
            "NEMO_LENS_GPU_METRICS",
            "WANDB_ENTITY",
            "WANDB_PROJECT",
            "OTEL_SERVICE_NAME",
            "OTEL_RESOURCE_ATTRIBUTES",
        ],
        File,
    );
    // the run id names the default output file
    add(&["NEMO_LENS_RUN_ID", "SLURM_JOB_ID"], DefaultFilePath);
    add(&["NEMO_LENS_EXPORT_RANK"], SingleRank);
    add(&["NEMO_LENS_EXPORT_SAMPLE_RATE"], SampledRanks);
    // sampling (sampler.rs, and the SDK's default config)
    add(&["OTEL_TRACES_SAMPLER"], Sampler);
    add(&["OTEL_TRACES_SAMPLER_ARG"], SamplerRatio);
    // batching, limits, intervals (setup.rs and the SDK)
    add(
        &[
            "OTEL_BSP_MAX_QUEUE_SIZE",
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
            "OTEL_BSP_SCHEDULE_DELAY",
            "OTEL_BSP_EXPORT_TIMEOUT",
            "OTEL_BSP_MAX_CONCURRENT_EXPORTS",
            "OTEL_METRIC_EXPORT_INTERVAL",
            "OTEL_METRIC_EXPORT_TIMEOUT",
            "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT",
            "OTEL_SPAN_EVENT_COUNT_LIMIT",
            "OTEL_SPAN_LINK_COUNT_LIMIT",
        ],
        File,
    );
    add(
        &[
            "OTEL_BLRP_MAX_QUEUE_SIZE",
            "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE",
            "OTEL_BLRP_SCHEDULE_DELAY",
            "OTEL_BLRP_EXPORT_TIMEOUT",
        ],
        Logs,
    );
    // OTLP exporters (export/mod.rs, setup.rs and opentelemetry-otlp)
    for signal in ["", "TRACES_", "METRICS_", "LOGS_"] {
        for what in [
            "PROTOCOL",
            "TIMEOUT",
            "COMPRESSION",
            "ENDPOINT",
            "HEADERS",
            "INSECURE",
        ] {
            v.push((format!("OTEL_EXPORTER_OTLP_{signal}{what}"), Otlp));
        }
    }
    v.push((
        "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE".to_owned(),
        Otlp,
    ));
    let mut add = |names: &[&str], cx: Context| {
        v.extend(names.iter().map(|n| ((*n).to_owned(), cx)));
    };
    // launchers: trace context (propagation.rs)
    add(&["TRACEPARENT"], File);
    add(&["TRACESTATE", "BAGGAGE"], Traced);
    // launchers: SLURM, deployment (resource.rs)
    add(
        &[
            "SLURM_JOB_ID",
            "SLURM_JOBID",
            "SLURM_JOB_NAME",
            "SLURM_JOB_NODELIST",
            "SLURM_NODELIST",
            "SLURM_JOB_PARTITION",
            "SLURM_CLUSTER_NAME",
            "SLURM_JOB_NUM_NODES",
            "SLURM_NNODES",
            "SLURM_NTASKS",
            "DEPLOYMENT_ENV",
            "ENVIRONMENT",
            "KUBERNETES_SERVICE_HOST",
        ],
        File,
    );
    // launchers: the rank within the node (strategy.rs, resource.rs)
    add(
        &[
            "LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "SLURM_LOCALID",
            "MPI_LOCALRANKID",
        ],
        PerNode,
    );
    // GPUs (resource.rs, gpu.rs)
    add(&["CUDA_VISIBLE_DEVICES"], Gpu);
    // Kubernetes (resource.rs)
    add(
        &[
            "POD_NAMESPACE",
            "K8S_NAMESPACE",
            "KUBERNETES_NAMESPACE",
            "POD_NAME",
            "K8S_POD_NAME",
            "HOSTNAME",
            "POD_UID",
            "K8S_POD_UID",
            "NODE_NAME",
            "K8S_NODE_NAME",
            "CONTAINER_NAME",
            "K8S_CONTAINER_NAME",
            "JOB_NAME",
            "K8S_JOB_NAME",
        ],
        K8s,
    );
    v
}

/// The hostile values: (kind, value).
fn values() -> Vec<(&'static str, OsString)> {
    vec![
        ("garbage", "\u{1}%%zz=,,==".into()),
        ("non-utf8", OsString::from_vec(vec![0xff, 0xfe, b'a'])),
        ("1MiB", huge()),
        ("pct-1€", "%1€".into()),
        ("pct-lone", "%".into()),
        ("pct-zz", "%zz".into()),
        ("pct-trunc", "%e2%82".into()),
        ("path", "../no/such/dir".into()),
        ("empty", "".into()),
        ("-1", "-1".into()),
        ("2^64", "18446744073709551616".into()),
        ("u64::MAX", "18446744073709551615".into()),
        ("1e12", "1000000000000".into()),
        ("0", "0".into()),
    ]
}

/// 1 MiB of distinct `kN=9` members (a valid `OTEL_RESOURCE_ATTRIBUTES`
/// of ~100k attributes): too long for any name, number or path.
fn huge() -> OsString {
    const SIZE: usize = 1 << 20;
    let mut s = String::with_capacity(SIZE);
    for i in 0.. {
        let member = format!("k{i}=9");
        if s.len() + 1 + member.len() > SIZE {
            break;
        }
        if i > 0 {
            s.push(',');
        }
        s.push_str(&member);
    }
    // the last value takes up the rest
    s.extend(std::iter::repeat_n('9', SIZE - s.len()));
    s.into()
}

/// How one run ended.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// Exit 0, the variable not mentioned.
    Ignored,
    /// Exit 0 with a message naming the variable.
    Warned,
    /// Set up and ran, but the exports failed at shutdown (a closed OTLP
    /// port or the default collector absent).
    ExportFailed,
    /// A non-zero exit with an error naming the variable.
    Rejected,
    /// A panic (exit 101 or "panicked" on stderr).
    Panicked,
    /// Killed by a signal.
    Signal(i32),
    /// Still running after [`TIMEOUT`].
    TimedOut,
    /// A non-zero exit whose stderr does not name the variable.
    Unnamed(i32),
    /// The probe could not be started.
    NotStarted(String),
}

impl Outcome {
    fn passed(&self) -> bool {
        matches!(
            self,
            Outcome::Ignored | Outcome::Warned | Outcome::ExportFailed | Outcome::Rejected
        )
    }

    fn code(&self) -> String {
        match self {
            Outcome::Ignored => "ok".into(),
            Outcome::Warned => "warn".into(),
            Outcome::ExportFailed => "exp".into(),
            Outcome::Rejected => "err".into(),
            Outcome::Panicked => "PANIC".into(),
            Outcome::Signal(s) => format!("SIG{s}"),
            Outcome::TimedOut => "TIMEOUT".into(),
            Outcome::Unnamed(c) => format!("UNNAMED{c}"),
            Outcome::NotStarted(_) => "NOSTART".into(),
        }
    }
}

struct Case {
    var: String,
    context: Context,
    kind: &'static str,
    value: OsString,
}

struct Report {
    outcome: Outcome,
    stderr: String,
}

/// The largest `NAME=VALUE` `execve` passes on Linux (`MAX_ARG_STRLEN`,
/// with the terminating NUL); larger values go through `LENS_PROBE_SET_ENV`.
const MAX_ENV_STRING: usize = 128 * 1024 - 1;

/// Runs `probe` for `case` in `dir` (its working directory).
fn run(probe: &Path, case: &Case, dir: &Path) -> Report {
    let stderr_path = dir.join("stderr");
    let mut cmd = tests::lens_command(probe);
    cmd.arg(case.context.mode())
        .current_dir(dir)
        .env("RUST_BACKTRACE", "1")
        .env("NEMO_LENS_EXPORTER", "file")
        .env("NEMO_LENS_FILE_PATH", dir.join("out-{rank}.otlp.jsonl"))
        .envs(case.context.env().iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if case.context == Context::DefaultFilePath {
        cmd.env_remove("NEMO_LENS_FILE_PATH");
    }
    if case.var.len() + 1 + case.value.len() > MAX_ENV_STRING {
        let file = dir.join("env");
        let mut bytes = Vec::from(case.var.as_bytes());
        bytes.push(b'=');
        bytes.extend_from_slice(case.value.as_bytes());
        if let Err(e) = std::fs::write(&file, bytes) {
            return not_started(format!("cannot write {file:?}: {e}"));
        }
        cmd.env_remove(&case.var).env("LENS_PROBE_SET_ENV", file);
    } else {
        cmd.env(&case.var, &case.value);
    }
    let stderr = match std::fs::File::create(&stderr_path) {
        Ok(f) => f,
        Err(e) => return not_started(format!("cannot create {stderr_path:?}: {e}")),
    };
    cmd.stderr(stderr);
    // ETXTBSY: a process that another test forked while the probe's copy
    // was open for writing still holds that descriptor until it execs
    // (Linux's fork/exec race); it goes away within moments
    let mut tries = 0;
    let mut child = loop {
        match cmd.spawn() {
            Ok(c) => break c,
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return not_started(format!("cannot start {probe:?}: {e}")),
        }
    };
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() < TIMEOUT => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let raw = std::fs::read(&stderr_path).unwrap_or_default();
    let stderr = String::from_utf8_lossy(&raw).into_owned();
    let names_var = stderr.contains(case.var.as_str());
    // lost telemetry is a warning line of the shutdown, never an exit code
    let export_failed = stderr
        .lines()
        .any(|l| l.starts_with("lens: warning: telemetry was lost"));
    let outcome = match status {
        None => Outcome::TimedOut,
        Some(s) if s.code() == Some(101) || stderr.contains("panicked") => Outcome::Panicked,
        Some(s) => match (s.code(), s.signal()) {
            (Some(0), _) if names_var => Outcome::Warned,
            (Some(0), _) if export_failed => Outcome::ExportFailed,
            (Some(0), _) => Outcome::Ignored,
            (Some(_), _) if names_var => Outcome::Rejected,
            (Some(c), _) => Outcome::Unnamed(c),
            (None, Some(sig)) => Outcome::Signal(sig),
            (None, None) => Outcome::Signal(0),
        },
    };
    Report { outcome, stderr }
}

fn not_started(why: String) -> Report {
    Report {
        outcome: Outcome::NotStarted(why),
        stderr: String::new(),
    }
}

/// At most `max` characters of `s` from its start and its end.
fn excerpt(s: &str, max: usize) -> String {
    let s = s.trim();
    let n = s.chars().count();
    if n <= max {
        return s.to_owned();
    }
    let head: String = s.chars().take(max / 2).collect();
    let tail: String = s.chars().skip(n - max / 2).collect();
    format!("{head} [..] {tail}")
}

/// The outcome table: one row per variable, one column per value kind.
fn table(cases: &[Case], reports: &[Report], kinds: &[&str]) -> String {
    let label = |c: &Case| match c.context {
        Context::File => c.var.clone(),
        cx => format!("{} [{cx:?}]", c.var),
    };
    let width = cases.iter().map(|c| label(c).len()).max().unwrap_or(0);
    let mut out = format!("{:width$}", "variable");
    for k in kinds {
        let _ = write!(out, " {k:>9}");
    }
    out.push('\n');
    for (row, chunk) in cases.chunks(kinds.len()).enumerate() {
        let _ = write!(out, "{:width$}", label(&chunk[0]));
        for i in 0..chunk.len() {
            let code = reports[row * kinds.len() + i].outcome.code();
            let _ = write!(out, " {code:>9}");
        }
        out.push('\n');
    }
    out
}

#[test]
fn hostile_environment_never_panics_or_hangs() {
    let values = values();
    let kinds: Vec<&str> = values.iter().map(|(k, _)| *k).collect();
    let only = std::env::var("LENS_FAULTS_VARS").ok();
    let only: Option<Vec<&str>> = only
        .as_deref()
        .map(|v| v.split(',').map(str::trim).collect());
    let cases: Vec<Case> = variables()
        .into_iter()
        .filter(|(var, _)| only.as_ref().is_none_or(|o| o.contains(&var.as_str())))
        .flat_map(|(var, context)| {
            values.iter().map(move |(kind, value)| Case {
                var: var.clone(),
                context,
                kind,
                value: value.clone(),
            })
        })
        .collect();
    let base: PathBuf =
        std::env::temp_dir().join(format!("lens-faults-env-{}", std::process::id()));
    // a private copy: the shared target folder may get another build of
    // the probe while this test runs
    std::fs::create_dir_all(&base).expect("temp folder");
    let probe = base.join("lens-probe");
    std::fs::copy(env!("CARGO_BIN_EXE_lens-probe"), &probe).expect("copy of lens-probe");
    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let reports: Mutex<Vec<Option<Report>>> = Mutex::new((0..cases.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(case) = cases.get(i) else { break };
                let dir = base.join(i.to_string());
                let report = match std::fs::create_dir_all(&dir) {
                    Ok(()) => run(&probe, case, &dir),
                    Err(e) => not_started(format!("cannot create {dir:?}: {e}")),
                };
                let _ = std::fs::remove_dir_all(&dir);
                reports.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(report);
            });
        }
    });
    let _ = std::fs::remove_dir_all(&base);
    let reports: Vec<Report> = reports
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.unwrap_or_else(|| not_started("no report".into())))
        .collect();
    let failed: Vec<(&Case, &Report)> = cases
        .iter()
        .zip(&reports)
        .filter(|(_, r)| !r.outcome.passed())
        .collect();
    println!(
        "{} probe runs ({} variable rows x {} values) in {:.1?} with {WORKERS} workers; {} failed",
        cases.len(),
        cases.len() / kinds.len(),
        kinds.len(),
        started.elapsed(),
        failed.len()
    );
    if failed.is_empty() {
        return;
    }
    let mut msg = table(&cases, &reports, &kinds);
    msg.push_str("\nfailures (ok/warn/err pass: exit 0, or an error naming the variable):\n");
    for (case, report) in &failed {
        let value = excerpt(&format!("{:?}", OsStr::new(&case.value)), 40);
        let _ = writeln!(
            msg,
            "* {}={value} ({}, context {:?}): {:?}\n    {}",
            case.var,
            case.kind,
            case.context,
            report.outcome,
            excerpt(&report.stderr, 600).replace('\n', "\n    ")
        );
    }
    panic!(
        "{} of {} hostile values failed:\n{msg}",
        failed.len(),
        cases.len()
    );
}
