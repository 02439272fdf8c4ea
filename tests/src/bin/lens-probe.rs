//! A small instrumented program the integration tests run as a separate
//! process, configured only through the environment a user would set.
//!
//! `lens-probe <mode> [shape]`
//! * modes: `spans` (a job with steps), `loop <millis>` (spans in a tight
//!   loop, printing the slowest iteration), `metrics` (a counter and a
//!   histogram), `error` (a failing step), `hang` (an open job span, then
//!   sleep until killed), `python-child <peer.py>` (a Python child
//!   continues our trace), `nan` (a span with NaN and infinite attributes),
//!   `batches <n>` (n flushed batches of spans; a failed export is reported
//!   on stdout, not an error, as a training job would carry on),
//!   `stdout-locked` (flushes a span while holding the stdout lock, as a
//!   progress printer may), `tracing` (the `tracing` bridge, routed by
//!   `NEMO_LENS_TRACING_GROUPS`: a span made once and entered per step, a
//!   server span with a lens span and an event inside);
//! * shapes: `sync` (plain main), `tokio-mt`, `tokio-ct` (inside a user's
//!   multi-thread / current-thread tokio runtime).
//!
//! Rank and world size come from `RANK` / `WORLD_SIZE` (default 0 / 1).
//! `LENS_PROBE_FSIZE=<bytes>` limits the size of files the probe writes
//! (`RLIMIT_FSIZE`; `SIGXFSZ` keeps its default action, which kills a
//! process that writes past the limit unless the writer blocks it).
//!
//! `LENS_PROBE_SET_ENV=<file>`: the file holds `NAME=VALUE` (raw bytes, any
//! size); the probe sets that variable before anything else runs. This
//! passes values larger than `execve` allows (Linux caps one variable at
//! 128 KiB).

use lens::{managed_span, span_cm, trace_fn, LensConfig};
use std::time::{Duration, Instant};

#[trace_fn(group = "forward_backward", args(microbatch))]
fn forward_backward(microbatch: u32) -> f64 {
    f64::from(microbatch) * 0.5
}

#[trace_fn(group = "checkpoint", name = "checkpoint.save", err)]
fn save(fail: bool) -> Result<(), String> {
    if fail {
        Err("disk full".to_owned())
    } else {
        Ok(())
    }
}

fn env_u32(k: &str, default: u32) -> u32 {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Applies `LENS_PROBE_FSIZE`, if set.
fn limit_file_size() -> Result<(), Box<dyn std::error::Error>> {
    let Ok(limit) = std::env::var("LENS_PROBE_FSIZE") else {
        return Ok(());
    };
    let bytes: libc::rlim_t = limit.parse()?;
    let rlimit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: a plain system call with valid arguments. SIGXFSZ keeps its
    // default action (kill): lens must keep its own writes from raising it.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &rlimit) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}

fn run(mode: &str, arg: Option<&str>) -> Result<(), Box<dyn std::error::Error>> {
    limit_file_size()?;
    let rank = env_u32("RANK", 0);
    let world = env_u32("WORLD_SIZE", 1);
    let config = LensConfig::from_env()?;
    let telemetry = lens::setup_telemetry(config, rank, world)?;
    println!("exporting={}", telemetry.is_exporting());
    // a launcher (srun, mpirun, a Python parent) may hand us its trace
    let _launcher = lens::propagation::context_from_env().attach();
    match mode {
        "spans" => {
            let _job = span_cm!("probe.job", "probe.mode" = mode);
            for i in 0..3u64 {
                let step = managed_span!("step", "probe.step", "dl.iteration" = i);
                let loss = forward_backward(2);
                step.set_attribute("loss", loss);
            }
            save(false)?;
        }
        "nan" => {
            let _job = span_cm!("probe.job");
            let step = managed_span!("step", "probe.nan");
            step.set_attribute("loss", f64::NAN);
            step.set_attribute("grad_norm", f64::INFINITY);
            step.set_attribute("floor", f64::NEG_INFINITY);
            step.set_attribute("lr", 0.25);
        }
        "batches" => {
            let n: u64 = arg.and_then(|a| a.parse().ok()).unwrap_or(10);
            for batch in 0..n {
                for i in 0..20u64 {
                    let _s = managed_span!(
                        "step",
                        "probe.batch",
                        "probe.batch" = batch,
                        "dl.iteration" = i
                    );
                }
                if let Err(e) = telemetry.force_flush().into_result() {
                    println!("flush-error {e}");
                }
            }
            if let Err(e) = telemetry.shutdown(Duration::from_secs(10)).into_result() {
                println!("shutdown-error {e}");
            }
            println!("done");
            return Ok(());
        }
        "stdout-locked" => {
            let lock = std::io::stdout().lock();
            drop(span_cm!("probe.locked"));
            let flushed = telemetry.force_flush();
            drop(lock);
            println!("flushed-while-locked ok={}", flushed.is_clean());
        }
        "hang" => {
            // a run-wide span that is still open when a scheduler kills us
            let _job = span_cm!("probe.job");
            drop(managed_span!("step", "probe.step", "dl.iteration" = 0));
            println!("ready");
            std::thread::sleep(Duration::from_secs(120));
        }
        "python-child" => {
            // the Rust parent injects into a map that a Python child extracts
            let script = arg.ok_or("python-child needs the peer script path")?;
            let _parent = span_cm!("rust.parent");
            let carrier = lens::propagation::inject_context();
            println!("rust-parent {}", carrier["traceparent"]);
            let status = std::process::Command::new("python3")
                .args([script, "child", &serde_json::to_string(&carrier)?])
                .status()?;
            if !status.success() {
                return Err(format!("python child failed: {status}").into());
            }
        }
        "error" => {
            let _job = span_cm!("probe.job");
            let _ = save(true);
        }
        "loop" => {
            let millis: u64 = arg.and_then(|a| a.parse().ok()).unwrap_or(1000);
            let end = Instant::now() + Duration::from_millis(millis);
            let mut slowest = Duration::ZERO;
            let mut n = 0u64;
            let mut window = Instant::now();
            while Instant::now() < end {
                let t = Instant::now();
                for _ in 0..50 {
                    let _s = managed_span!("step", "probe.loop", n = n);
                    n += 1;
                }
                slowest = slowest.max(t.elapsed());
                std::thread::sleep(Duration::from_millis(2));
                if window.elapsed() > Duration::from_millis(250) {
                    println!("progress spans={n} dropped={}", telemetry.dropped_spans());
                    window = Instant::now();
                }
            }
            println!("loop spans={n} slowest_batch_us={}", slowest.as_micros());
        }
        "metrics" => {
            let meter = telemetry.meter();
            let c = meter
                .u64_counter("probe.requests")
                .with_unit("{request}")
                .build();
            let h = meter.f64_histogram("probe.latency").with_unit("s").build();
            for i in 0..5 {
                c.add(1, &[lens::otel::KeyValue::new("route", "/a")]);
                h.record(0.01 * f64::from(i), &[]);
            }
        }
        "logs" => {
            // the log bridge: `trainer` and below at info and above, twice
            use lens::logs::{log, setup_logging_bridge, Level, LogBridgeOptions};
            use lens::tracing::tracing;
            let options = || {
                LogBridgeOptions::new()
                    .with_level(Level::Info)
                    .with_target("trainer")
                    .with_global_tracing_subscriber(true)
            };
            let b = setup_logging_bridge(&telemetry, options())?;
            let (log_st, tr_st) = (b.log_status(), b.tracing_subscriber_status());
            println!(
                "bridge active={} log={log_st:?} tracing={tr_st:?}",
                b.is_active()
            );
            log::info!(target: "trainer::data", "log outside span");
            {
                let _job = span_cm!("probe.logs.job");
                log::info!(target: "trainer::loop", "log in job");
                tracing::warn!(target: "trainer::loop", step = 7u64, "tracing in job");
                log::debug!(target: "trainer::loop", "log below level");
                tracing::debug!(target: "trainer::loop", "tracing below level");
                log::error!(target: "other::module", "log wrong target");
                tracing::error!(target: "trainers", "tracing wrong target");
                let _step = managed_span!("step", "probe.logs.step");
                log::error!(target: "trainer", "log in step");
                tracing::info!(target: "trainer::step", "tracing in step");
            }
            let b = setup_logging_bridge(&telemetry, options())?;
            let (log_st, tr_st) = (b.log_status(), b.tracing_subscriber_status());
            println!(
                "bridge active={} log={log_st:?} tracing={tr_st:?}",
                b.is_active()
            );
            {
                let _after = span_cm!("probe.logs.after");
                log::info!(target: "trainer::loop", "log after second setup");
                tracing::info!(target: "trainer::loop", "tracing after second setup");
            }
        }
        "tracing" => {
            // the tracing bridge, configured by NEMO_LENS_TRACING_GROUPS:
            // a candle-style span made once and entered per step, and a
            // server-style span with a lens span inside
            use lens::tracing::tracing_subscriber::layer::SubscriberExt as _;
            let subscriber =
                lens::tracing::tracing_subscriber::registry().with(lens::tracing::layer());
            tracing::subscriber::set_global_default(subscriber)?;
            let _job = span_cm!("probe.job");
            let block =
                tracing::trace_span!(target: "probe_model::layers", "probe.block", index = 0);
            for i in 0..3u64 {
                let _step = managed_span!("step", "probe.step", "dl.iteration" = i);
                let _entry = block.enter();
                forward_backward(1);
            }
            tracing::info_span!(target: "probe_server", "probe.request", prompt = "a secret")
                .in_scope(|| {
                    let _child = span_cm!("probe.lens.child");
                    tracing::info!(target: "probe_server", tokens = 3, "generated");
                });
        }
        other => return Err(format!("unknown mode {other}").into()),
    }
    telemetry.shutdown(Duration::from_secs(10));
    println!("done");
    Ok(())
}

/// Sets the variable named in the `LENS_PROBE_SET_ENV` file (see the
/// module docs). Runs first, while the process has a single thread.
fn set_env_from_file() -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    let Some(path) = std::env::var_os("LENS_PROBE_SET_ENV") else {
        return Ok(());
    };
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {path:?}: {e}"))?;
    let eq = bytes
        .iter()
        .position(|b| *b == b'=')
        .ok_or_else(|| format!("{path:?} holds no NAME=VALUE"))?;
    let (name, value) = (&bytes[..eq], &bytes[eq + 1..]);
    std::env::set_var(
        std::ffi::OsStr::from_bytes(name),
        std::ffi::OsStr::from_bytes(value),
    );
    Ok(())
}

fn main() {
    if let Err(e) = set_env_from_file() {
        eprintln!("lens-probe: LENS_PROBE_SET_ENV: {e}");
        std::process::exit(2);
    }
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map_or("spans", String::as_str);
    let shape = args.get(2).map_or("sync", String::as_str);
    let arg = args.get(3).map(String::as_str);
    let result = match shape {
        "sync" => run(mode, arg),
        "tokio-mt" => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(async { run(mode, arg) }),
        "tokio-ct" => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(async { run(mode, arg) }),
        other => Err(format!("unknown shape {other}").into()),
    };
    if let Err(e) = result {
        eprintln!("lens-probe: {}", tests::error_chain(&*e));
        std::process::exit(1);
    }
}
