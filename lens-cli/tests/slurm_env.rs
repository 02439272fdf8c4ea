//! `lens slurm-env`: the printed line, `eval`ed by bash, extends
//! `OTEL_RESOURCE_ATTRIBUTES` with the SLURM attributes, percent-encoded,
//! keeping what was there.

mod support;

use std::collections::BTreeMap;
use std::process::Command;

use support::output_within;

/// A tricky value: commas, spaces, `=`, both quotes, `%`, `;`, a backslash
/// and non-ASCII.
const TRICKY: &str = "pre train, v2=final; \"it's\" 100% \\ größe 🚀";

/// The fake job: every variable `slurm-env` reads.
const JOB: &[(&str, &str)] = &[
    ("SLURM_JOB_ID", "4242"),
    ("SLURM_JOB_NAME", TRICKY),
    ("SLURM_JOB_NODELIST", "gpu[001-004],login'1"),
    ("SLURM_JOB_NUM_NODES", "4"),
    ("SLURM_NTASKS", "32"),
    ("SLURM_JOB_PARTITION", "batch"),
    ("SLURM_CLUSTER_NAME", "eos"),
    ("SLURM_PROCID", "17"),
    ("SLURM_LOCALID", "1"),
    ("SLURM_NODEID", "2"),
    ("SLURMD_NODENAME", "gpu003"),
    ("SLURM_STEP_ID", "0"),
];

/// Runs `eval "$(lens slurm-env --stage STAGE)"` in bash with `env` (and
/// nothing else of the test's environment) and returns the resulting
/// `OTEL_RESOURCE_ATTRIBUTES` and stderr.
fn eval(stage: &str, env: &[(&str, &str)]) -> (String, String) {
    let script = format!(
        "eval \"$(\"$LENS\" slurm-env --stage {stage})\" || exit 9; \
         printf '%s' \"$OTEL_RESOURCE_ATTRIBUTES\""
    );
    let out = output_within(
        Command::new("bash")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LENS", env!("CARGO_BIN_EXE_lens"))
            .envs(env.iter().copied())
            .args(["-c", &script]),
    );
    assert!(
        out.status.success(),
        "{}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).expect("the value is ASCII"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Percent-decoding, written out here so the test does not trust the
/// encoder's crate.
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).expect("ASCII");
            out.push(u8::from_str_radix(hex, 16).expect("hex escape"));
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).expect("UTF-8")
}

/// `k=v,…` as a map of decoded keys and values; every member must have
/// exactly one `=` and nothing that needs encoding.
fn members(value: &str) -> Vec<(String, String)> {
    value
        .split(',')
        .map(|m| {
            assert_eq!(m.matches('=').count(), 1, "member {m:?}");
            assert!(
                m.bytes()
                    .all(|c| c.is_ascii_graphic() && !b"\",;\\".contains(&c)),
                "member {m:?} has a byte that must be encoded"
            );
            let (k, v) = m.split_once('=').unwrap_or_default();
            (decode(k), decode(v))
        })
        .collect()
}

#[test]
fn task_stage_adds_job_and_task_attributes_encoded_and_keeps_existing_ones() {
    let mut env = JOB.to_vec();
    env.push((
        "OTEL_RESOURCE_ATTRIBUTES",
        "team=llm,deployment.environment=prod",
    ));
    let (value, _) = eval("task", &env);
    let got = members(&value);
    assert_eq!(
        got[..2],
        [
            ("team".to_owned(), "llm".to_owned()),
            ("deployment.environment".to_owned(), "prod".to_owned())
        ],
        "existing attributes first, unchanged: {value}"
    );
    let got: BTreeMap<String, String> = got.into_iter().collect();
    let expected: BTreeMap<String, String> = [
        ("team", "llm"),
        ("deployment.environment", "prod"),
        ("slurm.job.id", "4242"),
        ("slurm.job.name", TRICKY),
        ("slurm.nodelist", "gpu[001-004],login'1"),
        ("slurm.nnodes", "4"),
        ("slurm.ntasks", "32"),
        ("slurm.partition", "batch"),
        ("slurm.cluster.name", "eos"),
        ("slurm.procid", "17"),
        ("slurm.localid", "1"),
        ("slurm.nodeid", "2"),
        ("slurm.node.name", "gpu003"),
        ("slurm.step.id", "0"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(got, expected);
}

#[test]
fn sbatch_stage_adds_job_attributes_only_and_twice_adds_nothing() {
    let (value, _) = eval("sbatch", JOB);
    let keys: Vec<String> = members(&value).into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        [
            "slurm.job.id",
            "slurm.job.name",
            "slurm.nodelist",
            "slurm.nnodes",
            "slurm.ntasks",
            "slurm.partition",
            "slurm.cluster.name"
        ]
    );
    // then the task stage on top: only the task attributes are added
    let mut env = JOB.to_vec();
    env.push(("OTEL_RESOURCE_ATTRIBUTES", &value));
    let (task, _) = eval("task", &env);
    assert_eq!(
        task,
        format!("{value},slurm.procid=17,slurm.localid=1,slurm.nodeid=2,slurm.node.name=gpu003,slurm.step.id=0")
    );
}

#[test]
fn missing_variables_are_skipped() {
    let (value, _) = eval("task", &[("SLURM_JOB_ID", "7"), ("SLURM_PROCID", " ")]);
    assert_eq!(value, "slurm.job.id=7");
}

#[test]
fn without_slurm_the_value_is_unchanged_and_stderr_says_so() {
    let existing = "a=1,b=it's%20here";
    let (value, err) = eval("task", &[("OTEL_RESOURCE_ATTRIBUTES", existing)]);
    assert_eq!(value, existing);
    assert!(err.contains("not in a SLURM job"), "{err}");
    let (value, _) = eval("sbatch", &[]);
    assert_eq!(value, "");
}
