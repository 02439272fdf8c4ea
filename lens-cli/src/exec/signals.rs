//! Forwarding of termination signals to the child of `lens exec`.
//!
//! The handlers only read and write atomics and call `kill(2)`, all
//! async-signal-safe. A signal that arrives before the child exists is kept
//! and sent as soon as it does; once the child has exited (before it is
//! reaped, so its pid cannot have been reused) nothing is sent any more.

use std::sync::atomic::{AtomicI32, Ordering::SeqCst};

use libc::c_int;

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

/// The running child's pid; 0 before it starts and after it exits.
static CHILD: AtomicI32 = AtomicI32::new(0);
/// A signal that arrived while there was no child yet (0: none).
static PENDING: AtomicI32 = AtomicI32::new(0);
/// The last signal sent to the child (0: none).
static LAST_SENT: AtomicI32 = AtomicI32::new(0);

/// Installs the forwarding handler for every signal of [`FORWARDED`] that
/// is not ignored: a signal the caller ignores (e.g. SIGHUP under `nohup`)
/// stays ignored, for `lens exec` and its child.
pub(crate) fn install() {
    for sig in FORWARDED {
        // SAFETY: `sigaction` with a null new action only reads the current
        // one into `old`, a zeroed (valid) struct.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0
            || old.sa_sigaction == libc::SIG_IGN
        {
            continue;
        }
        // SAFETY: a zeroed `sigaction` is valid; the handler is an
        // `extern "C"` function of the SA_SIGINFO signature that only does
        // async-signal-safe work.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// Records the started child and sends it a signal that arrived before.
pub(crate) fn child_started(pid: i32) {
    CHILD.store(pid, SeqCst);
    let sig = PENDING.swap(0, SeqCst);
    if sig != 0 {
        send(pid, sig);
    }
}

/// Stops forwarding: the child has exited and is about to be reaped.
pub(crate) fn child_exited() {
    CHILD.store(0, SeqCst);
}

/// The last signal forwarded to the child, if any.
pub(crate) fn last_forwarded() -> Option<i32> {
    Some(LAST_SENT.load(SeqCst)).filter(|s| *s != 0)
}

/// The SA_SIGINFO handler: forwards `sig` to the child, or keeps it for
/// the child about to start.
extern "C" fn on_signal(sig: c_int, info: *mut libc::siginfo_t, _context: *mut libc::c_void) {
    if from_terminal(sig, info) {
        return;
    }
    let pid = CHILD.load(SeqCst);
    if pid > 0 {
        send(pid, sig);
        return;
    }
    PENDING.store(sig, SeqCst);
    // the child may have been recorded meanwhile, after `child_started`
    // looked at PENDING: whoever swaps the signal out sends it
    let pid = CHILD.load(SeqCst);
    if pid > 0 {
        let sig = PENDING.swap(0, SeqCst);
        if sig != 0 {
            send(pid, sig);
        }
    }
}

/// A terminal sends SIGINT / SIGQUIT / SIGHUP to its whole foreground
/// process group, the child included: forwarding it would deliver it twice.
#[cfg(target_os = "linux")]
fn from_terminal(sig: c_int, info: *const libc::siginfo_t) -> bool {
    if info.is_null() || ![libc::SIGINT, libc::SIGQUIT, libc::SIGHUP].contains(&sig) {
        return false;
    }
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    unsafe { (*info).si_code == libc::SI_KERNEL }
}

/// Elsewhere the sender is not told apart: every signal is forwarded.
#[cfg(not(target_os = "linux"))]
fn from_terminal(_sig: c_int, _info: *const libc::siginfo_t) -> bool {
    false
}

/// `kill(pid, sig)`, keeping `errno` as the interrupted code had it.
fn send(pid: i32, sig: c_int) {
    // SAFETY: errno is thread-local and valid for the thread's lifetime;
    // `kill` is async-signal-safe.
    unsafe {
        let errno = errno_location();
        let saved = *errno;
        libc::kill(pid, sig);
        *errno = saved;
    }
    LAST_SENT.store(sig, SeqCst);
}

/// This thread's `errno`.
#[cfg(target_os = "linux")]
unsafe fn errno_location() -> *mut c_int {
    // SAFETY: always valid for the calling thread.
    unsafe { libc::__errno_location() }
}

/// This thread's `errno`.
#[cfg(not(target_os = "linux"))]
unsafe fn errno_location() -> *mut c_int {
    // SAFETY: always valid for the calling thread.
    unsafe { libc::__error() }
}
