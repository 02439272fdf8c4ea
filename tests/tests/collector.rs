//! End to end against a real collector: `rotel` on loopback, the probe
//! program as a separate process configured only through the environment.

use std::process::{Command, Output};
use std::time::Duration;
use tests::{get, lens_command, run_ok, Rotel};

const PROBE: &str = env!("CARGO_BIN_EXE_lens-probe");

fn probe(args: &[&str], env: &[(&str, String)]) -> Output {
    let mut cmd = lens_command(PROBE);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_ok(&mut cmd)
}

fn otlp(endpoint: String, protocol: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol.to_owned()),
    ]
}

#[test]
fn spans_over_grpc_and_http_from_every_program_shape() {
    let rotel = Rotel::start();
    let cases = [
        ("grpc", rotel.grpc_endpoint()),
        ("http/protobuf", rotel.http_endpoint()),
        ("http/json", rotel.http_endpoint()),
    ];
    let mut expected_jobs = 0;
    for (protocol, endpoint) in &cases {
        for shape in ["sync", "tokio-mt", "tokio-ct"] {
            let run_id = format!("run-{}-{shape}", protocol.replace('/', "_"));
            let mut env = otlp(endpoint.clone(), protocol);
            env.push(("NEMO_LENS_RUN_ID", run_id.clone()));
            env.push(("RANK", "2".into()));
            env.push(("WORLD_SIZE", "4".into()));
            probe(&["spans", shape], &env);
            expected_jobs += 1;
            let r = rotel.wait_for(
                Duration::from_secs(20),
                &format!("spans of {run_id}"),
                |r| {
                    r.spans.iter().any(|s| {
                        s.name == "probe.job" && get(&s.resource, "nemo.run.id") == Some(&run_id)
                    })
                },
            );
            let mine: Vec<_> = r
                .spans
                .iter()
                .filter(|s| get(&s.resource, "nemo.run.id") == Some(&run_id))
                .collect();
            let job = mine.iter().find(|s| s.name == "probe.job").unwrap();
            let steps: Vec<_> = mine.iter().filter(|s| s.name == "probe.step").collect();
            assert_eq!(steps.len(), 3, "{protocol} {shape}");
            for st in &steps {
                assert_eq!(
                    st.parent_id, job.span_id,
                    "step parented on job ({protocol} {shape})"
                );
                assert_eq!(st.trace_id, job.trace_id);
                assert!(get(&st.attributes, "loss").is_some());
            }
            let fb = mine.iter().filter(|s| s.name == "forward_backward").count();
            assert_eq!(fb, 3);
            assert!(mine.iter().any(|s| s.name == "checkpoint.save"));
            assert_eq!(get(&job.resource, "nv.dl.rank"), Some("2"));
            assert_eq!(get(&job.resource, "nv.dl.world_size"), Some("4"));
            assert_eq!(
                get(&job.resource, "service.instance.id"),
                Some(format!("{run_id}-rank2").as_str())
            );
            assert_eq!(get(&job.resource, "service.name"), Some("nemo"));
            assert_eq!(job.scope.split_whitespace().next(), Some("nemo.lens"));
        }
    }
    assert_eq!(
        rotel.received().spans_named("probe.job").len(),
        expected_jobs
    );
}

#[test]
fn slurm_resource_and_error_status_arrive() {
    let rotel = Rotel::start();
    let mut env = otlp(rotel.grpc_endpoint(), "grpc");
    env.extend([
        ("SLURM_JOB_ID", "424242".to_owned()),
        ("SLURM_JOB_NAME", "pretrain-8b".to_owned()),
        ("SLURM_JOB_NODELIST", "node[01-04]".to_owned()),
        ("SLURM_JOB_NUM_NODES", "4".to_owned()),
        ("SLURM_NTASKS", "32".to_owned()),
        ("SLURM_JOB_PARTITION", "batch".to_owned()),
        ("SLURM_CLUSTER_NAME", "eos".to_owned()),
        ("CUDA_VISIBLE_DEVICES", "0,1,2,3".to_owned()),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.region=us-east,team=llm".to_owned(),
        ),
    ]);
    probe(&["error", "sync"], &env);
    let r = rotel.wait_for(Duration::from_secs(20), "error spans", |r| {
        !r.spans_named("checkpoint.save").is_empty()
    });
    let save = r.span("checkpoint.save");
    let res = &save.resource;
    assert_eq!(get(res, "slurm.job.id"), Some("424242"));
    assert_eq!(
        get(res, "nemo.run.id"),
        Some("424242"),
        "run id falls back to SLURM_JOB_ID"
    );
    assert_eq!(get(res, "service.instance.id"), Some("424242-rank0"));
    assert_eq!(get(res, "slurm.job.name"), Some("pretrain-8b"));
    assert_eq!(get(res, "slurm.nodelist"), Some("node[01-04]"));
    assert_eq!(get(res, "slurm.nnodes"), Some("4"));
    assert_eq!(get(res, "slurm.ntasks"), Some("32"));
    assert_eq!(get(res, "slurm.partition"), Some("batch"));
    assert_eq!(get(res, "slurm.cluster.name"), Some("eos"));
    assert_eq!(get(res, "host.gpu.count"), Some("4"));
    assert_eq!(get(res, "team"), Some("llm"));
    assert!(get(res, "host.name").is_some() && get(res, "process.pid").is_some());
    assert_eq!(save.status_code, "STATUS_CODE_ERROR");
    // as the Python library writes it: `TypeName: message`
    assert_eq!(save.status_message, "String: disk full");
    let ev = &save.events[0];
    assert_eq!(ev.name, "exception");
    assert_eq!(get(&ev.attributes, "exception.message"), Some("disk full"));
}

#[test]
fn metrics_over_grpc_and_http() {
    let rotel = Rotel::start();
    for (protocol, endpoint, run_id) in [
        ("grpc", rotel.grpc_endpoint(), "m-grpc"),
        ("http/protobuf", rotel.http_endpoint(), "m-http"),
    ] {
        let mut env = otlp(endpoint, protocol);
        env.push(("NEMO_LENS_RUN_ID", run_id.to_owned()));
        probe(&["metrics", "sync"], &env);
        let r = rotel.wait_for(Duration::from_secs(20), "metrics", |r| {
            r.metrics.iter().any(|m| {
                m.name == "probe.latency" && get(&m.resource, "nemo.run.id") == Some(run_id)
            })
        });
        let c = r
            .metrics
            .iter()
            .find(|m| m.name == "probe.requests" && get(&m.resource, "nemo.run.id") == Some(run_id))
            .unwrap();
        assert_eq!(c.unit, "{request}");
        assert_eq!(c.data_type, "Sum");
        assert_eq!(get(&c.points[0].fields, "Value"), Some("5"));
        assert_eq!(get(&c.points[0].attributes, "route"), Some("/a"));
        let h = r.metric("probe.latency");
        assert_eq!(h.data_type, "Histogram");
        assert_eq!(get(&h.points[0].fields, "Count"), Some("5"));
    }
}

#[test]
fn collector_outage_does_not_hurt_the_loop_and_export_resumes() {
    let mut rotel = Rotel::start();
    let mut env = otlp(rotel.grpc_endpoint(), "grpc");
    env.push(("OTEL_BSP_SCHEDULE_DELAY", "100".into()));
    env.push(("OTEL_EXPORTER_OTLP_TIMEOUT", "500".into()));
    env.push(("NEMO_LENS_RUN_ID", "outage".into()));
    let mut cmd = Command::new(PROBE);
    cmd.args(["loop", "sync", "6000"]);
    for (k, _) in std::env::vars() {
        if k.starts_with("NEMO_LENS_") || k.starts_with("OTEL_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("NEMO_LENS_ENABLED", "1")
        .env("NEMO_LENS_EXPORT_STRATEGY", "all_ranks")
        .env("NEMO_LENS_SPAN_GROUPS", "all");
    for (k, v) in &env {
        cmd.env(k, v);
    }
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // spans arrive while the collector is up
    rotel.wait_for(Duration::from_secs(10), "first loop spans", |r| {
        !r.spans_named("probe.loop").is_empty()
    });
    rotel.stop();
    std::thread::sleep(Duration::from_millis(1500));
    rotel.restart();
    // export resumes after the collector comes back
    rotel.wait_for(Duration::from_secs(15), "loop spans after restart", |r| {
        !r.spans_named("probe.loop").is_empty()
    });
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // lost telemetry never fails the job
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let last = stdout
        .lines()
        .find(|l| l.starts_with("loop "))
        .expect(&stdout);
    let slowest_us: u64 = last.rsplit('=').next().unwrap().parse().unwrap();
    // a batch of 50 spans never waits on the network (generous bound: the
    // exporter's 500 ms timeout would show up here if it blocked the loop)
    assert!(
        slowest_us < 250_000,
        "the loop stalled for {slowest_us} us during the outage:\n{stdout}"
    );
    // spans lost during the outage are counted and reported exactly once,
    // naming the cause
    assert_eq!(
        stderr.matches("lens: warning: telemetry was lost").count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains("spans lost") && stderr.contains("is unreachable"),
        "{stderr}"
    );
}

/// Starts the probe in `hang` mode (an open `probe.job` span), waits until
/// it is ready, sends SIGTERM and returns how it ended.
fn hang_then_sigterm(rotel: &Rotel, flush_on_signal: bool) -> std::process::ExitStatus {
    use std::io::{BufRead, BufReader};
    let mut cmd = lens_command(PROBE);
    cmd.args(["hang", "sync"])
        .env(
            "NEMO_LENS_FLUSH_ON_SIGNAL",
            if flush_on_signal { "1" } else { "0" },
        )
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", rotel.grpc_endpoint());
    let mut child = cmd.stdout(std::process::Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(lines.any(|l| l.map(|l| l == "ready").unwrap_or(false)));
    // SAFETY: sending SIGTERM to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    child.wait().unwrap()
}

#[test]
fn sigterm_flushes_open_run_wide_spans_then_dies_as_usual() {
    use std::os::unix::process::ExitStatusExt;
    let rotel = Rotel::start();
    let status = hang_then_sigterm(&rotel, true);
    assert_eq!(
        status.signal(),
        Some(libc::SIGTERM),
        "the process must still die of SIGTERM: {status:?}"
    );
    let r = rotel.wait_for(Duration::from_secs(20), "the flushed job span", |r| {
        !r.spans_named("probe.job").is_empty()
    });
    let job = r.span("probe.job");
    assert_eq!(get(&job.attributes, "nemo.span.truncated"), Some("true"));
    assert!(job.events.iter().any(|e| e.name == "nemo.span.truncated"));
    assert_eq!(r.span("probe.step").parent_id, job.span_id);
}

#[test]
fn without_the_hook_sigterm_loses_the_open_span() {
    // the control for the test above: the flush really comes from the hook
    let rotel = Rotel::start();
    hang_then_sigterm(&rotel, false);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(rotel.received().spans_named("probe.job").is_empty());
}
