//! Test support for lens's integration tests: a real OTLP collector (`rotel`,
//! from its PyPI wheel) on free loopback ports, and a parser for what it
//! prints about every span, metric point and log record it receives.

#![allow(missing_docs, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The `rotel-agent` binary: `$ROTEL_AGENT`, else the one inside the
/// installed `rotel` wheel, else `rotel-agent` on `PATH`.
pub fn rotel_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("ROTEL_AGENT") {
        return p.into();
    }
    let out = Command::new("python3")
        .args([
            "-c",
            "import rotel, os; print(os.path.join(os.path.dirname(rotel.__file__), 'rotel-agent'))",
        ])
        .output();
    if let Ok(out) = out {
        let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && p.is_file() {
            return p;
        }
    }
    PathBuf::from("rotel-agent")
}

/// A command for `program` with nothing from the developer's shell leaking
/// in: every `NEMO_*`, `OTEL_*`, `SLURM_*`, `MEGATRON_OTEL_*` variable and
/// any inherited trace context are removed.
pub fn clean_command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new(program);
    for (k, _) in std::env::vars() {
        let leaks = ["NEMO_", "OTEL_", "SLURM_", "MEGATRON_OTEL_"]
            .iter()
            .any(|p| k.starts_with(p))
            || ["TRACEPARENT", "TRACESTATE", "BAGGAGE", "LOCAL_RANK"].contains(&k.as_str());
        if leaks {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// [`clean_command`] for a job launcher: also without the rank variables a
/// torchrun-style launcher sets (`RANK`, `WORLD_SIZE`, `LOCAL_WORLD_SIZE`,
/// `MASTER_ADDR`, `MASTER_PORT`) and the `ddp_sync` example's faults
/// (`DDP_*`), so a job starts from nothing of the developer's shell.
///
/// ```
/// let status = tests::clean_job_command("sh")
///     .args(["-c", "test -z \"$RANK$DDP_SLOW_RANK\""])
///     .env("RANK_OF_MINE", "kept")
///     .status()
///     .unwrap();
/// assert!(status.success());
/// ```
pub fn clean_job_command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = clean_command(program);
    for (k, _) in std::env::vars() {
        let leaks = k.starts_with("DDP_")
            || [
                "RANK",
                "WORLD_SIZE",
                "LOCAL_WORLD_SIZE",
                "MASTER_ADDR",
                "MASTER_PORT",
            ]
            .contains(&k.as_str());
        if leaks {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// [`clean_command`] with telemetry on for every rank and every group, as a
/// user would switch it on through the environment.
pub fn lens_command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = clean_command(program);
    cmd.env("NEMO_LENS_ENABLED", "1")
        .env("NEMO_LENS_EXPORT_STRATEGY", "all_ranks")
        .env("NEMO_LENS_SPAN_GROUPS", "all");
    cmd
}

/// Runs `cmd`, panicking with its output unless it succeeds.
pub fn run_ok(cmd: &mut Command) -> std::process::Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// An example binary built by `cargo test --workspace --all-targets` (or
/// `cargo build -p nemo-lens --example NAME` for the examples shipped with
/// `nemo-lens`, `-p examples` for the rest), next to this test's profile.
pub fn example_binary(name: &str) -> PathBuf {
    built_binary(
        "examples",
        name,
        &format!(
            "`cargo test --workspace --all-targets`, or `cargo build -p nemo-lens --example {name}` \
             (`-p examples` for the examples that need other crates: lens/examples/ holds the others)"
        ),
    )
}

/// The `lens` command (package `lens-cli`), built by `cargo test
/// --workspace` or `cargo build -p nemo-lens-cli`.
///
/// ```no_run
/// let lens = tests::lens_cli_binary();
/// assert!(lens.is_file());
/// ```
pub fn lens_cli_binary() -> PathBuf {
    built_binary("", "lens", "`cargo build -p nemo-lens-cli`")
}

/// `name` in `<target>/<profile>/<subdir>`: next to the running test's
/// profile directory first, then under `CARGO_TARGET_DIR` (or the
/// workspace's `target/`), debug before release.
fn built_binary(subdir: &str, name: &str, how: &str) -> PathBuf {
    let file = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    let mut candidates = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        // target/<profile>/deps/<test>-<hash>
        if let Some(profile_dir) = exe.parent().and_then(|deps| deps.parent()) {
            candidates.push(profile_dir.join(subdir).join(&file));
        }
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    for profile in ["debug", "release"] {
        candidates.push(target.join(profile).join(subdir).join(&file));
    }
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!("{name} is not built (looked at {candidates:?}); build it with {how}")
        })
}

/// The Python `nemo-lens` peer (`../shared/peers/nemo-lens-0.2.0`, or the
/// folder `LENS_PYTHON_PEER` names) installed into the virtual environment
/// `venv` (once: `tests/python/peer-venv.sh`), as that environment's
/// `python`; `None`, after one line on stdout naming `who` and how to point
/// the test at a copy, when the peer is absent.
pub fn python_peer(venv: &std::path::Path, who: &str) -> Option<PathBuf> {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let peer = std::env::var_os("LENS_PYTHON_PEER")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../shared/peers/nemo-lens-0.2.0"));
    if !peer.join("src/nemo/lens/__init__.py").is_file() {
        println!(
            "{who}: skipped, no Python nemo-lens peer at {} \
             (set LENS_PYTHON_PEER to a copy of nemo-lens-0.2.0)",
            peer.display()
        );
        return None;
    }
    let out = Command::new("bash")
        .arg(root.join("tests/python/peer-venv.sh"))
        .arg(&peer)
        .arg(venv)
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "installing the peer: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running rotel collector that prints everything it receives.
#[derive(Debug)]
pub struct Rotel {
    pub grpc_port: u16,
    pub http_port: u16,
    child: Option<Child>,
    output: Arc<Mutex<String>>,
    dir: PathBuf,
}

impl Rotel {
    /// Starts a collector on two free ports and waits until both accept.
    pub fn start() -> Rotel {
        let dir =
            std::env::temp_dir().join(format!("lens-rotel-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut r = Rotel {
            grpc_port: free_port(),
            http_port: free_port(),
            child: None,
            output: Arc::new(Mutex::new(String::new())),
            dir,
        };
        r.spawn();
        r
    }

    fn spawn(&mut self) {
        let mut child = Command::new(rotel_binary())
            .args(["start", "--exporter", "blackhole"])
            .args([
                "--debug-log",
                "traces",
                "--debug-log",
                "metrics",
                "--debug-log",
                "logs",
            ])
            .args(["--debug-log-verbosity", "detailed"])
            .arg("--otlp-grpc-endpoint")
            .arg(format!("127.0.0.1:{}", self.grpc_port))
            .arg("--otlp-http-endpoint")
            .arg(format!("127.0.0.1:{}", self.http_port))
            .arg("--pid-file")
            .arg(self.dir.join("rotel.pid"))
            .arg("--log-file")
            .arg(self.dir.join("rotel.log"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {:?} (install with `pip install rotel==0.0.1a15`): {e}",
                    rotel_binary()
                )
            });
        for stream in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let out = self.output.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let mut o = out.lock().unwrap();
                    o.push_str(&line);
                    o.push('\n');
                }
            });
        }
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        for port in [self.grpc_port, self.http_port] {
            while TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(
                    Instant::now() < deadline,
                    "rotel did not listen on {port}:\n{}",
                    self.output()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// `http://127.0.0.1:<grpc port>`
    pub fn grpc_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    /// `http://127.0.0.1:<http port>`
    pub fn http_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// Stops the collector (the ports become unreachable).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same ports.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Everything printed so far.
    pub fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// Everything received so far, parsed.
    pub fn received(&self) -> Received {
        Received::parse(&self.output())
    }

    /// Waits until `done` holds for what was received (or panics after `timeout`).
    pub fn wait_for(
        &self,
        timeout: Duration,
        what: &str,
        done: impl Fn(&Received) -> bool,
    ) -> Received {
        let deadline = Instant::now() + timeout;
        loop {
            let r = self.received();
            if done(&r) {
                return r;
            }
            if Instant::now() > deadline {
                panic!(
                    "timed out waiting for {what}; collector printed:\n{}",
                    self.output()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Rotel {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `(key, value)` with rotel's value form, e.g. `("nv.dl.rank", "Int(3)")`.
pub type Attrs = Vec<(String, String)>;

/// The value of `key`, unwrapped from `Str(..)`, `Int(..)`, `Double(..)`, `Bool(..)`.
pub fn get<'a>(attrs: &'a Attrs, key: &str) -> Option<&'a str> {
    let raw = attrs.iter().find(|(k, _)| k == key)?.1.as_str();
    Some(
        raw.find('(')
            .filter(|_| raw.ends_with(')'))
            .map_or(raw, |i| &raw[i + 1..raw.len() - 1]),
    )
}

#[derive(Debug, Clone, Default)]
pub struct Event {
    pub name: String,
    pub attributes: Attrs,
}

#[derive(Debug, Clone, Default)]
pub struct Span {
    pub resource: Attrs,
    pub scope: String,
    pub trace_id: String,
    pub parent_id: String,
    pub span_id: String,
    pub name: String,
    /// The span kind, as printed (e.g. `Client`).
    pub kind: String,
    pub status_code: String,
    pub status_message: String,
    pub attributes: Attrs,
    pub events: Vec<Event>,
    /// Fields of each link (`Trace ID`, `ID`, ...), as printed.
    pub links: Vec<Attrs>,
}

#[derive(Debug, Clone, Default)]
pub struct Point {
    pub attributes: Attrs,
    /// `Value` of a number point, `Count`/`Sum` of a histogram point.
    pub fields: Attrs,
}

#[derive(Debug, Clone, Default)]
pub struct Metric {
    pub resource: Attrs,
    pub scope: String,
    pub name: String,
    pub unit: String,
    pub data_type: String,
    pub is_monotonic: Option<bool>,
    pub points: Vec<Point>,
}

#[derive(Debug, Clone, Default)]
pub struct Log {
    pub resource: Attrs,
    pub scope: String,
    /// Every `Key: value` field printed for the record (Body, SeverityText,
    /// Trace ID, Span ID, ...).
    pub fields: Attrs,
    pub attributes: Attrs,
}

#[derive(Debug, Clone, Default)]
pub struct Received {
    pub spans: Vec<Span>,
    pub metrics: Vec<Metric>,
    pub logs: Vec<Log>,
}

#[derive(Clone, Copy, PartialEq)]
enum Target {
    None,
    Resource,
    SpanAttrs,
    EventFields,
    EventAttrs,
    Link,
    Descriptor,
    PointAttrs,
    LogAttrs,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Spans,
    Metrics,
    Logs,
}

fn split_field(s: &str) -> Option<(String, String)> {
    let (k, v) = s.split_once(':')?;
    Some((k.trim().to_owned(), v.trim().to_owned()))
}

impl Received {
    pub fn parse(text: &str) -> Received {
        let mut r = Received::default();
        let mut kind = Kind::Spans;
        let mut resource: Attrs = Vec::new();
        let mut scope = String::new();
        let mut target = Target::None;
        for raw in text.lines() {
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix("-> ") {
                let Some((k, v)) = split_field(rest) else {
                    continue;
                };
                match target {
                    Target::Resource => resource.push((k, v)),
                    Target::SpanAttrs => {
                        if let Some(s) = r.spans.last_mut() {
                            s.attributes.push((k, v))
                        }
                    }
                    Target::EventFields | Target::EventAttrs => {
                        let deep = raw.len() - raw.trim_start().len() > 6;
                        if let Some(e) = r.spans.last_mut().and_then(|s| s.events.last_mut()) {
                            if k == "Attributes" {
                                target = Target::EventAttrs;
                            } else if deep && target == Target::EventAttrs {
                                e.attributes.push((k, v));
                            } else if k == "Name" {
                                e.name = v;
                                target = Target::EventFields;
                            }
                        }
                    }
                    Target::Link => {
                        if let Some(l) = r.spans.last_mut().and_then(|s| s.links.last_mut()) {
                            l.push((k, v));
                        }
                    }
                    Target::Descriptor => {
                        if let Some(m) = r.metrics.last_mut() {
                            match k.as_str() {
                                "Name" => m.name = v,
                                "Unit" => m.unit = v,
                                "DataType" => m.data_type = v,
                                "IsMonotonic" => m.is_monotonic = Some(v == "true"),
                                _ => {}
                            }
                        }
                    }
                    Target::PointAttrs => {
                        if let Some(p) = r.metrics.last_mut().and_then(|m| m.points.last_mut()) {
                            p.attributes.push((k, v));
                        }
                    }
                    Target::LogAttrs => {
                        if let Some(l) = r.logs.last_mut() {
                            l.attributes.push((k, v));
                        }
                    }
                    Target::None => {}
                }
                continue;
            }
            if line.starts_with("ResourceSpans #")
                || line.starts_with("ResourceMetrics #")
                || line.starts_with("ResourceLogs #")
                || line.starts_with("ResourceLog #")
            {
                kind = if line.starts_with("ResourceSpans") {
                    Kind::Spans
                } else if line.starts_with("ResourceMetrics") {
                    Kind::Metrics
                } else {
                    Kind::Logs
                };
                resource = Vec::new();
                target = Target::None;
            } else if line == "Resource attributes:" {
                target = Target::Resource;
            } else if let Some(s) = line.strip_prefix("InstrumentationScope ") {
                scope = s.trim().to_owned();
                target = Target::None;
            } else if line.starts_with("Span #") {
                r.spans.push(Span {
                    resource: resource.clone(),
                    scope: scope.clone(),
                    ..Span::default()
                });
                target = Target::None;
            } else if line.starts_with("SpanEvent #") {
                if let Some(s) = r.spans.last_mut() {
                    s.events.push(Event::default());
                }
                target = Target::EventFields;
            } else if line.starts_with("SpanLink #") {
                if let Some(s) = r.spans.last_mut() {
                    s.links.push(Vec::new());
                }
                target = Target::Link;
            } else if line.starts_with("Metric #") {
                r.metrics.push(Metric {
                    resource: resource.clone(),
                    scope: scope.clone(),
                    ..Metric::default()
                });
                target = Target::None;
            } else if line == "Descriptor:" {
                target = Target::Descriptor;
            } else if line.starts_with("NumberDataPoints #")
                || line.starts_with("HistogramDataPoints #")
                || line.starts_with("ExponentialHistogramDataPoints #")
            {
                if let Some(m) = r.metrics.last_mut() {
                    m.points.push(Point::default());
                }
                target = Target::None;
            } else if line == "Data point attributes:" {
                target = Target::PointAttrs;
            } else if line.starts_with("LogRecord #") {
                r.logs.push(Log {
                    resource: resource.clone(),
                    scope: scope.clone(),
                    ..Log::default()
                });
                target = Target::None;
            } else if line == "Attributes:" {
                target = match kind {
                    Kind::Logs => Target::LogAttrs,
                    _ => Target::SpanAttrs,
                };
            } else if line == "Events:" || line == "Links:" {
                target = Target::None;
            } else if let Some((k, v)) = split_field(line) {
                match kind {
                    Kind::Spans => {
                        if let Some(s) = r.spans.last_mut() {
                            match k.as_str() {
                                "Trace ID" => s.trace_id = v,
                                "Parent ID" => s.parent_id = v,
                                "ID" => s.span_id = v,
                                "Name" => s.name = v,
                                "Kind" => s.kind = v,
                                "Status code" => s.status_code = v,
                                "Status message" => s.status_message = v,
                                _ => {}
                            }
                        }
                    }
                    Kind::Metrics => {
                        if let Some(p) = r.metrics.last_mut().and_then(|m| m.points.last_mut()) {
                            p.fields.push((k, v));
                        }
                    }
                    Kind::Logs => {
                        if let Some(l) = r.logs.last_mut() {
                            l.fields.push((k, v));
                        }
                    }
                }
            }
        }
        r
    }

    pub fn spans_named(&self, name: &str) -> Vec<&Span> {
        self.spans.iter().filter(|s| s.name == name).collect()
    }

    pub fn span(&self, name: &str) -> &Span {
        self.spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| {
                panic!(
                    "no span {name:?}; got {:?}",
                    self.spans.iter().map(|s| &s.name).collect::<Vec<_>>()
                )
            })
    }

    pub fn metric(&self, name: &str) -> &Metric {
        self.metrics
            .iter()
            .rev()
            .find(|m| m.name == name)
            .unwrap_or_else(|| {
                panic!(
                    "no metric {name:?}; got {:?}",
                    self.metrics.iter().map(|m| &m.name).collect::<Vec<_>>()
                )
            })
    }
}

/// A global allocator that counts allocations per thread. A test binary
/// opts in with `#[global_allocator] static A: tests::CountingAlloc = tests::CountingAlloc;`
/// and measures with [`allocations`].
#[derive(Debug)]
pub struct CountingAlloc;

thread_local! {
    static ALLOCS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

/// How many allocations this thread made while running `f` (needs
/// [`CountingAlloc`] as the binary's global allocator).
pub fn allocations<R>(f: impl FnOnce() -> R) -> usize {
    let before = ALLOCS.with(std::cell::Cell::get);
    std::hint::black_box(f());
    ALLOCS.with(std::cell::Cell::get) - before
}

/// What a child process did, as [`run_with_timeout`] saw it.
#[derive(Debug)]
pub struct Finished {
    /// Its exit status (after a kill, when it timed out).
    pub status: std::process::ExitStatus,
    /// Whether it had to be killed at the timeout.
    pub timed_out: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
    /// Wall-clock time from spawn to exit.
    pub took: Duration,
}

impl Finished {
    /// The signal that ended it, if a signal did.
    pub fn signal(&self) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        self.status.signal()
    }
}

/// Spawns `cmd` with piped output, calls `with_child` (e.g. to send it a
/// signal once it prints `ready`), then waits at most `timeout` for it to
/// exit, killing it then.
pub fn run_with_timeout_and(
    cmd: &mut Command,
    timeout: Duration,
    with_child: impl FnOnce(&mut std::process::Child, &mut dyn FnMut(&str) -> bool),
) -> Finished {
    use std::io::{BufRead, Read};
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let (line_tx, line_rx) = std::sync::mpsc::channel::<String>();
    let out_thread = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = line_tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    // waits for a line on stdout that contains `needle`
    let mut wait_line = |needle: &str| -> bool {
        let deadline = start + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match line_rx.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
    };
    with_child(&mut child, &mut wait_line);
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        if start.elapsed() > timeout {
            timed_out = true;
            let _ = child.kill();
            break child.wait().expect("wait");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = start.elapsed();
    Finished {
        status,
        timed_out,
        stdout: out_thread.join().unwrap_or_default(),
        stderr: err_thread.join().unwrap_or_default(),
        took,
    }
}

/// [`run_with_timeout_and`] with nothing to do while it runs.
pub fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> Finished {
    run_with_timeout_and(cmd, timeout, |_, _| {})
}

/// One span read back from an OTLP JSON lines file.
#[derive(Debug, Clone)]
pub struct FileSpan {
    /// The span name.
    pub name: String,
    /// The span id, as the file writes it (hex).
    pub span_id: String,
    /// The parent's span id (hex; empty for a root).
    pub parent_span_id: String,
    /// Attributes: key to the OTLP JSON `value` object.
    pub attributes: serde_json::Map<String, serde_json::Value>,
    /// Event names.
    pub events: Vec<String>,
    /// `status.message`, when set.
    pub status_message: Option<String>,
}

impl FileSpan {
    /// The `stringValue` of attribute `key`.
    pub fn str_attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key)?.get("stringValue")?.as_str()
    }

    /// The `intValue` of attribute `key` (OTLP JSON writes it as a string
    /// or a number).
    pub fn int_attr(&self, key: &str) -> Option<i64> {
        let v = self.attributes.get(key)?.get("intValue")?;
        v.as_i64().or_else(|| v.as_str()?.parse().ok())
    }

    /// The `boolValue` of attribute `key`.
    pub fn bool_attr(&self, key: &str) -> Option<bool> {
        self.attributes.get(key)?.get("boolValue")?.as_bool()
    }
}

/// Every span in an OTLP JSON lines file (lens's `file` exporter); lines
/// that are not JSON make it panic, as they are a defect.
pub fn file_spans(path: &std::path::Path) -> Vec<FileSpan> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut spans = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| {
            panic!(
                "line {} of {} is not JSON ({e}): {line}",
                i + 1,
                path.display()
            )
        });
        let Some(rs) = v.get("resourceSpans").and_then(|r| r.as_array()) else {
            continue;
        };
        for r in rs {
            for ss in r["scopeSpans"].as_array().into_iter().flatten() {
                for s in ss["spans"].as_array().into_iter().flatten() {
                    let mut attributes = serde_json::Map::new();
                    for kv in s["attributes"].as_array().into_iter().flatten() {
                        if let Some(k) = kv["key"].as_str() {
                            attributes.insert(k.to_owned(), kv["value"].clone());
                        }
                    }
                    spans.push(FileSpan {
                        name: s["name"].as_str().unwrap_or_default().to_owned(),
                        span_id: s["spanId"].as_str().unwrap_or_default().to_owned(),
                        parent_span_id: s["parentSpanId"].as_str().unwrap_or_default().to_owned(),
                        attributes,
                        events: s["events"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|e| e["name"].as_str().map(str::to_owned))
                            .collect(),
                        status_message: s["status"]["message"].as_str().map(str::to_owned),
                    });
                }
            }
        }
    }
    spans
}

/// This process's threads: thread id → name (`/proc/self/task`).
///
/// ```
/// assert!(!tests::threads().is_empty());
/// ```
pub fn threads() -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        out.insert(
            task.file_name().to_string_lossy().into_owned(),
            name.trim().to_owned(),
        );
    }
    out
}

/// This process's open sockets (`/proc/self/fd`).
///
/// ```
/// let _ = tests::sockets();
/// ```
pub fn sockets() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|p| p.to_string_lossy().starts_with("socket:"))
        .count()
}

/// `e` and each of its sources on one line, joined by `: ` (as a user's
/// program prints an error with its causes; lens's errors keep their cause
/// as a `source`, not in their own line).
///
/// ```
/// let e = std::io::Error::other("inner");
/// assert_eq!(tests::error_chain(&e), "inner");
/// ```
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut line = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        line.push_str(": ");
        line.push_str(&s.to_string());
        next = s.source();
    }
    line
}
