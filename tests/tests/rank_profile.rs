//! Every rank's per-step phase profile under the default export strategy
//! (issue 40, item 4): with `NEMO_LENS_EXPORT_STRATEGY` unset
//! (`single_rank`: the last rank exports) and the `file` exporter, the ranks
//! that do not export each append one line per step to their own
//! `*.profile.jsonl`, with no thread and no socket of lens's.
//!
//! Each rank is this test binary run again as a child (`LENS_PROFILE_CHILD`
//! set, one test selected), with `RANK`/`WORLD_SIZE` as a launcher sets
//! them and nothing else from the developer's shell.
//!
//! With the `otlp` exporter (a collector, no shared files) a rank that does
//! not export holds the lines in memory, and the job's ranks gather them to
//! the exporting rank every few steps over the application's `Collective`
//! (`TelemetryHandle::gather_profiles`); here the collective is a small
//! TCP one between the children and this process (`hub`), which is also
//! the job's all-reduce barrier.
//!
//! ```text
//! cargo test -p tests --test rank_profile
//! # the cost per step on the calling thread (callgrind when installed,
//! # else wall time) and the bytes per step; a release build for numbers:
//! cargo test --release -p tests --test rank_profile -- --ignored --nocapture cost
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tests::{
    clean_command, file_spans, lens_cli_binary, run_with_timeout, run_with_timeout_and, sockets,
    threads, Finished, Rotel,
};

/// The phases of a step, in order: the direct children of `train.step`.
const PHASES: [&str; 4] = [
    "data.next_batch",
    "forward_backward",
    "allreduce.grads",
    "optimizer.step",
];
const STEPS: u64 = 20;
/// Steps of a job whose profiles are gathered.
const GATHER_STEPS: u64 = 30;
const WORLD: u32 = 4;
const TIMEOUT: Duration = Duration::from_secs(60);
/// Set in a child: what it does (`rank`, `hang`, `bench`).
const CHILD: &str = "LENS_PROFILE_CHILD";

// ---- the child ------------------------------------------------------------

/// Busy for about `us` microseconds (no syscall: no scheduling noise).
fn work(us: u64) {
    let end = Instant::now() + Duration::from_micros(us);
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// One training step: `train.step` (group `step`) and its four phases.
#[inline(never)]
fn one_step(i: u64, us: u64) {
    let _step = lens::managed_span!("step", "train.step", "dl.iteration" = i as i64);
    for p in PHASES {
        let _s = lens::span_cm!(p);
        work(us);
    }
}

/// A [`lens::propagation::Collective`] over TCP: every broadcast goes
/// through the parent's [`hub`] (each rank sends `root`, a length and its
/// bytes; the hub answers every rank with the root's bytes).
struct TcpCollective {
    rank: usize,
    size: usize,
    stream: std::sync::Mutex<std::net::TcpStream>,
}

impl TcpCollective {
    fn connect(addr: &str, rank: usize, size: usize) -> TcpCollective {
        use std::io::Write;
        let mut stream = std::net::TcpStream::connect(addr).expect("connect to the hub");
        stream.set_nodelay(true).unwrap();
        stream.write_all(&(rank as u32).to_le_bytes()).unwrap();
        TcpCollective {
            rank,
            size,
            stream: std::sync::Mutex::new(stream),
        }
    }
}

impl lens::propagation::Collective for TcpCollective {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn broadcast_bytes(
        &self,
        root: usize,
        data: Vec<u8>,
    ) -> Result<Vec<u8>, lens::propagation::CollectiveError> {
        use std::io::{Read, Write};
        let err = |e: std::io::Error| lens::propagation::CollectiveError(e.to_string());
        let mut s = self.stream.lock().unwrap();
        let data = if self.rank == root { data } else { Vec::new() };
        s.write_all(&(root as u32).to_le_bytes()).map_err(err)?;
        s.write_all(&(data.len() as u64).to_le_bytes())
            .map_err(err)?;
        s.write_all(&data).map_err(err)?;
        let mut len = [0u8; 8];
        s.read_exact(&mut len).map_err(err)?;
        let mut out = vec![0u8; u64::from_le_bytes(len) as usize];
        s.read_exact(&mut out).map_err(err)?;
        Ok(out)
    }
}

/// The parent's side of [`TcpCollective`]: accepts `world` ranks, then
/// answers broadcast after broadcast until the ranks hang up. Returns the
/// address and the thread (which returns the broadcasts served).
fn hub(world: usize) -> (String, std::thread::JoinHandle<u64>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let t = std::thread::spawn(move || {
        let mut ranks: Vec<Option<std::net::TcpStream>> = (0..world).map(|_| None).collect();
        for _ in 0..world {
            let (mut s, _) = listener.accept().unwrap();
            s.set_nodelay(true).unwrap();
            s.set_read_timeout(Some(TIMEOUT)).unwrap();
            let mut r = [0u8; 4];
            s.read_exact(&mut r).unwrap();
            ranks[u32::from_le_bytes(r) as usize] = Some(s);
        }
        let mut ranks: Vec<_> = ranks.into_iter().map(Option::unwrap).collect();
        let mut served = 0;
        loop {
            let mut root = None;
            let mut payload = Vec::new();
            for (r, s) in ranks.iter_mut().enumerate() {
                let mut head = [0u8; 12];
                if s.read_exact(&mut head).is_err() {
                    return served; // the job is over
                }
                let want = u32::from_le_bytes(head[..4].try_into().unwrap()) as usize;
                let len = u64::from_le_bytes(head[4..].try_into().unwrap()) as usize;
                let mut data = vec![0u8; len];
                s.read_exact(&mut data).unwrap();
                assert!(root.is_none_or(|x| x == want), "ranks disagree on the root");
                root = Some(want);
                if r == want {
                    payload = data;
                }
            }
            for s in &mut ranks {
                s.write_all(&(payload.len() as u64).to_le_bytes()).unwrap();
                s.write_all(&payload).unwrap();
            }
            served += 1;
        }
    });
    (addr, t)
}

/// A rank of a synchronized job whose profiles are gathered: the phases of
/// [`one_step`], `allreduce.grads` a barrier over the hub's collective,
/// `data.next_batch` slower on `LENS_SLOW_RANK`, a gather every 5 steps
/// and before shutdown.
fn gather_child() {
    use lens::propagation::Collective;
    let rank: usize = std::env::var("RANK").unwrap().parse().unwrap();
    let world: usize = std::env::var("WORLD_SIZE").unwrap().parse().unwrap();
    let comm = TcpCollective::connect(&std::env::var("LENS_GATHER_HUB").unwrap(), rank, world);
    let slow: Option<usize> = std::env::var("LENS_SLOW_RANK")
        .ok()
        .and_then(|v| v.parse().ok());
    let t0 = threads();
    let s0 = sockets();
    let handle = lens::setup_telemetry_from_env().expect("setup");
    let (t1, s1) = (threads(), sockets());
    let new: Vec<_> = t1.keys().filter(|t| !t0.contains_key(*t)).collect();
    println!(
        "exporting={} new_threads={} new_sockets={}",
        handle.is_exporting(),
        new.len(),
        s1.saturating_sub(s0)
    );
    let mut moved = 0;
    for i in 0..GATHER_STEPS {
        let _step = lens::managed_span!("step", "train.step", "dl.iteration" = i as i64);
        {
            let _s = lens::span_cm!("data.next_batch");
            work(if slow == Some(rank) { 6_000 } else { 500 });
        }
        {
            let _s = lens::span_cm!("forward_backward");
            work(1_000);
        }
        {
            let _s = lens::span_cm!("allreduce.grads");
            comm.broadcast_bytes(0, Vec::new()).expect("barrier");
        }
        {
            let _s = lens::span_cm!("optimizer.step");
            work(300);
        }
        drop(_step);
        if i % 5 == 4 {
            moved += handle.gather_profiles(&comm).expect("gather");
        }
    }
    moved += handle.gather_profiles(&comm).expect("gather");
    if !handle.is_exporting() {
        assert_eq!(s1, s0, "a non-exporting rank opened a socket");
        assert!(new.is_empty(), "a non-exporting rank started a thread");
        assert_eq!(
            sockets(),
            s0,
            "a non-exporting rank opened a socket while it ran"
        );
    }
    println!("moved={moved}");
    let report = handle.shutdown(Duration::from_secs(10));
    println!(
        "report exported={} lost={} clean={}",
        report.traces.exported,
        report.traces.lost,
        report.is_clean()
    );
    assert!(report.is_clean(), "{report}");
    println!("child done");
}

/// The body of a child: one rank.
fn child(mode: &str) {
    if mode == "gather" {
        return gather_child();
    }
    let t0 = threads();
    let s0 = sockets();
    let handle = lens::setup_telemetry_from_env().expect("setup");
    let t1 = threads();
    let s1 = sockets();
    let new: Vec<_> = t1
        .iter()
        .filter(|(tid, _)| !t0.contains_key(*tid))
        .map(|(_, n)| n.clone())
        .collect();
    println!(
        "exporting={} profile={:?} new_threads={new:?} new_sockets={}",
        handle.is_exporting(),
        handle.profile_path(),
        s1.saturating_sub(s0)
    );
    if !handle.is_exporting() && mode == "rank" {
        assert!(new.is_empty(), "a non-exporting rank started {new:?}");
        assert_eq!(s1, s0, "a non-exporting rank opened a socket");
    }
    match mode {
        "hang" => {
            for i in 0..3 {
                one_step(i, 200);
            }
            let _step = lens::managed_span!("step", "train.step", "dl.iteration" = 3i64);
            {
                let _s = lens::span_cm!("data.next_batch");
                work(200);
            }
            let _s = lens::span_cm!("forward_backward");
            println!("hanging");
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        "bench" => {
            let n: u64 = std::env::var("LENS_PROFILE_BENCH_STEPS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(10_000);
            for i in 0..100 {
                one_step(i, 0);
            }
            let start = Instant::now();
            for i in 0..n {
                one_step(100 + i, 0);
            }
            let ns = start.elapsed().as_nanos() / u128::from(n.max(1));
            println!("bench steps={n} ns_per_step={ns}");
        }
        _ => {
            for i in 0..STEPS {
                one_step(i, 300);
            }
        }
    }
    let s2 = sockets();
    let report = handle.shutdown(Duration::from_secs(10));
    println!(
        "report exported={} lost={} clean={}",
        report.traces.exported,
        report.traces.lost,
        report.is_clean()
    );
    if !handle.is_exporting() && mode == "rank" {
        assert_eq!(s2, s0, "a non-exporting rank opened a socket while it ran");
        if handle.profile_path().is_some() {
            assert_eq!(report.traces.exported, STEPS, "one line per step");
            assert!(report.is_clean(), "{report}");
        }
    }
    println!("child done");
}

/// The entry point of every child: the parent runs it with `--exact`.
#[test]
fn profile_child() {
    if let Ok(mode) = std::env::var(CHILD) {
        child(&mode);
    }
}

// ---- the parent -----------------------------------------------------------

/// A fresh empty directory.
fn job_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lens-rank-profile-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// This binary as rank `rank` of `WORLD` in `cwd`: telemetry on, the
/// `file` exporter, every group, the default export strategy.
fn rank_command(mode: &str, rank: u32, cwd: &Path, envs: &[(&str, &str)]) -> Command {
    let exe = std::env::current_exe().expect("test binary");
    let mut cmd = clean_command(&exe);
    for k in ["RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_RANK"] {
        cmd.env_remove(k);
    }
    cmd.current_dir(cwd)
        .args([
            "profile_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, mode)
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", WORLD.to_string())
        .env("NEMO_LENS_ENABLED", "1")
        .env("NEMO_LENS_EXPORTER", "file")
        .env("NEMO_LENS_SPAN_GROUPS", "all")
        .env("NEMO_LENS_RUN_ID", "job-1")
        .env("NEMO_LENS_QUIET", "1");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd
}

#[track_caller]
fn assert_ok(f: &Finished) {
    assert!(
        f.status.success() && !f.timed_out && f.stdout.contains("child done"),
        "the rank failed ({:?}, timed out: {})\nstdout:\n{}\nstderr:\n{}",
        f.status,
        f.timed_out,
        f.stdout,
        f.stderr
    );
}

/// The `lensProfile` objects of a profile file.
fn profile_lines(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
            v["lensProfile"].clone()
        })
        .collect()
}

#[test]
fn single_rank_file_job_leaves_every_rank_s_profile() {
    let dir = job_dir("job");
    // the ranks run side by side, as a job's would
    let handles: Vec<_> = (0..WORLD)
        .map(|r| {
            let mut cmd = rank_command("rank", r, &dir, &[]);
            std::thread::spawn(move || run_with_timeout(&mut cmd, TIMEOUT))
        })
        .collect();
    let finished: Vec<Finished> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for f in &finished {
        assert_ok(f);
    }
    let tel = dir.join("lens-telemetry");
    let otlp = |r: u32| tel.join(format!("job-1-rank{r}.otlp.jsonl"));
    let prof = |r: u32| tel.join(format!("job-1-rank{r}.profile.jsonl"));
    // the last rank exports spans and keeps no profile
    assert!(finished[3].stdout.contains("exporting=true"));
    assert!(!prof(3).exists(), "the exporting rank wrote a profile");
    let spans = file_spans(&otlp(3));
    assert_eq!(
        spans.iter().filter(|s| s.name == "train.step").count(),
        STEPS as usize
    );
    for r in 0..WORLD - 1 {
        let f = &finished[r as usize];
        assert!(
            f.stdout.contains("exporting=false") && f.stdout.contains("new_threads=[]"),
            "{}",
            f.stdout
        );
        assert!(f.stdout.contains("new_sockets=0"), "{}", f.stdout);
        assert!(!otlp(r).exists(), "rank {r} wrote an OTLP file");
        let path = prof(r);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
        let lines = profile_lines(&path);
        assert_eq!(lines.len(), STEPS as usize, "one line per step");
        let bytes = std::fs::metadata(&path).unwrap().len();
        println!(
            "rank {r}: {} bytes for {STEPS} steps ({} per step)",
            bytes,
            bytes / STEPS
        );
        assert!(bytes / STEPS < 600, "a few hundred bytes per step");
        for (i, v) in lines.iter().enumerate() {
            assert_eq!(v["v"], 1);
            assert_eq!(v["run"], "job-1");
            assert_eq!(v["rank"], r);
            assert_eq!(v["world"], WORLD);
            assert!(v["host"].is_string());
            assert_eq!(v["step"], "train.step");
            assert_eq!(v["it"], i as u64, "{v}");
            assert_eq!(v["id"].as_str().unwrap().len(), 16);
            assert!(v["t"].as_str().unwrap().parse::<u64>().unwrap() > 0);
            assert!(v.get("open").is_none());
            let phases = v["phases"].as_array().unwrap();
            let names: Vec<_> = phases.iter().map(|p| p["n"].as_str().unwrap()).collect();
            assert_eq!(names, PHASES, "{v}");
            let step_d = v["d"].as_u64().unwrap();
            let mut prev_end = 0;
            for p in phases {
                let (o, d) = (p["o"].as_u64().unwrap(), p["d"].as_u64().unwrap());
                assert!(d >= 250_000, "each phase works 300 µs: {p}");
                assert!(o >= prev_end && o + d <= step_d, "{v}");
                prev_end = o + d;
                assert!(p.get("open").is_none());
            }
        }
    }
}

/// Runs a `WORLD`-rank synchronized job of [`gather_child`]s in `dir`,
/// rank 1 slow in `data.next_batch`; `envs` for every rank, `last` for the
/// exporting (last) rank only.
fn gather_job(dir: &Path, envs: &[(&str, &str)], last: &[(&str, &str)]) -> Vec<Finished> {
    let (addr, hub) = hub(WORLD as usize);
    let handles: Vec<_> = (0..WORLD)
        .map(|r| {
            let mut e: Vec<(&str, &str)> = envs.to_vec();
            if r == WORLD - 1 {
                e.extend_from_slice(last);
            }
            e.push(("LENS_GATHER_HUB", &addr));
            e.push(("LENS_SLOW_RANK", "1"));
            let mut cmd = rank_command("gather", r, dir, &e);
            std::thread::spawn(move || run_with_timeout(&mut cmd, TIMEOUT))
        })
        .collect();
    let finished: Vec<Finished> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for f in &finished {
        assert_ok(f);
    }
    let served = hub.join().unwrap();
    assert!(served >= GATHER_STEPS, "the barrier ran: {served}");
    finished
}

/// `moved=<n>` of a child's output.
fn moved(f: &Finished) -> u64 {
    f.stdout
        .split("moved=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no moved= in {}", f.stdout))
}

/// The default strategy with the OTLP exporter and a real collector: the
/// ranks that do not export open no connection and start no thread, hold
/// their profiles in memory, and the gathers bring every step of every
/// rank to the collector as `lens.profile` carrier spans of the last rank.
#[test]
fn otlp_job_gathers_every_rank_s_profile_to_the_collector() {
    let dir = job_dir("gather-otlp");
    let rotel = Rotel::start();
    let endpoint = rotel.grpc_endpoint();
    let envs = [
        ("NEMO_LENS_EXPORTER", "otlp"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
    ];
    let finished = gather_job(&dir, &envs, &[]);
    assert!(finished[3].stdout.contains("exporting=true"));
    for f in &finished[..3] {
        assert!(f.stdout.contains("exporting=false"), "{}", f.stdout);
        assert!(
            f.stdout.contains("new_threads=0 new_sockets=0"),
            "{}",
            f.stdout
        );
        assert_eq!(moved(f), GATHER_STEPS, "every step sent once: {}", f.stdout);
    }
    assert_eq!(moved(&finished[3]), 3 * GATHER_STEPS);
    let got = rotel.wait_for(Duration::from_secs(20), "the carrier spans", |r| {
        !r.spans_named("lens.profile").is_empty() && !r.spans_named("train.step").is_empty()
    });
    let carriers = got.spans_named("lens.profile");
    let text: String = carriers
        .iter()
        .map(|s| tests::get(&s.attributes, "lens.profile.lines").unwrap_or(""))
        .collect();
    // every step line of ranks 0, 1 and 2 arrived once (the collector
    // prints the strings as they are)
    for r in 0..3 {
        for it in 0..GATHER_STEPS {
            let needle = format!("\"rank\":{r},");
            let step = format!("\"it\":{it},");
            let n = text
                .split("lensProfile")
                .filter(|l| l.contains(&needle) && l.contains(&step))
                .count();
            assert_eq!(
                n,
                1,
                "rank {r} step {it} in {}",
                &text[..text.len().min(2000)]
            );
        }
    }
    assert_eq!(got.spans_named("train.step").len(), GATHER_STEPS as usize);
}

/// The same job with the exporting rank writing its spans (and the
/// carriers) to a file, as a collector's file output would: `lens report`
/// names the slow rank and its phase from the gathered profiles.
#[test]
fn gathered_profiles_reach_the_report_and_name_the_slow_rank() {
    let dir = job_dir("gather-report");
    // the other ranks' exporter is otlp with nothing listening: they never
    // connect (a connection refused would show as a loss at shutdown)
    let port = tests::free_port().to_string();
    let endpoint = format!("http://127.0.0.1:{port}");
    let envs = [
        ("NEMO_LENS_EXPORTER", "otlp"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
    ];
    let finished = gather_job(&dir, &envs, &[("NEMO_LENS_EXPORTER", "file")]);
    assert_eq!(moved(&finished[3]), 3 * GATHER_STEPS);
    let tel = dir.join("lens-telemetry");
    let names: Vec<_> = std::fs::read_dir(&tel)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["job-1-rank3.otlp.jsonl"],
        "one file, no profile files"
    );
    let out = Command::new(lens_cli_binary())
        .args(["report", "--json"])
        .arg(&tel)
        .output()
        .expect("run lens report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ranks: Vec<u64> = report["ranks"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["rank"].as_u64()).collect())
        .unwrap_or_default();
    assert_eq!(
        ranks,
        [0, 1, 2, 3],
        "every rank is in the report: {}",
        report["ranks"]
    );
    let first = &report["suspects"][0];
    assert_eq!(first["rank"], 1, "{:#}", report["suspects"]);
    assert_eq!(
        first["phase"], "data.next_batch",
        "{:#}",
        report["suspects"]
    );
    assert_eq!(first["kind"], "straggler");
    let spans = file_spans(&tel.join("job-1-rank3.otlp.jsonl"));
    assert!(spans.iter().any(|s| s.name == "lens.profile"));
}

#[test]
fn profile_off_writes_nothing_on_a_non_exporting_rank() {
    let dir = job_dir("off");
    let f = run_with_timeout(
        &mut rank_command("rank", 0, &dir, &[("NEMO_LENS_PROFILE", "0")]),
        TIMEOUT,
    );
    assert_ok(&f);
    assert!(f.stdout.contains("profile=None"), "{}", f.stdout);
    assert!(!dir.join("lens-telemetry").exists());
    // a bad value is an error naming the variable
    let f = run_with_timeout(
        &mut rank_command("rank", 0, &dir, &[("NEMO_LENS_PROFILE", "maybe")]),
        TIMEOUT,
    );
    assert!(!f.status.success());
    assert!(
        f.stdout.contains("NEMO_LENS_PROFILE") || f.stderr.contains("NEMO_LENS_PROFILE"),
        "{}\n{}",
        f.stdout,
        f.stderr
    );
}

#[test]
fn a_file_path_without_rank_gets_one_per_rank_profile() {
    let dir = job_dir("path");
    let f = run_with_timeout(
        &mut rank_command(
            "rank",
            1,
            &dir,
            &[("NEMO_LENS_FILE_PATH", "out/spans.jsonl")],
        ),
        TIMEOUT,
    );
    assert_ok(&f);
    let lines = profile_lines(&dir.join("out/spans.rank1.profile.jsonl"));
    assert_eq!(lines.len(), STEPS as usize);
}

#[test]
fn sigterm_leaves_the_open_step_and_phase_in_the_profile() {
    use std::os::unix::process::CommandExt;
    let dir = job_dir("hang");
    let mut cmd = rank_command("hang", 1, &dir, &[("NEMO_LENS_FLUSH_ON_SIGNAL", "1")]);
    // SAFETY: `signal` is async-signal-safe, fine between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            Ok(())
        });
    }
    let f = run_with_timeout_and(&mut cmd, TIMEOUT, |child, wait_line| {
        assert!(wait_line("hanging"), "the rank never reached its hang");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    });
    assert!(!f.timed_out, "{}\n{}", f.stdout, f.stderr);
    assert_eq!(
        f.signal(),
        Some(libc::SIGTERM),
        "{}\n{}",
        f.stdout,
        f.stderr
    );
    let lines = profile_lines(&dir.join("lens-telemetry/job-1-rank1.profile.jsonl"));
    assert_eq!(lines.len(), 4, "three steps, then the open one");
    let last = &lines[3];
    assert_eq!(last["it"], 3);
    assert_eq!(last["open"], true, "{last}");
    let phases = last["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2, "{last}");
    assert_eq!(phases[0]["n"], "data.next_batch");
    assert!(phases[0].get("open").is_none());
    assert_eq!(phases[1]["n"], "forward_backward");
    assert_eq!(phases[1]["open"], true);
}

/// The cost of the profile per step on the calling thread, and its bytes:
/// a non-exporting rank with the profile on, against the same rank with it
/// off (what a non-exporting rank cost before). Under callgrind when it is
/// installed (instructions in `one_step`, inclusive), else wall time.
#[test]
#[ignore = "a measurement: run with --ignored --nocapture (release for numbers)"]
fn cost_per_step_and_bytes() {
    let steps = 2_000u64;
    let callgrind = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    // `LENS_PROFILE_COST_EXPORTER=otlp`: the profile held in memory (no
    // gather: what every step costs between two gathers)
    let exporter = std::env::var("LENS_PROFILE_COST_EXPORTER").unwrap_or_else(|_| "file".into());
    let envs = |profile: &'static str| -> Vec<(&'static str, String)> {
        vec![
            ("NEMO_LENS_PROFILE", profile.to_owned()),
            ("NEMO_LENS_EXPORTER", exporter.clone()),
        ]
    };
    let run = |profile: &'static str, tag: &str| -> (Option<u64>, u64, u64) {
        let e = envs(profile);
        let e: Vec<(&str, &str)> = e.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let dir = job_dir(tag);
        let mut cmd = rank_command("bench", 0, &dir, &e);
        cmd.env("LENS_PROFILE_BENCH_STEPS", steps.to_string());
        let wall = run_with_timeout(&mut cmd, Duration::from_secs(300));
        assert_ok(&wall);
        let ns: u64 = wall
            .stdout
            .split("ns_per_step=")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let bytes = std::fs::metadata(dir.join("lens-telemetry/job-1-rank0.profile.jsonl"))
            .map_or(0, |m| m.len());
        let mut ir = None;
        if callgrind {
            let out = dir.join("callgrind.out");
            let exe = std::env::current_exe().unwrap();
            let vg = rank_command("bench", 0, &dir, &e);
            let args: Vec<_> = vg.get_args().map(|a| a.to_owned()).collect();
            let mut cmd = Command::new("valgrind");
            for (k, v) in vg.get_envs() {
                match v {
                    Some(v) => cmd.env(k, v),
                    None => cmd.env_remove(k),
                };
            }
            cmd.current_dir(&dir)
                .env("LENS_PROFILE_BENCH_STEPS", steps.to_string())
                .arg("--tool=callgrind")
                .arg(format!("--callgrind-out-file={}", out.display()))
                .arg("--toggle-collect=*one_step*")
                .arg(&exe)
                .args(args);
            let f = run_with_timeout(&mut cmd, Duration::from_secs(600));
            assert_ok(&f);
            let text = std::fs::read_to_string(&out).unwrap_or_default();
            // the `summary:` (or `totals:`) line: instructions collected
            ir = text
                .lines()
                .find(|l| l.starts_with("summary:") || l.starts_with("totals:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok());
        }
        (ir, ns, bytes)
    };
    let (ir_on, ns_on, bytes) = run("1", "cost-on");
    let (ir_off, ns_off, _) = run("0", "cost-off");
    // the warm-up steps are collected too
    let per = |ir: Option<u64>| ir.map(|i| i / (steps + 100));
    println!(
        "exporter {exporter}: profile on: {:?} instructions/step, {ns_on} ns/step; off: {:?} instructions/step, \
         {ns_off} ns/step; {} bytes/step",
        per(ir_on),
        per(ir_off),
        bytes / (steps + 100)
    );
}
