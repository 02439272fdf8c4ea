//! Rank, world size and run id from a launcher's environment, as torchrun
//! and SLURM set it, through `lens::setup_telemetry_from_env()` in a real
//! process (`mpirun` itself is in `tests/mpi.rs`).

use std::path::Path;
use std::time::Duration;
use tests::{clean_command, run_with_timeout};

const FAULT: &str = env!("CARGO_BIN_EXE_lens-fault");

/// Runs the `from-env` probe in `dir` with `vars`; returns the printed run
/// id and the telemetry files written.
fn run_in(dir: &Path, vars: &[(&str, &str)]) -> (String, Vec<String>) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let mut cmd = clean_command(FAULT);
    for k in [
        "RANK",
        "WORLD_SIZE",
        "TORCHELASTIC_RUN_ID",
        "OMPI_COMM_WORLD_RANK",
    ] {
        cmd.env_remove(k);
    }
    cmd.arg("from-env")
        .current_dir(dir)
        .env("NEMO_LENS_ENABLED", "1")
        .env("NEMO_LENS_EXPORT_STRATEGY", "all_ranks")
        .env("NEMO_LENS_EXPORTER", "file")
        .env("NEMO_LENS_METRICS_ENABLED", "0");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let f = run_with_timeout(&mut cmd, Duration::from_secs(30));
    assert!(!f.timed_out && f.status.success(), "{f:?}");
    let id = f
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("run_id="))
        .unwrap_or_else(|| panic!("no run id printed: {f:?}"))
        .to_owned();
    let mut files: Vec<String> = std::fs::read_dir(dir.join("lens-telemetry"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    (id, files)
}

#[test]
fn a_faked_torchrun_environment() {
    let dir = std::env::temp_dir().join(format!("lens-torchrun-{}", std::process::id()));
    let (id, files) = run_in(
        &dir,
        &[
            ("RANK", "3"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_RANK", "3"),
            ("TORCHELASTIC_RUN_ID", "c0ffee"),
        ],
    );
    assert_eq!(id, "c0ffee");
    assert_eq!(files, ["c0ffee-rank3.otlp.jsonl"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_faked_slurm_environment_and_the_override() {
    let dir = std::env::temp_dir().join(format!("lens-slurm-{}", std::process::id()));
    let slurm = [
        ("SLURM_JOB_ID", "4242"),
        ("SLURM_STEP_ID", "1"),
        ("SLURM_PROCID", "5"),
        ("SLURM_NTASKS", "16"),
        ("SLURM_LOCALID", "1"),
    ];
    let (id, files) = run_in(&dir, &slurm);
    // the job's id, as the Python library makes it (issue 43); the step is
    // the slurm.step.id attribute
    assert_eq!(id, "4242");
    assert_eq!(files, ["4242-rank5.otlp.jsonl"]);
    let text = std::fs::read_to_string(dir.join("lens-telemetry/4242-rank5.otlp.jsonl")).unwrap();
    assert!(
        text.contains(r#"{"key":"slurm.step.id","value":{"stringValue":"1"}}"#),
        "{text}"
    );
    // NEMO_LENS_RANK / NEMO_LENS_WORLD_SIZE / NEMO_LENS_RUN_ID always win
    let mut vars = slurm.to_vec();
    vars.extend([
        ("NEMO_LENS_RANK", "2"),
        ("NEMO_LENS_WORLD_SIZE", "4"),
        ("NEMO_LENS_RUN_ID", "mine"),
    ]);
    let (id, files) = run_in(&dir, &vars);
    assert_eq!(id, "mine");
    assert_eq!(files, ["mine-rank2.otlp.jsonl"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_rank_outside_the_world_is_an_error_naming_the_variable() {
    let mut cmd = clean_command(FAULT);
    cmd.arg("from-env")
        .env("NEMO_LENS_ENABLED", "1")
        .env("RANK", "8")
        .env("WORLD_SIZE", "8");
    let f = run_with_timeout(&mut cmd, Duration::from_secs(30));
    assert!(!f.status.success(), "{f:?}");
    assert!(f.stderr.contains("RANK") && f.stderr.contains('8'), "{f:?}");
}
