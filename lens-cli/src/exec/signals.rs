//! Forwarding of termination signals to the child of `lens exec`.
//!
//! `signal-hook` catches the signals (its handler only writes to a pipe)
//! and a thread of ours forwards each to the child with `kill(2)`. A signal
//! that arrives before the child exists is kept and sent as soon as it
//! does; once the child has exited (before it is reaped, so its pid cannot
//! have been reused) nothing is sent any more. One lock orders the three.

use std::sync::{Mutex, MutexGuard};

use libc::c_int;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use signal_hook::consts::signal::SIGINT;
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::SignalsInfo;
use signal_hook::low_level::siginfo::Cause;

/// The signals `lens exec` forwards: SIGTERM and SIGINT (a scheduler's and
/// a user's stop), SIGHUP and SIGQUIT, and SIGUSR1 / SIGUSR2 (SLURM's
/// `--signal` warning before a time limit). Without a handler each of them
/// would end `lens exec` and lose its span.
pub(crate) const FORWARDED: [c_int; 6] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// Where forwarding stands.
struct Forwarding {
    /// The running child's pid; `None` before it starts and after it exits.
    child: Option<Pid>,
    /// A signal that arrived while there was no child yet.
    pending: Option<c_int>,
    /// The last signal sent to the child.
    last_sent: Option<c_int>,
}

static STATE: Mutex<Forwarding> = Mutex::new(Forwarding {
    child: None,
    pending: None,
    last_sent: None,
});

fn state() -> MutexGuard<'static, Forwarding> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Installs forwarding for every signal of [`FORWARDED`] that is not
/// ignored: a signal the caller ignores (e.g. SIGHUP under `nohup`) stays
/// ignored, for `lens exec` and its child. A signal that cannot be caught
/// (an error from the system) keeps its default action, with a note.
pub(crate) fn install() {
    let ignored = ignored_signals();
    let wanted: Vec<c_int> = FORWARDED
        .into_iter()
        .filter(|s| !ignored.contains(s))
        .collect();
    let mut signals = match SignalsInfo::<WithOrigin>::new(&wanted) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lens exec: cannot catch signals to forward them ({e}); they end lens exec");
            return;
        }
    };
    let spawned = std::thread::Builder::new()
        .name("lens-signals".into())
        .spawn(move || {
            for origin in signals.forever() {
                // a terminal sends SIGINT / SIGQUIT / SIGHUP to its whole
                // foreground process group, the child included: forwarding
                // it would deliver it twice
                let from_terminal = origin.cause == Cause::Kernel
                    && [SIGINT, libc::SIGQUIT, libc::SIGHUP].contains(&origin.signal);
                if !from_terminal {
                    forward(origin.signal);
                }
            }
        });
    if let Err(e) = spawned {
        eprintln!("lens exec: cannot start the signal-forwarding thread ({e})");
    }
}

/// Sends `sig` to the child, or keeps it for the child about to start.
fn forward(sig: c_int) {
    let mut s = state();
    match s.child {
        Some(pid) => send(&mut s, pid, sig),
        None => s.pending = Some(sig),
    }
}

/// Records the started child and sends it a signal that arrived before.
pub(crate) fn child_started(pid: i32) {
    let mut s = state();
    let pid = Pid::from_raw(pid);
    s.child = Some(pid);
    if let Some(sig) = s.pending.take() {
        send(&mut s, pid, sig);
    }
}

/// Stops forwarding: the child has exited and is about to be reaped.
pub(crate) fn child_exited() {
    state().child = None;
}

/// The last signal forwarded to the child, if any.
pub(crate) fn last_forwarded() -> Option<i32> {
    state().last_sent
}

/// `kill(pid, sig)` under the lock, so it never races `child_exited`.
fn send(s: &mut Forwarding, pid: Pid, sig: c_int) {
    if let Ok(signal) = Signal::try_from(sig) {
        // an error means the child is gone: nothing to forward to
        let _ = kill(pid, signal);
        s.last_sent = Some(sig);
    }
}

/// The signals this process ignores (inherited from its parent, as under
/// `nohup`), from `/proc/self/status`; none where that cannot be read
/// (every signal is then caught and forwarded).
fn ignored_signals() -> Vec<c_int> {
    ignored_in(&std::fs::read_to_string("/proc/self/status").unwrap_or_default())
}

/// The signals of the `SigIgn` mask of a `/proc/<pid>/status` text.
fn ignored_in(status: &str) -> Vec<c_int> {
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .unwrap_or(0);
    (1..=64)
        .filter(|sig: &c_int| mask & (1u64 << (sig - 1)) != 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sigign_mask_lists_the_ignored_signals() {
        let status = "Name:\tlens\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000001001\nSigCgt:\t0000000180004002\n";
        assert_eq!(ignored_in(status), [libc::SIGHUP, libc::SIGPIPE]);
        assert_eq!(ignored_in("SigIgn:\t8000000000000000\n"), [64]);
        assert!(ignored_in("no mask here").is_empty());
    }
}
