//! Span-group families from the environment, from outside: a child process
//! (this test binary, re-run as the `child` test) sets lens up with
//! `setup_telemetry_from_env()` alone, as a user would, and records a
//! `megatron` site, a `megatron::DATA_LOADING` function and a `tracing`
//! span routed to `layer`. No family is passed or registered anywhere.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const CHILD: &str = "LENS_FAMILIES_CHILD";

#[lens::trace_fn(group = lens::megatron::DATA_LOADING, name = "data.load")]
fn load_batch() {}

/// The child's role; a no-op unless the parent started it.
#[test]
fn child() {
    use lens::tracing::tracing_subscriber::{layer::SubscriberExt as _, registry};
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let handle = lens::setup_telemetry_from_env().expect("setup from the environment");
    println!(
        "placement rank={} world={} local={}",
        handle.rank(),
        handle.world_size(),
        handle.local_rank()
    );
    drop(lens::managed_span!(
        lens::megatron::LAYER,
        "layer.forward",
        layer = 3
    ));
    load_batch();
    let subscriber = registry().with(lens::tracing::layer());
    lens::tracing::tracing::subscriber::with_default(subscriber, || {
        let span = lens::tracing::tracing::info_span!(target: "candle_transformers::qwen", "bridged.layer");
        drop(span.enter());
    });
    handle.shutdown(Duration::from_secs(10));
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lens-families-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// Runs the child with `groups`, as rank 2 of 4 (local rank 1) of a
/// torchrun-style job; returns (stdout, stderr, span names).
fn run_child(groups: &str, dir: &Path) -> (String, String, Vec<String>) {
    let exe = std::env::current_exe().expect("test binary");
    let mut cmd: Command = tests::clean_command(exe);
    cmd.args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("NEMO_LENS_ENABLED", "1")
        .env("NEMO_LENS_EXPORT_STRATEGY", "all_ranks")
        .env("NEMO_LENS_EXPORTER", "file")
        .env("NEMO_LENS_FILE_PATH", dir.join("spans.jsonl"))
        .env("NEMO_LENS_METRICS_ENABLED", "0")
        .env("NEMO_LENS_SPAN_GROUPS", groups)
        .env(
            "NEMO_LENS_TRACING_GROUPS",
            "candle_transformers=layer:lifetime",
        )
        .env("RANK", "2")
        .env("WORLD_SIZE", "4")
        .env("LOCAL_RANK", "1");
    for v in [
        "OMPI_COMM_WORLD_RANK",
        "PMI_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "MPI_LOCALRANKID",
    ] {
        cmd.env_remove(v);
    }
    let f = tests::run_with_timeout(&mut cmd, Duration::from_secs(60));
    assert!(
        f.status.success() && !f.timed_out,
        "child failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        f.status,
        f.stdout,
        f.stderr
    );
    let names = tests::file_spans(&dir.join("spans.jsonl"))
        .into_iter()
        .map(|s| s.name)
        .collect();
    (f.stdout, f.stderr, names)
}

#[test]
fn per_step_layer_from_the_environment_records_a_megatron_layer_span() {
    let dir = temp_dir("layer");
    let (out, err, names) = run_child("per_step,layer", &dir);
    assert!(
        out.contains("placement rank=2 world=4 local=1"),
        "the handle's placement comes from the launcher:\n{out}"
    );
    for name in ["layer.forward", "data.load", "bridged.layer"] {
        assert!(
            names.iter().any(|n| n == name),
            "no `{name}` span: {names:?}\n{err}"
        );
    }
    // `layer` is on: the warning (if any, for the other megatron groups)
    // does not name it
    assert!(!err.contains("megatron.layer"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn per_step_alone_names_the_layer_group_and_route_in_one_warning() {
    let dir = temp_dir("warn");
    let (_, err, names) = run_child("per_step", &dir);
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("lens: span groups off"))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning line:\n{err}");
    let w = warnings[0];
    assert!(w.contains("megatron.layer"), "{w}");
    assert!(
        w.contains("candle_transformers -> megatron.layer"),
        "the route that records nothing is named: {w}"
    );
    assert!(
        w.contains(r#"NEMO_LENS_SPAN_GROUPS="per_step,layer""#),
        "{w}"
    );
    // per_step is megatron's per_step: data_loading records, layer does not
    assert!(names.iter().any(|n| n == "data.load"), "{names:?}\n{err}");
    assert!(
        !names
            .iter()
            .any(|n| n == "layer.forward" || n == "bridged.layer"),
        "{names:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
