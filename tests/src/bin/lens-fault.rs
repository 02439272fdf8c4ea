//! Fault probe: a small program that meets one hostile situation of a real
//! job through lens's public API, for `tests/tests/faults`. Each mode prints
//! what the test needs on stdout (`ready` when it waits for a signal) and
//! exits 0 when lens behaved, or non-zero with a reason.
//!
//! Configuration comes from the environment a user would set
//! (`NEMO_LENS_*`, `OTEL_*`); `lens-fault <mode> [arg]`.

use lens::{managed_span, span_cm, LensConfig, TelemetryBuilder, TelemetryHandle};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

type Res = Result<(), Box<dyn std::error::Error>>;

fn builder() -> Result<TelemetryBuilder, Box<dyn std::error::Error>> {
    Ok(TelemetryBuilder::new(LensConfig::from_env()?, 0, 1))
}

fn setup() -> Result<TelemetryHandle, Box<dyn std::error::Error>> {
    Ok(builder()?.install()?)
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

static APP_GOT_SIGNAL: AtomicBool = AtomicBool::new(false);

extern "C" fn app_handler(_sig: libc::c_int) {
    APP_GOT_SIGNAL.store(true, Ordering::SeqCst);
}

fn install_app_sigaction(sig: libc::c_int) {
    // SAFETY: a plain handler that stores an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = app_handler as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// The application's "checkpoint on preemption": waits for its own
/// handler, then checkpoints and exits normally.
fn wait_and_checkpoint(flag: &AtomicBool) -> Res {
    let start = Instant::now();
    while !flag.load(Ordering::SeqCst) {
        if start.elapsed() > Duration::from_secs(60) {
            return Err("the application's handler never ran".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ckpt = span_cm!("app.checkpoint");
    say("checkpoint done");
    Ok(())
}

fn job_with_open_span(handle: &TelemetryHandle) -> lens::SpanGuard {
    let job = span_cm!("fault.job");
    drop(managed_span!("step", "fault.step", "dl.iteration" = 0));
    let _ = handle.force_flush();
    job
}

/// Resident set size in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4)
}

fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// A user type recorded as an attribute: its string is redacted under a
/// sensitive key like any string.
struct Prompt(&'static str);

impl lens::AttributeValue for Prompt {
    fn to_value(&self) -> Option<lens::otel::Value> {
        Some(self.0.into())
    }
}

#[lens::trace_fn(group = "step", args(prompt))]
fn with_prompt(prompt: &Prompt) {
    let _ = prompt;
}

/// A span exporter that writes the names of each batch to a file, after a
/// delay, and panics on its first batch when asked to.
#[derive(Debug)]
struct NamesTo {
    path: std::path::PathBuf,
    delay: Duration,
    panic_first: AtomicBool,
}

impl lens::otel_sdk::trace::SpanExporter for NamesTo {
    async fn export(
        &self,
        batch: Vec<lens::otel_sdk::trace::SpanData>,
    ) -> lens::otel_sdk::error::OTelSdkResult {
        if self.panic_first.swap(false, Ordering::SeqCst) {
            panic!("exporter bug");
        }
        std::thread::sleep(self.delay);
        let names: Vec<String> = batch.iter().map(|s| s.name.to_string()).collect();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| lens::otel_sdk::error::OTelSdkError::InternalFailure(e.to_string()))?;
        let _ = writeln!(f, "{}", names.join("\n"));
        Ok(())
    }
}

fn run(mode: &str, arg: Option<&str>) -> Res {
    match mode {
        // SIGTERM with the application's own handler, installed before or
        // after lens, through several APIs: lens flushes, never kills
        "app-handler" => {
            let how = arg.unwrap_or("sigaction-before");
            let flag: Arc<AtomicBool> = Arc::new(AtomicBool::new(false));
            if how == "sigaction-before" {
                install_app_sigaction(libc::SIGTERM);
            }
            if how == "signal-hook-before" {
                signal_hook::flag::register(libc::SIGTERM, flag.clone())?;
            }
            let h = setup()?;
            match how {
                "sigaction-after" => install_app_sigaction(libc::SIGTERM),
                "signal-hook-after" => {
                    signal_hook::flag::register(libc::SIGTERM, flag.clone())?;
                }
                "tokio-after" => {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    let job = job_with_open_span(&h);
                    rt.block_on(async {
                        let mut term = tokio::signal::unix::signal(
                            tokio::signal::unix::SignalKind::terminate(),
                        )?;
                        say("ready");
                        term.recv().await;
                        Ok::<_, std::io::Error>(())
                    })?;
                    let _ckpt = span_cm!("app.checkpoint");
                    say("checkpoint done");
                    drop(job);
                    return Ok(());
                }
                _ => {}
            }
            let job = job_with_open_span(&h);
            say("ready");
            if how.starts_with("signal-hook") {
                wait_and_checkpoint(&flag)?;
            } else {
                wait_and_checkpoint(&APP_GOT_SIGNAL)?;
            }
            drop(job);
            Ok(())
        }
        // SIGINT ignored before setup (`cmd &` in a batch script) stays
        // ignored; SIGTERM still flushes and kills
        "sigint-ignored" => {
            // SAFETY: setting a disposition.
            unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
            let h = setup()?;
            let _job = job_with_open_span(&h);
            say("ready");
            std::thread::sleep(Duration::from_secs(60));
            Err("not killed".into())
        }
        // lens alone over the default disposition: flush, then die by it
        "sole" => {
            let h = setup()?;
            let _job = job_with_open_span(&h);
            say("ready");
            std::thread::sleep(Duration::from_secs(60));
            Err("not killed".into())
        }
        // the hook follows the live handle across a re-setup
        "resetup" => {
            let first = setup()?;
            drop(span_cm!("first.span"));
            first.shutdown(Duration::from_secs(5)).into_result()?;
            drop(first);
            let second = setup()?;
            let _job = job_with_open_span(&second);
            say("ready");
            std::thread::sleep(Duration::from_secs(60));
            Err("not killed".into())
        }
        // stderr is closed (or a broken pipe): lens's warnings must not panic
        "stderr-closed" => {
            // SAFETY: closing our own stderr on purpose.
            unsafe { libc::close(2) };
            let h = setup()?;
            let _job = job_with_open_span(&h);
            if arg == Some("shutdown") {
                drop(_job);
                let _ = h.shutdown(Duration::from_secs(2));
                say("shut down");
                return Ok(());
            }
            say("ready");
            std::thread::sleep(Duration::from_secs(60));
            Err("not killed".into())
        }
        // a metric callback reads the handle while a flush runs
        "callback-reads-handle" => {
            let h = Arc::new(setup()?);
            let weak = Arc::downgrade(&h);
            let _gauge = h
                .meter()
                .u64_observable_gauge("fault.dropped")
                .with_callback(move |o| {
                    if let Some(h) = weak.upgrade() {
                        o.observe(h.dropped_spans(), &[]);
                    }
                })
                .build();
            drop(span_cm!("fault.span"));
            let t = Instant::now();
            h.force_flush().into_result()?;
            say(&format!("flushed in {:?}", t.elapsed()));
            if arg == Some("signal") {
                say("ready");
                std::thread::sleep(Duration::from_secs(60));
                return Err("not killed".into());
            }
            Ok(())
        }
        // shutdown within its deadline against a collector that never answers
        "hung-collector" => {
            let h = setup()?;
            for i in 0..100 {
                drop(span_cm!("fault.hung", i = i));
            }
            let _ = h.meter().u64_counter("fault.counter").build();
            let t = Instant::now();
            let r = h.shutdown(Duration::from_secs(2)).into_result();
            say(&format!(
                "shutdown took_ms={} ok={}",
                t.elapsed().as_millis(),
                r.is_ok()
            ));
            if let Err(e) = r {
                say(&format!("error: {e}"));
            }
            Ok(())
        }
        // re-init: the old handle tears down only what it installed
        "reinit" => {
            let a = builder()?.allow_reinit(true).install()?;
            let b = builder()?.allow_reinit(true).install()?;
            let open = span_cm!("b.open");
            drop(a);
            if !lens::groups::STEP.is_enabled() {
                return Err("dropping the old handle disabled the groups".into());
            }
            if managed_span!("step", "b.step").is_none() {
                return Err("step group off".into());
            }
            match builder()?.install() {
                Err(lens::SetupError::AlreadyInitialized) => {}
                Err(e) => return Err(format!("unexpected error: {e}").into()),
                Ok(_) => return Err("a third setup succeeded while a handle is live".into()),
            }
            drop(open);
            b.shutdown(Duration::from_secs(5)).into_result()?;
            say("reinit ok");
            Ok(())
        }
        // many setup/shutdown cycles: memory stays flat
        "soak" => {
            let n: u32 = arg.unwrap_or("1000").parse()?;
            let mut first = 0;
            for i in 0..n {
                let h = setup()?;
                for _ in 0..5 {
                    drop(span_cm!("soak.span"));
                }
                h.shutdown(Duration::from_secs(5)).into_result()?;
                drop(h);
                if i == 19 {
                    first = rss_kib();
                }
            }
            say(&format!("rss_kib after 20={first} after {n}={}", rss_kib()));
            Ok(())
        }
        // the first span created during unwinding (a Drop in a panic)
        "span-in-unwind" => {
            struct MakesSpanOnDrop;
            impl Drop for MakesSpanOnDrop {
                fn drop(&mut self) {
                    let _g = span_cm!("during.unwind");
                }
            }
            let h = setup()?;
            let r = std::panic::catch_unwind(|| {
                let _d = MakesSpanOnDrop;
                panic!("boom");
            });
            if r.is_ok() {
                return Err("no panic".into());
            }
            h.shutdown(Duration::from_secs(5)).into_result()?;
            say("survived");
            Ok(())
        }
        // resume_unwind is not labelled with an older panic's message
        "resume-unwind" => {
            let h = setup()?;
            let _ = std::panic::catch_unwind(|| panic!("old panic"));
            let r = std::panic::catch_unwind(|| {
                let _g = span_cm!("resumed");
                std::panic::resume_unwind(Box::new("new payload"));
            });
            if r.is_ok() {
                return Err("no unwind".into());
            }
            h.shutdown(Duration::from_secs(5)).into_result()?;
            Ok(())
        }
        // fork while other threads hold open spans: the child keeps
        // recording, on a pipeline of its own
        "fork" => {
            let h = setup()?;
            let job = span_cm!("parent.job");
            let (tx, rx) = std::sync::mpsc::channel();
            let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
            let worker = std::thread::spawn(move || {
                let _held = span_cm!("parent.worker");
                let _ = tx.send(());
                let _ = done_rx.recv();
            });
            let _ = rx.recv();
            drop(span_cm!("parent.before"));
            // SAFETY: the child only uses lens's API and exits.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                let t = Instant::now();
                let me = i64::from(std::process::id());
                drop(span_cm!("child.span", child_pid = me));
                drop(managed_span!("step", "child.step", child_pid = me));
                let r = h.shutdown(Duration::from_secs(5)).into_result();
                drop(h);
                let took = t.elapsed();
                // the child's spans were exported by the child, in time
                let code = match (r, took < Duration::from_secs(3)) {
                    (Ok(()), true) => 0,
                    (Err(e), _) => {
                        eprintln!("child: {e}");
                        3
                    }
                    (Ok(()), false) => {
                        eprintln!("child: shutdown took {took:?}");
                        3
                    }
                };
                // SAFETY: leave the child without running the parent's
                // atexit handlers or destructors
                unsafe { libc::_exit(code) };
            }
            let mut status = 0;
            // SAFETY: waiting for our child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            drop(span_cm!("parent.after"));
            let _ = done_tx.send(());
            let _ = worker.join();
            drop(job);
            h.shutdown(Duration::from_secs(5)).into_result()?;
            if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
                return Err(format!("child failed: status {status}").into());
            }
            say(&format!(
                "fork ok parent={} child={pid}",
                std::process::id()
            ));
            Ok(())
        }
        // an idle pipeline with OTEL_BSP_SCHEDULE_DELAY=0 does not spin
        "idle" => {
            let h = setup()?;
            drop(span_cm!("idle.span"));
            let before = cpu_time();
            std::thread::sleep(Duration::from_secs(2));
            let used = cpu_time() - before;
            say(&format!("idle_cpu_ms={}", used.as_millis()));
            h.shutdown(Duration::from_secs(5)).into_result()?;
            Ok(())
        }
        // dropped_spans counts losses, not queued spans
        "dropped-count" => {
            let h = setup()?;
            for _ in 0..1000 {
                drop(span_cm!("queued"));
            }
            let dropped = h.dropped_spans();
            h.shutdown(Duration::from_secs(5)).into_result()?;
            say(&format!("dropped={dropped}"));
            Ok(())
        }
        // every signal is redacted at the last point before export
        "redaction" => {
            let h = builder()?.redact_keys(["ssn"]).install()?;
            let _bridge = lens::logs::setup_logging_bridge(
                &h,
                lens::logs::LogBridgeOptions::new()
                    .with_target("fault")
                    .with_global_tracing_subscriber(true),
            )?;
            let p = Prompt("SECRET-1 user type");
            with_prompt(&p);
            {
                let s = span_cm!("redaction.span");
                s.set_attribute("api_key", "SECRET-2");
                s.set_attribute("gen_ai.prompt.0.content", "SECRET-3");
                s.set_attribute("user.email", "SECRET-4 (NEMO_LENS_REDACT_KEYS)");
                s.set_attribute("user.ssn", "SECRET-5 (builder)");
                s.set_attribute("kept", "visible");
                s.add_event("ev", &[("hf_token", &"SECRET-6")]);
            }
            tracing::info!(target: "fault", prompt = "SECRET-7", "a log line");
            h.meter()
                .u64_counter("fault.requests")
                .build()
                .add(1, &[lens::otel::KeyValue::new("prompt", "SECRET-8")]);
            // instrumentation-scope attributes, for a tracer and a meter
            let scope = |secret: &'static str| {
                lens::otel::InstrumentationScope::builder("fault.scope")
                    .with_attributes([lens::otel::KeyValue::new("api_key", secret)])
                    .build()
            };
            {
                use lens::otel::trace::Tracer as _;
                lens::otel::global::tracer_with_scope(scope("SECRET-10"))
                    .in_span("scoped.span", |_| {});
            }
            {
                lens::otel::global::meter_provider()
                    .meter_with_scope(scope("SECRET-11"))
                    .u64_counter("fault.scoped")
                    .build()
                    .add(1, &[]);
            }
            h.shutdown(Duration::from_secs(5)).into_result()?;
            Ok(())
        }
        // a forked child sets lens up again and gets a pipeline of its own
        "fork-resetup" => {
            // forked after the parent shut down: an ordinary process
            let h = setup()?;
            h.shutdown(Duration::from_secs(5)).into_result()?;
            drop(h);
            let child = |suffix: &str, parent: Option<TelemetryHandle>| -> ! {
                let code = (|| -> Res {
                    if let Some(p) = parent {
                        // the parent's handle: shut down at once, not waited on
                        let _ = p.shutdown(Duration::from_secs(5));
                        drop(p);
                    }
                    let mut cfg = LensConfig::from_env()?;
                    cfg.file_path = cfg.file_path.map(|p| format!("{p}.{suffix}"));
                    let h = TelemetryBuilder::new(cfg, 0, 1).install()?;
                    drop(span_cm!("child.own"));
                    h.shutdown(Duration::from_secs(5)).into_result()?;
                    Ok(())
                })()
                .map_or(4, |()| 0);
                // SAFETY: leave the child without the parent's destructors
                unsafe { libc::_exit(code) }
            };
            let wait = |pid: libc::pid_t| -> Res {
                let mut status = 0;
                // SAFETY: waiting for our child.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
                    return Err(format!("child failed: status {status}").into());
                }
                Ok(())
            };
            // SAFETY: the child only uses lens's API and exits.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                child("after-shutdown", None);
            }
            wait(pid)?;
            // forked while the parent's pipeline is live
            let h = setup()?;
            drop(span_cm!("parent.live"));
            // SAFETY: as above.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                child("while-live", Some(h));
            }
            wait(pid)?;
            h.shutdown(Duration::from_secs(5)).into_result()?;
            say("fork-resetup ok");
            Ok(())
        }
        // metrics recorded in a forked child never hang it
        "fork-metrics" => {
            let h = setup()?;
            let meter = h.meter();
            let counter = meter.u64_counter("fault.fork.count").build();
            let hist = meter.f64_histogram("fault.fork.hist").build();
            let stop = Arc::new(AtomicBool::new(false));
            let workers: Vec<_> = (0..2)
                .map(|_| {
                    let (c, hh, stop) = (counter.clone(), hist.clone(), stop.clone());
                    std::thread::spawn(move || {
                        let attrs = [lens::otel::KeyValue::new("k", "v")];
                        while !stop.load(Ordering::Relaxed) {
                            c.add(1, &attrs);
                            hh.record(0.5, &attrs);
                        }
                    })
                })
                .collect();
            let n: u32 = arg.unwrap_or("200").parse()?;
            let mut hung = 0;
            for _ in 0..n {
                // SAFETY: the child only records and exits.
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    // SAFETY: a watchdog: a hung child dies of SIGALRM
                    unsafe { libc::alarm(5) };
                    let attrs = [lens::otel::KeyValue::new("k", "child")];
                    for _ in 0..64 {
                        counter.add(1, &attrs);
                        hist.record(1.0, &attrs);
                    }
                    drop(span_cm!("child.span"));
                    let _ = h.shutdown(Duration::from_secs(2));
                    // SAFETY: leave the child at once.
                    unsafe { libc::_exit(0) };
                }
                let mut status = 0;
                // SAFETY: waiting for our child.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
                    hung += 1;
                }
            }
            stop.store(true, Ordering::Relaxed);
            for w in workers {
                let _ = w.join();
            }
            h.shutdown(Duration::from_secs(5)).into_result()?;
            say(&format!("children={n} hung={hung}"));
            Ok(())
        }
        // force_flush_within with a short deadline in a loop against a hung
        // collector: lens does not pile up threads
        "flush-loop" => {
            let h = setup()?;
            let threads = || std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count());
            let before = threads();
            let mut most = before;
            for i in 0..200 {
                drop(span_cm!("loop.span", i = i));
                let _ = h.force_flush_within(Duration::from_millis(10));
                most = most.max(threads());
            }
            say(&format!("threads before={before} most={most}"));
            let _ = h.shutdown(Duration::from_secs(1));
            Ok(())
        }
        // SIGTERM while shutdown exports: the shutdown's export completes
        // before the process dies by the signal
        "sigterm-in-shutdown" => {
            let out = std::path::PathBuf::from(arg.ok_or("sigterm-in-shutdown needs a path")?);
            let h = builder()?
                .with_span_exporter(NamesTo {
                    path: out,
                    delay: Duration::from_millis(1500),
                    panic_first: AtomicBool::new(false),
                })
                .install()?;
            for i in 0..5 {
                drop(span_cm!("slow.span", i = i));
            }
            std::thread::spawn(|| {
                std::thread::sleep(Duration::from_millis(200));
                // SAFETY: signalling ourselves.
                unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
            });
            let _ = h.shutdown(Duration::from_secs(8));
            say("shutdown returned");
            std::thread::sleep(Duration::from_secs(5));
            Err("not killed".into())
        }
        // an application handler without SA_RESTART: a blocking read is
        // still interrupted with EINTR once lens is set up
        "eintr" => {
            // SAFETY: a handler that stores an atomic, without SA_RESTART.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = app_handler as *const () as usize;
                libc::sigemptyset(&mut sa.sa_mask);
                sa.sa_flags = 0;
                libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
            }
            let _h = setup()?;
            let mut fds = [0; 2];
            // SAFETY: a pipe nobody writes to.
            unsafe { libc::pipe(fds.as_mut_ptr()) };
            say("ready");
            let mut b = [0u8; 1];
            // SAFETY: reading into a local buffer.
            let n = unsafe { libc::read(fds[0], b.as_mut_ptr().cast(), 1) };
            let errno = std::io::Error::last_os_error().raw_os_error();
            if n == -1 && errno == Some(libc::EINTR) && APP_GOT_SIGNAL.load(Ordering::SeqCst) {
                say("read interrupted");
                Ok(())
            } else {
                Err(format!("read returned {n}, errno {errno:?}").into())
            }
        }
        // a panicking exporter or metric callback does not stop export
        "panics" => {
            let out = std::path::PathBuf::from(arg.ok_or("panics needs a path")?);
            let h = builder()?
                .with_span_exporter(NamesTo {
                    path: out,
                    delay: Duration::ZERO,
                    panic_first: AtomicBool::new(true),
                })
                .install()?;
            let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
            let c2 = calls.clone();
            let _g = h
                .meter()
                .u64_observable_gauge("fault.gauge")
                .with_callback(move |o| {
                    if c2.fetch_add(1, Ordering::SeqCst) == 0 {
                        panic!("callback bug");
                    }
                    o.observe(1, &[]);
                })
                .build();
            drop(span_cm!("lost.span"));
            let _ = h.force_flush();
            drop(span_cm!("after.panic"));
            let flushed = h.force_flush().into_result();
            let _ = h.force_flush();
            let dropped = h.dropped_spans();
            say(&format!(
                "flush_ok={} dropped={dropped} callback_calls={}",
                flushed.is_ok(),
                calls.load(Ordering::SeqCst)
            ));
            h.shutdown(Duration::from_secs(5));
            Ok(())
        }
        // a shutdown that gives up frees what it gave up on: nothing more
        // is exported afterwards but the batch in flight
        "abandon" => {
            let out = std::path::PathBuf::from(arg.ok_or("abandon needs a path")?);
            let h = builder()?
                .with_span_exporter(NamesTo {
                    path: out.clone(),
                    delay: Duration::from_millis(300),
                    panic_first: AtomicBool::new(false),
                })
                .install()?;
            for i in 0..200 {
                drop(span_cm!("abandoned.span", i = i));
            }
            let count =
                || std::fs::read_to_string(&out).map_or(0, |t| t.matches("abandoned.span").count());
            let _ = h.shutdown(Duration::from_millis(500));
            let at_return = count();
            drop(h);
            std::thread::sleep(Duration::from_secs(2));
            say(&format!("exported at_return={at_return} later={}", count()));
            Ok(())
        }
        // a flush whose spans all failed reports it
        "flush-fails" => {
            let h = setup()?;
            for _ in 0..10 {
                drop(span_cm!("doomed"));
            }
            let r = h.force_flush().into_result();
            // marks, on stderr, where the flush returned
            eprintln!("flush-returned");
            say(&format!("flush_ok={}", r.is_ok()));
            let _ = h.shutdown(Duration::from_secs(2));
            Ok(())
        }
        // a one-shot (SA_RESETHAND) application handler: the second signal
        // kills, as without lens
        "resethand" => {
            // SAFETY: a one-shot handler that stores an atomic.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = app_handler as *const () as usize;
                libc::sigemptyset(&mut sa.sa_mask);
                sa.sa_flags = libc::SA_RESETHAND;
                libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
            }
            let _h = setup()?;
            say("ready");
            std::thread::sleep(Duration::from_secs(60));
            Err("not killed".into())
        }
        // one rank of a multi-rank job (rank and world size from the
        // launcher's variables): a job span, ended steps, then a wait for
        // the launcher's SIGTERM
        // rank, world and run id from the launcher alone
        "from-env" => {
            let h = lens::setup_telemetry_from_env()?;
            drop(span_cm!("from_env.job"));
            say(&format!("run_id={}", h.run_id()));
            h.shutdown(Duration::from_secs(10)).into_result()?;
            Ok(())
        }
        "rank" => {
            let var = |names: &[&str]| {
                names
                    .iter()
                    .find_map(|n| std::env::var(n).ok()?.parse::<u32>().ok())
            };
            let rank = var(&["OMPI_COMM_WORLD_RANK", "RANK"]).unwrap_or(0);
            let world = var(&["OMPI_COMM_WORLD_SIZE", "WORLD_SIZE"]).unwrap_or(1);
            let _h = TelemetryBuilder::new(LensConfig::from_env()?, rank, world).install()?;
            let _job = span_cm!("rank.job");
            for i in 0..5u64 {
                drop(managed_span!("step", "rank.step", "dl.iteration" = i));
            }
            say("ready");
            std::thread::sleep(Duration::from_secs(60));
            Err("not killed".into())
        }
        // a storm of log records into a small log queue: the losses are
        // reported, not a silent Ok
        "log-storm" => {
            use lens::tracing::tracing_subscriber::layer::SubscriberExt as _;
            let h = setup()?;
            let bridge = lens::logs::setup_logging_bridge(
                &h,
                lens::logs::LogBridgeOptions::new().with_target("storm"),
            )?;
            let subscriber = lens::tracing::tracing_subscriber::registry().with(bridge.layer());
            lens::tracing::tracing::subscriber::with_default(subscriber, || {
                for i in 0..20_000 {
                    lens::tracing::tracing::info!(target: "storm", i, "a record");
                }
            });
            let flushed = h.force_flush().into_result();
            let shut = h.shutdown(Duration::from_secs(5)).into_result();
            say(&format!(
                "flush={} shutdown={}",
                flushed.map_or_else(|e| e.to_string(), |()| "ok".into()),
                shut.map_or_else(|e| e.to_string(), |()| "ok".into())
            ));
            Ok(())
        }
        // SIGTERM during shutdown, then main returns at once: the process
        // still dies of the signal, not with status 0
        "sigterm-then-exit" => {
            let out = std::path::PathBuf::from(arg.ok_or("sigterm-then-exit needs a path")?);
            let h = builder()?
                .with_span_exporter(NamesTo {
                    path: out,
                    delay: Duration::from_millis(800),
                    panic_first: AtomicBool::new(false),
                })
                .install()?;
            drop(span_cm!("slow.span"));
            std::thread::spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                // SAFETY: signalling ourselves.
                unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
            });
            let _ = h.shutdown(Duration::from_secs(5));
            Ok(())
        }
        // SIGTERM taken by the application's own handler while two threads
        // record: lens's flush exports what has ended and returns, and the
        // process keeps recording; `arg` is the file lens writes, watched for
        // the flush's export (the batch delay is long: nothing else writes
        // it before shutdown)
        "keeps-running" => {
            let out = std::path::PathBuf::from(arg.ok_or("keeps-running needs the span file")?);
            // before lens, which chains to it (one installed after would
            // replace lens's handler in the kernel)
            install_app_sigaction(libc::SIGTERM);
            let h = setup()?;
            static STOP: AtomicBool = AtomicBool::new(false);
            // spans each thread has ended so far
            static ENDED: [std::sync::atomic::AtomicI64; 2] = [
                std::sync::atomic::AtomicI64::new(0),
                std::sync::atomic::AtomicI64::new(0),
            ];
            let workers: Vec<_> = (0..2i64)
                .map(|t| {
                    std::thread::spawn(move || {
                        let _parent = span_cm!("run.parent", "run.thread" = t);
                        let mut i = 0i64;
                        while !STOP.load(Ordering::SeqCst) {
                            let after = APP_GOT_SIGNAL.load(Ordering::SeqCst);
                            drop(managed_span!(
                                "step",
                                "run.span",
                                "run.thread" = t,
                                "run.seq" = i,
                                "run.after_signal" = after
                            ));
                            i += 1;
                            ENDED[t as usize].store(i, Ordering::SeqCst);
                            // thread 0 paced; thread 1 in bursts of more
                            // than a batch, so that it hands batches over
                            // while the flush takes them
                            match (t, i % 600) {
                                (0, _) => std::thread::sleep(Duration::from_micros(100)),
                                (_, 0) => std::thread::sleep(Duration::from_millis(30)),
                                _ => {}
                            }
                        }
                        i
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_millis(300));
            // every span counted here ended before the signal was sent
            let ended = [0, 1].map(|t| ENDED[t].load(Ordering::SeqCst));
            say(&format!("ready: ended {} {}", ended[0], ended[1]));
            let start = Instant::now();
            while !APP_GOT_SIGNAL.load(Ordering::SeqCst) {
                if start.elapsed() > Duration::from_secs(60) {
                    return Err("the application's handler never ran".into());
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            // the flush's export, once the file stops growing (nothing else
            // writes it before shutdown), kept aside for the test
            let flushed = Instant::now();
            let mut last = (0, Instant::now());
            loop {
                let len = std::fs::metadata(&out).map_or(0, |m| m.len());
                if len != last.0 {
                    last = (len, Instant::now());
                } else if len > 0 && last.1.elapsed() > Duration::from_millis(300) {
                    break;
                }
                if flushed.elapsed() > Duration::from_secs(20) {
                    return Err("the signal flush exported nothing".into());
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            std::fs::copy(&out, out.with_file_name("at-flush.jsonl"))?;
            say("flushed");
            // recording goes on after the flush
            std::thread::sleep(Duration::from_millis(300));
            STOP.store(true, Ordering::SeqCst);
            let mut total = 0;
            for w in workers {
                total += w.join().map_err(|_| "a worker panicked")?;
            }
            h.shutdown(Duration::from_secs(10))
                .into_result()
                .map_err(|e| format!("shutdown: {e}"))?;
            say(&format!("recorded {total}"));
            Ok(())
        }
        // the console exporter writing to a closed pipe in a program that
        // restored SIGPIPE's default
        "sigpipe" => {
            // SAFETY: restoring the default disposition, as many CLIs do.
            unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
            let h = setup()?;
            for _ in 0..10 {
                drop(span_cm!("piped"));
            }
            let _ = h.force_flush();
            let _ = h.shutdown(Duration::from_secs(2));
            let _ = writeln!(std::io::stderr(), "survived");
            std::process::exit(0);
        }
        other => Err(format!("unknown mode {other}").into()),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map_or("", String::as_str);
    if let Err(e) = run(mode, args.get(2).map(String::as_str)) {
        let _ = writeln!(
            std::io::stderr(),
            "lens-fault {mode}: {}",
            tests::error_chain(&*e)
        );
        std::process::exit(2);
    }
}
