//! `lens exec`: runs a command under a root span and hands the trace to it.
//!
//! The span joins an incoming `TRACEPARENT`; the child gets `TRACEPARENT`,
//! `TRACESTATE` and `BAGGAGE` for it (and `NEMO_LENS_RUN_ID` when the run id
//! was made up here), so `srun` / `mpirun` / `torchrun` ranks started
//! through it land in one trace with one run id. Termination signals go on
//! to the child; the child's exit status is recorded on the span and is
//! `lens exec`'s own: its exit code, or 128+N when signal N killed it.
//! With telemetry off (or misconfigured) the command still runs, without a
//! span.

pub(crate) mod signals;

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitCode, ExitStatus};

use lens::{LensConfig, SpanGuard, SpanStatus};

use crate::cli::ExecArgs;
use crate::telemetry::{self, RunId, RUN_ID_VAR};

/// Exit code when the command cannot be found or started (as a shell).
const EXIT_NOT_FOUND: u8 = 127;
/// Exit code when the command exists but cannot be executed (as a shell).
const EXIT_NOT_EXECUTABLE: u8 = 126;

/// Attribute names recorded on the root span (OpenTelemetry semantic
/// conventions where they have one).
mod attr {
    /// `process.command`: the command as given.
    pub(super) const COMMAND: &str = "process.command";
    /// `process.args_count`: number of arguments, the command included (the
    /// arguments themselves are not recorded: they may hold secrets).
    pub(super) const ARGS_COUNT: &str = "process.args_count";
    /// `process.pid` of the child is recorded as this (the resource's
    /// `process.pid` is `lens exec`'s own).
    pub(super) const CHILD_PID: &str = "process.child.pid";
    /// `process.exit.code`: the child's exit code, when it exited.
    pub(super) const EXIT_CODE: &str = "process.exit.code";
    /// The signal that killed the child.
    pub(super) const EXIT_SIGNAL: &str = "process.exit.signal";
    /// The last signal `lens exec` forwarded to the child.
    pub(super) const FORWARDED_SIGNAL: &str = "lens.exec.forwarded_signal";
}

/// How the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It could not be started; the code to exit with.
    NotStarted(u8),
    /// It exited with this code.
    Exited(i32),
    /// It was killed by this signal.
    Killed(i32),
}

impl Outcome {
    /// The outcome of a waited-for child.
    fn of(status: ExitStatus) -> Self {
        match (status.code(), status.signal()) {
            (Some(code), _) => Outcome::Exited(code),
            (None, Some(sig)) => Outcome::Killed(sig),
            // neither: not possible after a wait on Unix
            (None, None) => Outcome::Exited(1),
        }
    }

    /// `lens exec`'s exit code, as a shell reports the child's.
    pub(crate) fn exit_code(self) -> u8 {
        match self {
            Outcome::NotStarted(code) => code,
            Outcome::Exited(code) => u8::try_from(code & 0xff).unwrap_or(1),
            Outcome::Killed(sig) => u8::try_from((128 + sig).clamp(0, 255)).unwrap_or(255),
        }
    }
}

/// Runs `lens exec`; returns the child's exit code (see the module docs).
pub(crate) fn run(args: &ExecArgs) -> ExitCode {
    let Some((program, rest)) = args.command.split_first() else {
        eprintln!("lens exec: no command given");
        return ExitCode::from(EXIT_NOT_FOUND);
    };
    signals::install();
    let telemetry = match LensConfig::from_env() {
        Ok(cfg) if cfg.enabled => match telemetry::install(cfg, "exec") {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("lens exec: {e}; running the command without a span");
                None
            }
        },
        Ok(_) => None,
        Err(e) => {
            eprintln!("lens exec: {e:?}; running the command without a span");
            None
        }
    };
    let outcome = match &telemetry {
        Some((_, run_id)) => traced(args, program, rest, run_id),
        None => run_child(
            Command::new(program).args(rest),
            "exec",
            program,
            &SpanGuard::none(),
        ),
    };
    if let Some((handle, _)) = &telemetry {
        // a failure is on stderr already (the library reports each one);
        // the exit code stays the command's
        let _ = telemetry::shutdown(handle);
    }
    ExitCode::from(outcome.exit_code())
}

/// Runs the child inside the root span and records how it ended.
fn traced(args: &ExecArgs, program: &OsStr, rest: &[OsString], run_id: &RunId) -> Outcome {
    // join the launcher's trace, if this process was handed one
    let _incoming = lens::propagation::context_from_env().attach();
    let name = match &args.name {
        Some(n) => n.clone(),
        None => default_name(program),
    };
    let span = lens::detached_span(name).enter();
    span.set_attribute(attr::COMMAND, program.to_string_lossy().into_owned());
    span.set_attribute(
        attr::ARGS_COUNT,
        i64::try_from(args.command.len()).unwrap_or(i64::MAX),
    );
    let mut cmd = Command::new(program);
    cmd.args(rest);
    // what this process was handed is replaced by the new context, not
    // mixed with it (a TRACESTATE without a valid TRACEPARENT is stale)
    for (_, var) in lens::propagation::ENV_CARRIER_VARS {
        cmd.env_remove(var);
    }
    cmd.envs(lens::propagation::env_for_child());
    if run_id.generated && std::env::var_os(RUN_ID_VAR).is_none() {
        cmd.env(RUN_ID_VAR, &run_id.id);
    }
    let outcome = run_child(&mut cmd, "exec", program, &span);
    record(&span, outcome);
    outcome
}

/// `exec <file name of the command>`.
fn default_name(program: &OsStr) -> String {
    let base = Path::new(program)
        .file_name()
        .unwrap_or(program)
        .to_string_lossy();
    format!("exec {base}")
}

/// Starts the child, records its pid on `span` (inert: none) and waits for it;
/// a child that cannot start is named on stderr as `lens <who>: cannot run`.
/// Install [`signals::install`] first for termination signals to reach it.
pub(crate) fn run_child(
    cmd: &mut Command,
    who: &str,
    program: &OsStr,
    span: &SpanGuard,
) -> Outcome {
    match start(cmd, who, program) {
        Ok(child) => {
            span.set_attribute(attr::CHILD_PID, i64::from(child.id()));
            wait(child)
        }
        Err(code) => Outcome::NotStarted(code),
    }
}

/// Spawns the child and registers it for signal forwarding; on failure
/// says why on stderr and returns the shell's exit code for it.
fn start(cmd: &mut Command, who: &str, program: &OsStr) -> Result<Child, u8> {
    match cmd.spawn() {
        Ok(child) => {
            signals::child_started(i32::try_from(child.id()).unwrap_or(0));
            Ok(child)
        }
        Err(e) => {
            let shown = Path::new(program).display();
            eprintln!("lens {who}: cannot run {shown}: {e}");
            Err(match e.kind() {
                io::ErrorKind::PermissionDenied => EXIT_NOT_EXECUTABLE,
                _ => EXIT_NOT_FOUND,
            })
        }
    }
}

/// Waits for the child: first without reaping it, so that no signal can
/// be forwarded to a reused pid, then reaps it.
fn wait(mut child: Child) -> Outcome {
    let pid = child.id();
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX));
    let flags = nix::sys::wait::WaitPidFlag::WEXITED | nix::sys::wait::WaitPidFlag::WNOWAIT;
    let exited = || nix::sys::wait::waitid(nix::sys::wait::Id::Pid(pid), flags);
    while let Err(nix::errno::Errno::EINTR) = exited() {}
    signals::child_exited();
    loop {
        match child.wait() {
            Ok(status) => return Outcome::of(status),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("lens exec: waiting for the command failed: {e}");
                return Outcome::Exited(1);
            }
        }
    }
}

/// Records the outcome on the span: exit code or signal, ERROR unless the
/// child exited with 0.
fn record(span: &SpanGuard, outcome: Outcome) {
    if let Some(sig) = signals::last_forwarded() {
        span.set_attribute(attr::FORWARDED_SIGNAL, i64::from(sig));
    }
    match outcome {
        Outcome::NotStarted(code) => {
            span.set_status(SpanStatus::Error(
                format!("the command could not be started (exit {code})").into(),
            ));
        }
        Outcome::Exited(code) => {
            span.set_attribute(attr::EXIT_CODE, i64::from(code));
            if code != 0 {
                span.set_status(SpanStatus::Error(format!("exited with code {code}").into()));
            }
        }
        Outcome::Killed(sig) => {
            span.set_attribute(attr::EXIT_SIGNAL, i64::from(sig));
            span.set_status(SpanStatus::Error(
                format!("killed by signal {sig} ({})", signal_name(sig)).into(),
            ));
        }
    }
}

/// `SIGTERM` for 15, …; `SIG<n>` for signals without a common name.
fn signal_name(sig: i32) -> String {
    let known = [
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGXCPU, "SIGXCPU"),
    ];
    known
        .iter()
        .find(|(n, _)| *n == sig)
        .map_or_else(|| format!("SIG{sig}"), |(_, name)| (*name).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(Outcome::Exited(0).exit_code(), 0);
        assert_eq!(Outcome::Exited(3).exit_code(), 3);
        assert_eq!(Outcome::Killed(libc::SIGKILL).exit_code(), 137);
        assert_eq!(Outcome::Killed(libc::SIGTERM).exit_code(), 143);
        assert_eq!(Outcome::NotStarted(127).exit_code(), 127);
    }

    #[test]
    fn default_name_is_exec_and_the_file_name() {
        assert_eq!(default_name(OsStr::new("/usr/bin/srun")), "exec srun");
        assert_eq!(default_name(OsStr::new("torchrun")), "exec torchrun");
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
        assert_eq!(signal_name(64), "SIG64");
    }
}
