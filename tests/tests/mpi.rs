//! Real multi-process runs under `mpirun -np 4`: one trace per step across
//! all ranks, links between pipeline stages, and which ranks export under
//! each strategy. Built only with `--features mpi` (scripts/test-all.sh).
#![cfg(feature = "mpi")]

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use tests::{get, Rotel};

fn example_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("LENS_PRETRAIN_MPI_BIN") {
        return p.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let p = target.join("debug/examples/pretrain_mpi");
    assert!(
        p.is_file(),
        "{} is missing: build it with `cargo build -p examples --features mpi --example pretrain_mpi`",
        p.display()
    );
    p
}

fn mpirun(rotel: &Rotel, strategy: &str, run_id: &str) {
    let mut cmd = Command::new("mpirun");
    cmd.args(["--allow-run-as-root", "--oversubscribe", "-np", "4"]);
    for (k, _) in std::env::vars() {
        if k.starts_with("NEMO_LENS_")
            || k.starts_with("OTEL_")
            || k.starts_with("MEGATRON_OTEL_")
            || k == "LOCAL_RANK"
        {
            cmd.env_remove(k);
        }
    }
    let env = [
        ("NEMO_LENS_ENABLED", "1".to_owned()),
        ("NEMO_LENS_EXPORT_STRATEGY", strategy.to_owned()),
        (
            "MEGATRON_OTEL_SPAN_GROUPS",
            "per_step,microbatch,layer".to_owned(),
        ),
        ("NEMO_LENS_RUN_ID", run_id.to_owned()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", rotel.grpc_endpoint()),
        ("OMPI_ALLOW_RUN_AS_ROOT", "1".to_owned()),
        ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1".to_owned()),
        ("OMPI_MCA_rmaps_base_oversubscribe", "1".to_owned()),
    ];
    for (k, v) in &env {
        cmd.env(k, v);
        cmd.args(["-x", k]);
    }
    cmd.arg(example_binary());
    let out = cmd.output().expect("mpirun (apt-get install openmpi-bin)");
    assert!(
        out.status.success(),
        "mpirun failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn exporting_ranks(rotel: &Rotel, run_id: &str) -> BTreeSet<String> {
    std::thread::sleep(Duration::from_millis(500));
    rotel
        .received()
        .spans
        .iter()
        .filter(|s| get(&s.resource, "nemo.run.id") == Some(run_id))
        .filter_map(|s| get(&s.resource, "nv.dl.rank").map(str::to_owned))
        .collect()
}

#[test]
fn one_trace_per_step_across_four_ranks_with_links() {
    let rotel = Rotel::start();
    mpirun(&rotel, "all_ranks", "mpi-all");
    let r = rotel.wait_for(Duration::from_secs(30), "spans of 4 ranks", |r| {
        r.spans
            .iter()
            .filter(|s| s.name == "pp.stage" && get(&s.resource, "nemo.run.id") == Some("mpi-all"))
            .count()
            == 8
    });
    let mine: Vec<_> = r
        .spans
        .iter()
        .filter(|s| get(&s.resource, "nemo.run.id") == Some("mpi-all"))
        .collect();
    let instances: BTreeSet<_> = mine
        .iter()
        .filter_map(|s| get(&s.resource, "service.instance.id"))
        .collect();
    assert_eq!(instances.len(), 4, "{instances:?}");
    let steps: Vec<_> = mine.iter().filter(|s| s.name == "train.step").collect();
    assert_eq!(steps.len(), 2);
    for step in &steps {
        let stages: Vec<_> = mine
            .iter()
            .filter(|s| s.name == "pp.stage" && s.trace_id == step.trace_id)
            .collect();
        assert_eq!(
            stages.len(),
            4,
            "every rank's stage span is on the step's trace"
        );
        let ranks: BTreeSet<_> = stages
            .iter()
            .filter_map(|s| get(&s.resource, "nv.dl.rank"))
            .collect();
        assert_eq!(ranks.len(), 4);
        for s in &stages {
            assert_eq!(
                s.parent_id, step.span_id,
                "stage parented on rank 0's step span"
            );
        }
    }
    // every recv_forward links to the sender's send_forward span
    let sends: HashMap<&str, _> = mine
        .iter()
        .filter(|s| s.name == "send_forward")
        .map(|s| (s.span_id.as_str(), *s))
        .collect();
    let recvs: Vec<_> = mine.iter().filter(|s| s.name == "recv_forward").collect();
    assert_eq!(
        recvs.len(),
        3 * 2 * 2,
        "3 receiving ranks x 2 steps x 2 microbatches"
    );
    for recv in recvs {
        assert_eq!(recv.links.len(), 1, "{recv:?}");
        let linked = recv.links[0]
            .iter()
            .find(|(k, _)| k.contains("ID") && !k.contains("Trace"))
            .map(|(_, v)| v.as_str());
        let sender = linked
            .and_then(|id| sends.get(id))
            .unwrap_or_else(|| panic!("link {:?} points at no send_forward", recv.links));
        let recv_rank: i64 = get(&recv.resource, "nv.dl.rank").unwrap().parse().unwrap();
        let send_rank: i64 = get(&sender.resource, "nv.dl.rank")
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(send_rank, recv_rank - 1);
        assert_ne!(recv.parent_id, sender.span_id, "a link, not a parent");
    }
}

#[test]
fn strategies_pick_the_exporting_ranks() {
    let rotel = Rotel::start();
    mpirun(&rotel, "single_rank", "mpi-single");
    rotel.wait_for(Duration::from_secs(30), "single_rank spans", |r| {
        r.spans
            .iter()
            .any(|s| get(&s.resource, "nemo.run.id") == Some("mpi-single"))
    });
    assert_eq!(
        exporting_ranks(&rotel, "mpi-single"),
        BTreeSet::from(["3".to_owned()]),
        "last rank only"
    );
    mpirun(&rotel, "first_rank_per_node", "mpi-node");
    rotel.wait_for(Duration::from_secs(30), "first_rank_per_node spans", |r| {
        r.spans
            .iter()
            .any(|s| get(&s.resource, "nemo.run.id") == Some("mpi-node"))
    });
    // one node: only local rank 0 (world rank 0) exports
    assert_eq!(
        exporting_ranks(&rotel, "mpi-node"),
        BTreeSet::from(["0".to_owned()])
    );
}

/// SIGTERM to the whole job (mpirun forwards it to every rank, and kills
/// the others as soon as one exits): every rank's spans are flushed. Runs
/// several jobs, since a rank scheduled late is what loses them.
#[test]
fn sigterm_to_the_job_flushes_every_rank() {
    let dir = std::env::temp_dir().join(format!("lens-mpi-sigterm-{}", std::process::id()));
    for round in 0..5 {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = Command::new("mpirun");
        cmd.args(["--allow-run-as-root", "--oversubscribe", "-np", "4"]);
        for (k, _) in std::env::vars() {
            if k.starts_with("NEMO_LENS_") || k.starts_with("OTEL_") || k == "LOCAL_RANK" {
                cmd.env_remove(k);
            }
        }
        let path = dir.join("rank{rank}.jsonl");
        let env = [
            ("NEMO_LENS_ENABLED", "1".to_owned()),
            ("NEMO_LENS_EXPORT_STRATEGY", "all_ranks".to_owned()),
            ("NEMO_LENS_SPAN_GROUPS", "all".to_owned()),
            ("NEMO_LENS_EXPORTER", "file".to_owned()),
            ("NEMO_LENS_METRICS_ENABLED", "0".to_owned()),
            ("NEMO_LENS_FLUSH_ON_SIGNAL", "1".to_owned()),
            ("NEMO_LENS_FILE_PATH", path.to_string_lossy().into_owned()),
            ("OMPI_ALLOW_RUN_AS_ROOT", "1".to_owned()),
            ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1".to_owned()),
        ];
        for (k, v) in &env {
            cmd.env(k, v);
            cmd.args(["-x", k]);
        }
        cmd.args([env!("CARGO_BIN_EXE_lens-fault"), "rank"]);
        let f = tests::run_with_timeout_and(&mut cmd, Duration::from_secs(60), |child, wait| {
            for _ in 0..4 {
                assert!(wait("ready"), "the ranks never got ready");
            }
            // SAFETY: signalling our own child (mpirun).
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        });
        assert!(!f.timed_out, "round {round}: the job did not end: {f:?}");
        for rank in 0..4 {
            let spans = tests::file_spans(&dir.join(format!("rank{rank}.jsonl")));
            let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
            assert_eq!(
                names.iter().filter(|n| **n == "rank.step").count(),
                5,
                "round {round}, rank {rank}: {names:?}\n{f:?}"
            );
            assert!(
                names.contains(&"rank.job"),
                "round {round}, rank {rank}: {names:?}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `mpirun -np 4` with no rank, world or run id configured: every rank
/// finds its own rank, the world of 4 and one run id (Open MPI's job id), and
/// names its file after them.
#[test]
fn mpirun_with_no_configuration_gives_one_run_id_and_four_ranks() {
    let dir = std::env::temp_dir().join(format!("lens-mpi-from-env-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = Command::new("mpirun");
    cmd.args(["--allow-run-as-root", "--oversubscribe", "-np", "4"])
        .current_dir(&dir);
    for (k, _) in std::env::vars() {
        if k.starts_with("NEMO_LENS_")
            || k.starts_with("OTEL_")
            || k.starts_with("SLURM_")
            || ["LOCAL_RANK", "RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID"].contains(&k.as_str())
        {
            cmd.env_remove(k);
        }
    }
    // telemetry on, to files under the working directory: nothing about
    // ranks or the run
    for (k, v) in [
        ("NEMO_LENS_ENABLED", "1"),
        ("NEMO_LENS_EXPORT_STRATEGY", "all_ranks"),
        ("NEMO_LENS_EXPORTER", "file"),
        ("NEMO_LENS_METRICS_ENABLED", "0"),
        ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
        ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
    ] {
        cmd.env(k, v);
        cmd.args(["-x", k]);
    }
    cmd.args([env!("CARGO_BIN_EXE_lens-fault"), "from-env"]);
    let f = tests::run_with_timeout(&mut cmd, Duration::from_secs(60));
    assert!(!f.timed_out && f.status.success(), "{f:?}");
    let ids: BTreeSet<&str> = f
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("run_id="))
        .collect();
    assert_eq!(ids.len(), 1, "one run id for the job: {f:?}");
    let id = ids.into_iter().next().unwrap();
    let mut files: Vec<String> = std::fs::read_dir(dir.join("lens-telemetry"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let want: Vec<String> = (0..4).map(|r| format!("{id}-rank{r}.otlp.jsonl")).collect();
    assert_eq!(files, want);
    for (r, file) in want.iter().enumerate() {
        let text = std::fs::read_to_string(dir.join("lens-telemetry").join(file)).unwrap();
        let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        let rs = &line["resourceSpans"][0];
        let attr = |k: &str| {
            rs["resource"]["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["key"] == k)
                .map(|a| a["value"].clone())
        };
        assert_eq!(
            attr("nv.dl.rank"),
            Some(serde_json::json!({"intValue": r.to_string()}))
        );
        assert_eq!(
            attr("nv.dl.world_size"),
            Some(serde_json::json!({"intValue": "4"}))
        );
        assert_eq!(
            attr("nemo.run.id"),
            Some(serde_json::json!({"stringValue": id}))
        );
        assert_eq!(rs["scopeSpans"][0]["spans"][0]["name"], "from_env.job");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `lens record -- mpirun -np 4 …`: every rank (started by mpirun, which
/// hands its environment to local ranks) writes into the run directory,
/// and the report covers all four.
#[test]
fn lens_record_around_mpirun_records_every_rank() {
    let cwd = std::env::temp_dir().join(format!("lens-mpi-record-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cwd);
    std::fs::create_dir_all(&cwd).unwrap();
    let mut cmd = Command::new(tests::lens_cli_binary());
    for (k, _) in std::env::vars() {
        if k.starts_with("NEMO_LENS_") || k.starts_with("OTEL_") || k.starts_with("MEGATRON_OTEL_")
        {
            cmd.env_remove(k);
        }
    }
    cmd.current_dir(&cwd)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .args(["record", "--out", "run", "--", "mpirun"])
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "4"])
        .arg(example_binary());
    let out = cmd.output().expect("lens record -- mpirun");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for rank in 0..4 {
        let f = cwd.join(format!("run/rank{rank}.otlp.jsonl"));
        assert!(
            f.metadata().is_ok_and(|m| m.len() > 0),
            "{} is missing or empty\n{stdout}\n{stderr}",
            f.display()
        );
    }
    assert!(stdout.contains("from 4 rank(s)"), "{stdout}\n{stderr}");
    assert!(cwd.join("run/report.html").is_file());
    let _ = std::fs::remove_dir_all(&cwd);
}
