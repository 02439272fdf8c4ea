//! A synchronized data-parallel training job: one process per rank, a real
//! barrier between them over TCP standing in for the gradient all-reduce
//! (as gloo or NCCL would block), and faults injected from the environment.
//! Shipped with the `nemo-lens` crate.
//!
//! ```text
//! # 8 ranks, 40 steps, every rank exporting OTLP JSON lines to lens-telemetry/
//! NEMO_LENS_ENABLED=1 NEMO_LENS_EXPORTER=file NEMO_LENS_EXPORT_STRATEGY=all_ranks \
//!   NEMO_LENS_SPAN_GROUPS=all cargo run -p nemo-lens --example ddp_sync -- --world 8
//! lens report lens-telemetry/
//! # the same, in one command (a fresh run directory, then the report)
//! lens record -- cargo run -p nemo-lens --example ddp_sync -- --world 8
//! ```
//!
//! Each step is a `train.step` span (group `step`, attribute `dl.iteration`)
//! whose direct children are, in order, `data.next_batch`,
//! `forward_backward`, `allreduce.grads` and `optimizer.step` (always-on
//! spans). Every phase does a small fixed amount of work (a sleep of 2-4 ms
//! and a short CPU spin; a step is ~12 ms). `allreduce.grads` is a barrier
//! among all ranks: a rank that is late anywhere in the step makes every
//! other rank wait there, so its delay shows up as their `allreduce.grads`
//! time, not as a longer step of its own (a delay in `optimizer.step`, after
//! the barrier, shows up in the *next* step's wait).
//!
//! **Launcher mode.** Without `RANK` in the environment the example starts
//! itself `--world N` times (default 4) with `RANK`, `WORLD_SIZE`,
//! `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT` (a free
//! port) and one `NEMO_LENS_RUN_ID` (kept when already set), as torchrun
//! would; waits for all; exits non-zero when a rank failed; and forwards
//! SIGTERM/SIGINT to the ranks (which, with `NEMO_LENS_FLUSH_ON_SIGNAL=1`,
//! end their open spans marked `nemo.span.truncated` and flush them).
//! `--steps N` (default 40) sets the number of steps. Started by a launcher
//! of your own (`RANK` set), it is one rank: rank 0 serves the barrier on
//! `MASTER_ADDR:MASTER_PORT` (default 127.0.0.1:29500) and every rank,
//! rank 0 included, connects to it.
//!
//! **Faults**, from the environment (phases: `data.next_batch`,
//! `forward_backward`, `allreduce.grads` (before the barrier),
//! `optimizer.step`):
//!
//! * `DDP_SLOW_RANK=r DDP_SLOW_PHASE=name DDP_SLOW_MS=ms`: rank `r` sleeps
//!   `ms` more inside phase `name`; with `DDP_SLOW_EVERY=k` only on every
//!   k-th step (steps `k-1`, `2k-1`, ...), with `DDP_SLOW_STEPS=a-b` only on
//!   steps `a..=b`. A second fault: `DDP_SLOW2_RANK`, `DDP_SLOW2_PHASE`,
//!   `DDP_SLOW2_MS` (and `DDP_SLOW2_EVERY`, `DDP_SLOW2_STEPS`).
//! * `DDP_HANG_RANK=r DDP_HANG_PHASE=name DDP_HANG_STEP=i`: rank `r` sleeps
//!   forever inside phase `name` of step `i`; the other ranks then block in
//!   `allreduce.grads` until the job is signalled.
//! * `DDP_JITTER_MS=j`: every phase of every rank sleeps a random `0..j` ms
//!   more (a balanced control with scheduling noise).
//!
//! ```text
//! export NEMO_LENS_ENABLED=1 NEMO_LENS_EXPORTER=file NEMO_LENS_EXPORT_STRATEGY=all_ranks \
//!   NEMO_LENS_SPAN_GROUPS=all
//! # rank 5 is 8 ms late loading data: 7 ranks wait ~8 ms in allreduce.grads
//! DDP_SLOW_RANK=5 DDP_SLOW_PHASE=data.next_batch DDP_SLOW_MS=8 \
//!   cargo run -p nemo-lens --example ddp_sync -- --world 8
//! # rank 6 is slow in the optimizer on every 4th step of steps 10-30
//! DDP_SLOW_RANK=6 DDP_SLOW_PHASE=optimizer.step DDP_SLOW_MS=10 DDP_SLOW_EVERY=4 \
//!   DDP_SLOW_STEPS=10-30 cargo run -p nemo-lens --example ddp_sync -- --world 8
//! # two slow ranks
//! DDP_SLOW_RANK=2 DDP_SLOW_PHASE=forward_backward DDP_SLOW_MS=12 \
//!   DDP_SLOW2_RANK=6 DDP_SLOW2_PHASE=data.next_batch DDP_SLOW2_MS=6 \
//!   cargo run -p nemo-lens --example ddp_sync -- --world 8
//! # rank 4 hangs in forward_backward at step 5; stop it with Ctrl-C (or
//! # `kill -TERM <launcher pid>`): each rank flushes its open spans
//! NEMO_LENS_FLUSH_ON_SIGNAL=1 DDP_HANG_RANK=4 DDP_HANG_PHASE=forward_backward \
//!   DDP_HANG_STEP=5 cargo run -p nemo-lens --example ddp_sync -- --world 8
//! # a balanced control with up to 3 ms of noise in every phase
//! DDP_JITTER_MS=3 cargo run -p nemo-lens --example ddp_sync -- --world 8
//! ```
//!
//! Each rank prints `rank R/W: barrier connected` once it has joined the
//! barrier and `rank R/W: done` at the end.

use lens::{managed_span, span_cm};
use std::error::Error;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The phases of a step, in order.
const PHASES: [&str; 4] = [
    "data.next_batch",
    "forward_backward",
    "allreduce.grads",
    "optimizer.step",
];
/// Sleep (ms) and CPU spin (µs) of each phase, in [`PHASES`] order.
const WORK: [(u64, u64); 4] = [(2, 300), (4, 1000), (1, 100), (2, 300)];
/// How long a rank keeps trying to reach the barrier server.
const CONNECT_FOR: Duration = Duration::from_secs(20);
/// How long the barrier server waits for every rank to connect.
const ACCEPT_FOR: Duration = Duration::from_secs(60);
/// How long a rank whose barrier went away waits before it exits.
const PEER_GONE_GRACE: Duration = Duration::from_secs(2);

type Res<T> = Result<T, Box<dyn Error>>;

fn main() {
    let args = match Args::parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ddp_sync: {e}\nusage: ddp_sync [--world N] [--steps N]");
            std::process::exit(2);
        }
    };
    let faults = match Faults::from_env() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("ddp_sync: {e}");
            std::process::exit(2);
        }
    };
    let code = if std::env::var_os("RANK").is_none() {
        launch(&args)
    } else {
        rank_main(&args, &faults)
    };
    std::process::exit(code);
}

// ---------------------------------------------------------------- arguments

#[derive(Debug)]
struct Args {
    world: u32,
    steps: u64,
}

impl Args {
    fn parse() -> Res<Args> {
        let mut a = Args {
            world: 4,
            steps: 40,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = |name: &str| -> Res<u64> {
                let v = it.next().ok_or_else(|| format!("{name} needs a value"))?;
                Ok(v.parse()
                    .map_err(|_| format!("{name}: not a number: {v}"))?)
            };
            match flag.as_str() {
                "--world" => a.world = u32::try_from(value("--world")?)?,
                "--steps" => a.steps = value("--steps")?,
                other => return Err(format!("unknown argument {other:?}").into()),
            }
        }
        if a.world == 0 {
            return Err("--world must be at least 1".into());
        }
        Ok(a)
    }
}

// ------------------------------------------------------------------- faults

/// One injected delay.
#[derive(Debug, Clone)]
struct Slow {
    rank: u32,
    phase: usize,
    ms: u64,
    every: Option<u64>,
    steps: Option<(u64, u64)>,
}

impl Slow {
    fn applies(&self, rank: u32, phase: usize, step: u64) -> bool {
        self.rank == rank
            && self.phase == phase
            && self.every.is_none_or(|k| (step + 1).is_multiple_of(k))
            && self.steps.is_none_or(|(a, b)| (a..=b).contains(&step))
    }
}

#[derive(Debug, Clone, Default)]
struct Faults {
    slow: Vec<Slow>,
    /// (rank, phase, step)
    hang: Option<(u32, usize, u64)>,
    jitter_ms: u64,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn env_num(name: &str) -> Res<Option<u64>> {
    env(name)
        .map(|v| {
            v.trim()
                .parse()
                .map_err(|_| format!("{name}: not a number: {v}").into())
        })
        .transpose()
}

fn phase_index(var: &str) -> Res<usize> {
    let name = env(var).ok_or_else(|| format!("{var} is required with the fault"))?;
    PHASES
        .iter()
        .position(|p| *p == name.trim())
        .ok_or_else(|| format!("{var}: unknown phase {name:?} (one of {PHASES:?})").into())
}

impl Faults {
    fn from_env() -> Res<Faults> {
        let mut f = Faults::default();
        for prefix in ["DDP_SLOW", "DDP_SLOW2"] {
            let Some(rank) = env_num(&format!("{prefix}_RANK"))? else {
                continue;
            };
            let steps = env(&format!("{prefix}_STEPS"))
                .map(|s| -> Res<(u64, u64)> {
                    let (a, b) = s
                        .split_once('-')
                        .ok_or_else(|| format!("{prefix}_STEPS: want a-b, got {s:?}"))?;
                    Ok((a.trim().parse()?, b.trim().parse()?))
                })
                .transpose()?;
            f.slow.push(Slow {
                rank: u32::try_from(rank)?,
                phase: phase_index(&format!("{prefix}_PHASE"))?,
                ms: env_num(&format!("{prefix}_MS"))?
                    .ok_or_else(|| format!("{prefix}_MS is required with {prefix}_RANK"))?,
                every: env_num(&format!("{prefix}_EVERY"))?.filter(|k| *k > 0),
                steps,
            });
        }
        if let Some(rank) = env_num("DDP_HANG_RANK")? {
            f.hang = Some((
                u32::try_from(rank)?,
                phase_index("DDP_HANG_PHASE")?,
                env_num("DDP_HANG_STEP")?.unwrap_or(0),
            ));
        }
        f.jitter_ms = env_num("DDP_JITTER_MS")?.unwrap_or(0);
        Ok(f)
    }
}

// ------------------------------------------------------------------ barrier

/// Rank 0's barrier server: accepts one connection per rank (each sends its
/// rank as 4 bytes), then per step reads one byte from every rank and writes
/// one byte back to each. When a rank goes away, or not all ranks connect in
/// time, it closes every connection, so no rank waits for ever.
fn serve_barrier(listener: TcpListener, world: u32, steps: u64) {
    let mut conns: Vec<(u32, TcpStream)> = Vec::new();
    let deadline = Instant::now() + ACCEPT_FOR;
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    while conns.len() < world as usize {
        match listener.accept() {
            Ok((mut s, _)) => {
                let mut rank = [0u8; 4];
                let ok = s.set_nonblocking(false).is_ok()
                    && s.set_nodelay(true).is_ok()
                    && s.set_read_timeout(Some(Duration::from_secs(10))).is_ok()
                    && s.read_exact(&mut rank).is_ok()
                    && s.set_read_timeout(None).is_ok();
                if ok {
                    conns.push((u32::from_le_bytes(rank), s));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    eprintln!(
                        "ddp_sync barrier: only {} of {world} ranks connected in {ACCEPT_FOR:?}",
                        conns.len()
                    );
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => {
                eprintln!("ddp_sync barrier: accept failed: {e}");
                return;
            }
        }
    }
    conns.sort_by_key(|(r, _)| *r);
    for step in 0..steps {
        for (rank, s) in &mut conns {
            if let Err(e) = s.read_exact(&mut [0u8; 1]) {
                eprintln!("ddp_sync barrier: rank {rank} left at step {step} ({e})");
                return;
            }
        }
        for (rank, s) in &mut conns {
            if let Err(e) = s.write_all(&[1]) {
                eprintln!("ddp_sync barrier: rank {rank} left at step {step} ({e})");
                return;
            }
        }
    }
}

/// A rank's side of the barrier.
#[derive(Debug)]
struct Barrier {
    stream: TcpStream,
}

impl Barrier {
    fn connect(addr: &str, rank: u32) -> Res<Barrier> {
        let deadline = Instant::now() + CONNECT_FOR;
        loop {
            let attempt = addr
                .to_socket_addrs()
                .map_err(|e| format!("{addr}: {e}"))?
                .find_map(|a| TcpStream::connect_timeout(&a, Duration::from_secs(1)).ok());
            if let Some(mut stream) = attempt {
                stream.set_nodelay(true)?;
                stream.write_all(&rank.to_le_bytes())?;
                return Ok(Barrier { stream });
            }
            if Instant::now() > deadline {
                return Err(format!("no barrier server at {addr} after {CONNECT_FOR:?}").into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Blocks until every rank has arrived. When the barrier is gone (a
    /// rank left), waits [`PEER_GONE_GRACE`] before failing: a job being
    /// stopped signals every rank, and this rank's own signal, arriving a
    /// little later than the peer's, should find its spans still open (to
    /// flush them as truncated) rather than ended by the error.
    fn wait(&mut self) -> Res<()> {
        let mut b = [0u8; 1];
        let r = self
            .stream
            .write_all(&[1])
            .and_then(|()| self.stream.read_exact(&mut b));
        if let Err(e) = r {
            std::thread::sleep(PEER_GONE_GRACE);
            return Err(format!("the barrier is gone (a rank left): {e}").into());
        }
        Ok(())
    }
}

// --------------------------------------------------------------------- rank

/// A small xorshift generator for the jitter (no dependency needed).
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        if n == 0 {
            0
        } else {
            self.0 % n
        }
    }
}

/// The work of one phase: its sleep, any injected delay, its CPU spin.
#[derive(Debug)]
struct Worker {
    rank: u32,
    faults: Faults,
    rng: Rng,
    sink: u64,
}

impl Worker {
    fn phase(&mut self, phase: usize, step: u64) {
        let (sleep_ms, spin_us) = WORK[phase];
        let mut sleep = Duration::from_millis(sleep_ms);
        for s in &self.faults.slow {
            if s.applies(self.rank, phase, step) {
                sleep += Duration::from_millis(s.ms);
            }
        }
        if self.faults.jitter_ms > 0 {
            sleep += Duration::from_micros(self.rng.below(self.faults.jitter_ms * 1000));
        }
        if self.faults.hang == Some((self.rank, phase, step)) {
            println!(
                "rank {}: hanging in {} at step {step}",
                self.rank, PHASES[phase]
            );
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        std::thread::sleep(sleep);
        let until = Instant::now() + Duration::from_micros(spin_us);
        while Instant::now() < until {
            self.sink = self
                .sink
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
        }
        std::hint::black_box(self.sink);
    }
}

fn env_u32(name: &str) -> Res<u32> {
    let v = env(name).ok_or_else(|| format!("{name} is not set"))?;
    Ok(v.trim()
        .parse()
        .map_err(|_| format!("{name}: not a number: {v}"))?)
}

fn rank_main(args: &Args, faults: &Faults) -> i32 {
    let (rank, world) = match (env_u32("RANK"), env_u32("WORLD_SIZE")) {
        (Ok(r), Ok(w)) if r < w => (r, w),
        (Ok(r), Ok(w)) => {
            eprintln!("ddp_sync: RANK {r} is not below WORLD_SIZE {w}");
            return 2;
        }
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("ddp_sync: {e}");
            return 2;
        }
    };
    let telemetry = match lens::setup_telemetry_from_env() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("ddp_sync rank {rank}: telemetry setup failed: {e}");
            return 2;
        }
    };
    let result = train(rank, world, args.steps, faults);
    let code = match &result {
        Ok(()) => {
            println!("rank {rank}/{world}: done");
            0
        }
        Err(e) => {
            eprintln!("ddp_sync rank {rank}: {e}");
            1
        }
    };
    telemetry.shutdown(Duration::from_secs(10));
    code
}

fn train(rank: u32, world: u32, steps: u64, faults: &Faults) -> Res<()> {
    let addr = format!(
        "{}:{}",
        env("MASTER_ADDR").unwrap_or_else(|| "127.0.0.1".into()),
        env("MASTER_PORT").unwrap_or_else(|| "29500".into())
    );
    if rank == 0 {
        let listener = TcpListener::bind(&addr).map_err(|e| format!("bind {addr}: {e}"))?;
        std::thread::Builder::new()
            .name("ddp-barrier".into())
            .spawn(move || serve_barrier(listener, world, steps))?;
    }
    let mut barrier = Barrier::connect(&addr, rank)?;
    println!("rank {rank}/{world}: barrier connected");
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        ^ (u64::from(rank) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut w = Worker {
        rank,
        faults: faults.clone(),
        rng: Rng(seed | 1),
        sink: u64::from(rank),
    };
    for i in 0..steps {
        let _step = managed_span!("step", "train.step", "dl.iteration" = i);
        {
            let _s = span_cm!("data.next_batch");
            w.phase(0, i);
        }
        {
            let _s = span_cm!("forward_backward");
            w.phase(1, i);
        }
        {
            let _s = span_cm!("allreduce.grads");
            w.phase(2, i);
            barrier.wait()?;
        }
        {
            let _s = span_cm!("optimizer.step");
            w.phase(3, i);
        }
    }
    Ok(())
}

// ----------------------------------------------------------------- launcher

/// The last SIGTERM/SIGINT the launcher received (0: none since last read).
static SIGNALLED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNALLED.store(sig, Ordering::SeqCst);
}

fn free_port() -> Res<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn send(child: &Child, sig: libc::c_int) {
    // SAFETY: signalling a child process of ours by its pid; `kill` has no
    // memory-safety preconditions.
    unsafe {
        libc::kill(child.id() as libc::pid_t, sig);
    }
}

fn launch(args: &Args) -> i32 {
    match launch_inner(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ddp_sync: {e}");
            1
        }
    }
}

fn launch_inner(args: &Args) -> Res<i32> {
    use std::os::unix::process::CommandExt;
    // forward SIGTERM/SIGINT; the handler only stores an atomic
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: `on_signal` is async-signal-safe (one atomic store).
        unsafe {
            libc::signal(
                sig,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
    let port = free_port()?;
    let run_id = env("NEMO_LENS_RUN_ID").unwrap_or_else(|| {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        format!("ddp-{secs}-{}", std::process::id())
    });
    let exe = std::env::current_exe()?;
    println!(
        "ddp_sync: {} ranks, {} steps, run {run_id}, barrier on 127.0.0.1:{port}",
        args.world, args.steps
    );
    let mut children: Vec<(u32, Child, Option<ExitStatus>)> = Vec::new();
    for rank in 0..args.world {
        let mut cmd = Command::new(&exe);
        cmd.args(["--steps", &args.steps.to_string()])
            .env("RANK", rank.to_string())
            .env("WORLD_SIZE", args.world.to_string())
            .env("LOCAL_RANK", rank.to_string())
            .env("LOCAL_WORLD_SIZE", args.world.to_string())
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", port.to_string())
            .env("NEMO_LENS_RUN_ID", &run_id)
            // a terminal's Ctrl-C reaches the launcher only, which forwards it once
            .process_group(0);
        #[cfg(target_os = "linux")]
        // SAFETY: `prctl` is async-signal-safe, fine between fork and exec.
        unsafe {
            // a rank whose launcher dies (say, SIGKILL at a timeout) is
            // terminated too, flushing what it has
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        match cmd.spawn() {
            Ok(c) => children.push((rank, c, None)),
            Err(e) => {
                for (_, c, _) in &children {
                    send(c, libc::SIGTERM);
                }
                return Err(format!("cannot start rank {rank}: {e}").into());
            }
        }
    }

    let mut forwarded: Option<i32> = None;
    // when a rank failed or a signal was forwarded: SIGTERM the rest after a
    // grace period, SIGKILL after a longer one
    let mut trouble_since: Option<Instant> = None;
    let mut termed = false;
    loop {
        let sig = SIGNALLED.swap(0, Ordering::SeqCst);
        if sig != 0 {
            eprintln!("ddp_sync: forwarding signal {sig} to the ranks");
            for (_, c, st) in &children {
                if st.is_none() {
                    send(c, sig);
                }
            }
            forwarded = Some(sig);
            trouble_since.get_or_insert_with(Instant::now);
        }
        for (rank, c, st) in &mut children {
            if st.is_none() {
                if let Some(s) = c.try_wait()? {
                    *st = Some(s);
                    if !s.success() {
                        trouble_since.get_or_insert_with(Instant::now);
                        if forwarded.is_none() {
                            eprintln!("ddp_sync: rank {rank} failed ({s})");
                        }
                    }
                }
            }
        }
        if children.iter().all(|(_, _, st)| st.is_some()) {
            break;
        }
        if let Some(t) = trouble_since {
            let left = children.iter().filter(|(_, _, st)| st.is_none());
            if !termed && t.elapsed() > Duration::from_secs(15) {
                termed = true;
                for (rank, c, _) in left {
                    eprintln!("ddp_sync: rank {rank} still running; sending SIGTERM");
                    send(c, libc::SIGTERM);
                }
            } else if t.elapsed() > Duration::from_secs(45) {
                for (_, c, _) in left {
                    send(c, libc::SIGKILL);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Some(sig) = forwarded {
        return Ok(128 + sig);
    }
    let failed: Vec<u32> = children
        .iter()
        .filter(|(_, _, st)| st.is_some_and(|s| !s.success()))
        .map(|(r, _, _)| *r)
        .collect();
    if failed.is_empty() {
        println!("ddp_sync: all {} ranks finished", args.world);
        Ok(0)
    } else {
        eprintln!("ddp_sync: ranks {failed:?} failed");
        Ok(1)
    }
}
