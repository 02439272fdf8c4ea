//! Opt-in SIGTERM / SIGINT hook: flush every signal before a scheduler
//! kills the job (SLURM sends SIGTERM at a time limit), and otherwise leave
//! the process's signal handling exactly as it was.
//!
//! The rules:
//! * A signal that was ignored when the hook is installed stays ignored:
//!   lens does not hook it.
//! * A handler that existed before lens is chained: it runs after lens's
//!   (async-signal-safe) handler has woken the flush thread, with its mask
//!   and `SA_RESTART`/`SA_ONSTACK`/`SA_NODEFER` kept; a one-shot
//!   (`SA_RESETHAND`) handler runs once, then the default is behind lens.
//! * A handler installed after lens (plain `sigaction`, `signal-hook`,
//!   tokio) replaces lens's handler in the kernel; `signal-hook` and tokio
//!   chain to it, so lens still flushes.
//! * Lens terminates the process only when it is the sole handler over a
//!   default disposition: lens's handler is still the installed one and
//!   there was none before it. Then it ends open spans (marking them
//!   truncated), flushes, restores the default disposition and re-raises.
//!   Otherwise it flushes what has ended and returns: the application's
//!   handler decides what happens (a checkpoint on preemption, say), and its
//!   open spans are ended by its own shutdown.
//! * One hook per process. It flushes whichever pipeline is live when the
//!   signal arrives (re-setups move it), within
//!   `NEMO_LENS_SIGNAL_FLUSH_TIMEOUT` (default 10 s, inside SLURM's default
//!   30 s between SIGTERM and SIGKILL).
//! * A second signal lens alone handles, arriving while it flushes for the
//!   first, kills at once.
//! * Nothing on the path panics: the handler only stores atomics and writes
//!   one byte to a pipe; the flush thread reports through best-effort
//!   writes and catches any panic of the code it calls.
//!
//! The hook is hand-written on `sigaction` rather than `signal-hook`
//! because lens must know whether another handler exists, which
//! `signal-hook`'s shared registry cannot tell.

use crate::diag;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The reason recorded on spans ended by a signal.
pub(crate) const SIGNAL_REASON: &str = "process received a termination signal";

const SIGNALS: [libc::c_int; 2] = [libc::SIGTERM, libc::SIGINT];

/// What the handler needs about one signal, readable from a signal handler.
struct Hooked {
    /// Whether lens's handler is installed for this signal.
    installed: AtomicBool,
    /// The previous `sa_sigaction` (an address, `SIG_DFL` or `SIG_IGN`).
    prev_action: AtomicUsize,
    /// Whether the previous handler took `SA_SIGINFO` arguments.
    prev_siginfo: AtomicBool,
    /// Whether the previous action was one-shot (`SA_RESETHAND`): after it
    /// ran once, the disposition behind lens is the default.
    prev_resethand: AtomicBool,
    /// Set by the handler, cleared by the flush thread.
    pending: AtomicU8,
}

impl Hooked {
    const fn new() -> Self {
        Hooked {
            installed: AtomicBool::new(false),
            prev_action: AtomicUsize::new(libc::SIG_DFL),
            prev_siginfo: AtomicBool::new(false),
            prev_resethand: AtomicBool::new(false),
            pending: AtomicU8::new(NONE),
        }
    }
}

/// `Hooked::pending`: nothing, flush only, or flush then die by the signal
/// (lens was the sole handler over the default when it arrived).
const NONE: u8 = 0;
const FLUSH: u8 = 1;
const FLUSH_AND_DIE: u8 = 2;

/// Set while the flush thread flushes for a signal: a second signal that
/// lens alone handles then kills at once (a second Ctrl-C does not wait).
static FLUSHING: AtomicBool = AtomicBool::new(false);

static HOOKED: [Hooked; 2] = [Hooked::new(), Hooked::new()];
/// Write end of the wake-up pipe (non-blocking), -1 until installed.
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
/// The process that installed the hook (a forked child has another pid).
static HOOK_PID: AtomicU32 = AtomicU32::new(0);

/// What to flush when a signal arrives: the live pipeline, set by setup.
pub(crate) type FlushFn =
    Box<dyn Fn(bool, Duration) -> crate::sdk::report::ShutdownReport + Send + Sync>;

struct Live {
    generation: u64,
    flush: std::sync::Arc<FlushFn>,
    timeout: Duration,
    /// Wait after the flush before dying: in a multi-rank job the launcher
    /// kills every rank as soon as one exits (Open MPI sends SIGKILL), so a
    /// rank that flushed first waits for its siblings to flush too.
    settle: Duration,
}

/// The wait after a flush before dying, in a job of more than one rank.
pub(crate) const MULTI_RANK_SETTLE: Duration = Duration::from_millis(250);

/// Set from the moment a signal that lens alone handles arrives until the
/// process dies of it: shutdown and exit wait for that death (bounded),
/// rather than end the process with status 0 while the flush runs.
static DYING: AtomicBool = AtomicBool::new(false);
/// The deadline of the flush that `DYING` waits for, in milliseconds.
static DYING_WAIT_MS: AtomicU64 = AtomicU64::new(10_000);

static LIVE: Mutex<Option<Live>> = Mutex::new(None);

fn live() -> std::sync::MutexGuard<'static, Option<Live>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Makes `flush` (called with `truncate_open_spans` and a deadline) the
/// pipeline the hook flushes, and installs the hook once per process.
pub(crate) fn set_live(generation: u64, timeout: Duration, world_size: u32, flush: FlushFn) {
    let settle = if world_size > 1 {
        MULTI_RANK_SETTLE.min(timeout)
    } else {
        Duration::ZERO
    };
    let wait = timeout + settle + Duration::from_millis(500);
    DYING_WAIT_MS.store(
        wait.as_millis().try_into().unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
    *live() = Some(Live {
        generation,
        flush: std::sync::Arc::new(flush),
        timeout,
        settle,
    });
    install_once();
}

/// Forgets the pipeline of `generation` if it is the live one.
pub(crate) fn clear_live(generation: u64) {
    let mut l = live();
    if l.as_ref().is_some_and(|l| l.generation == generation) {
        *l = None;
    }
}

fn install_once() {
    static ONCE: OnceLock<()> = OnceLock::new();
    let mut first = false;
    ONCE.get_or_init(|| {
        first = true;
        if let Err(e) = start_flush_thread().and_then(|()| install_handlers()) {
            diag::warn(format_args!("cannot install the flush-on-signal hook: {e}"));
        }
        // SAFETY: registering a plain extern "C" function.
        unsafe { libc::atexit(wait_for_death_at_exit) };
    });
    // a forked child that sets lens up again inherited the handlers but
    // not the flush thread: it gets its own
    if !first && HOOK_PID.load(Ordering::Relaxed) != std::process::id() {
        if let Err(e) = start_flush_thread() {
            diag::warn(format_args!("cannot start the flush-on-signal thread: {e}"));
        }
    }
}

/// Starts the flush thread and its wake-up pipe, for this process.
fn start_flush_thread() -> std::io::Result<()> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned here.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: plain fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(write_end.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(
            write_end.as_raw_fd(),
            libc::F_SETFL,
            flags | libc::O_NONBLOCK,
        );
    }
    let reader = std::fs::File::from(read_end);
    std::thread::Builder::new()
        .name("lens-signal".into())
        .spawn(move || watch(reader))?;
    // the write end lives for the rest of the process; the pid is stored
    // last, so the handler only wakes this process's thread
    WAKE_FD.store(write_end.as_raw_fd(), Ordering::Release);
    std::mem::forget(write_end);
    HOOK_PID.store(std::process::id(), Ordering::Release);
    Ok(())
}

/// Installs lens's handler over each signal that is not ignored, keeping
/// the previous action's mask and flags (`SA_RESTART`, `SA_ONSTACK`,
/// `SA_NODEFER`): a blocking call the application expects to be
/// interrupted still is.
fn install_handlers() -> std::io::Result<()> {
    for (i, &sig) in SIGNALS.iter().enumerate() {
        // SAFETY: `sigaction` is plain data (integers, a mask and a
        // handler address), for which all zeros is a valid value.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: sigaction with a null new action only reads the current
        // one into `old`, a valid `sigaction` owned here.
        if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0 {
            continue;
        }
        if old.sa_sigaction == libc::SIG_IGN {
            continue; // ignored stays ignored
        }
        let h = &HOOKED[i];
        h.prev_action.store(old.sa_sigaction, Ordering::Relaxed);
        h.prev_siginfo
            .store(old.sa_flags & libc::SA_SIGINFO != 0, Ordering::Relaxed);
        h.prev_resethand
            .store(old.sa_flags & libc::SA_RESETHAND != 0, Ordering::Relaxed);
        // The previous action's mask and flags, with lens's handler:
        // SA_SIGINFO is lens's own; SA_RESETHAND is not kept (the previous
        // handler is called by lens's, which stays). Over the default
        // disposition, interrupted calls are restarted.
        let kept = libc::SA_RESTART | libc::SA_ONSTACK | libc::SA_NODEFER;
        let flags = if old.sa_sigaction == libc::SIG_DFL {
            libc::SA_RESTART
        } else {
            old.sa_flags & kept
        };
        let mut new: libc::sigaction = old;
        new.sa_sigaction = handler as *const () as usize;
        new.sa_flags = flags | libc::SA_SIGINFO;
        h.installed.store(true, Ordering::Release);
        // SAFETY: the previous action with our handler is a valid action
        // (`handler` has the `SA_SIGINFO` signature and is
        // async-signal-safe); the old action is not asked for (null).
        if unsafe { libc::sigaction(sig, &new, std::ptr::null_mut()) } != 0 {
            h.installed.store(false, Ordering::Release);
        }
    }
    Ok(())
}

fn index_of(sig: libc::c_int) -> Option<usize> {
    SIGNALS.iter().position(|&s| s == sig)
}

/// The signal handler: async-signal-safe only (atomics, write, getpid,
/// sigaction, raise and the previous handler).
extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ucontext: *mut libc::c_void) {
    // SAFETY: errno is thread-local; it is restored before returning.
    let errno = unsafe { *libc::__errno_location() };
    if let Some(i) = index_of(sig) {
        let h = &HOOKED[i];
        let prev = h.prev_action.load(Ordering::Relaxed);
        // SAFETY: getpid is async-signal-safe.
        let same_process = unsafe { libc::getpid() } as u32 == HOOK_PID.load(Ordering::Relaxed);
        if same_process {
            let sole = prev == libc::SIG_DFL && is_current_handler(sig);
            if sole && FLUSHING.load(Ordering::Acquire) {
                // a second signal while lens flushes for the first: the
                // process dies now, as it would have without lens
                die_by_default(sig);
            }
            if sole {
                DYING.store(true, Ordering::Release);
            }
            h.pending
                .fetch_max(if sole { FLUSH_AND_DIE } else { FLUSH }, Ordering::AcqRel);
            let fd = WAKE_FD.load(Ordering::Acquire);
            if fd >= 0 {
                let b = [sig as u8];
                // SAFETY: write on a non-blocking pipe; errors are ignored.
                let _ = unsafe { libc::write(fd, b.as_ptr().cast(), 1) };
            }
        }
        if prev != libc::SIG_DFL && prev != libc::SIG_IGN {
            // SAFETY: `prev` was the installed handler for `sig`, called
            // with the arguments its flags declare.
            unsafe {
                if h.prev_siginfo.load(Ordering::Relaxed) {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(prev);
                    f(sig, info, ucontext);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(prev);
                    f(sig);
                }
            }
            if h.prev_resethand.swap(false, Ordering::AcqRel) {
                // the one-shot handler ran: the default is behind lens now
                h.prev_action.store(libc::SIG_DFL, Ordering::Release);
            }
        } else if !same_process && prev == libc::SIG_DFL && is_current_handler(sig) {
            // a forked child has no flush thread: behave as the default
            die_by_default(sig);
        }
    }
    // SAFETY: see above.
    unsafe { *libc::__errno_location() = errno };
}

/// Whether lens's handler is the one installed for `sig` now.
fn is_current_handler(sig: libc::c_int) -> bool {
    // SAFETY: `sigaction` is plain data, for which all zeros is valid.
    let mut cur: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action: this only reads the current one into
    // `cur`, a valid `sigaction` owned here.
    (unsafe { libc::sigaction(sig, std::ptr::null(), &mut cur) } == 0)
        && cur.sa_sigaction == handler as *const () as usize
}

/// Restores the default disposition of `sig` and raises it.
fn die_by_default(sig: libc::c_int) {
    // SAFETY: installing SIG_DFL and raising are async-signal-safe.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut dfl.sa_mask);
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
}

/// The flush thread: wakes on the pipe, flushes, then dies by the signal
/// only where lens is the sole handler over a default disposition.
fn watch(mut reader: std::fs::File) {
    let mut buf = [0u8; 16];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
        for (i, &sig) in SIGNALS.iter().enumerate() {
            let h = &HOOKED[i];
            let sole = match h.pending.swap(NONE, Ordering::AcqRel) {
                NONE => continue,
                p => p == FLUSH_AND_DIE,
            };
            FLUSHING.store(true, Ordering::Release);
            let _ = std::panic::catch_unwind(|| on_signal(sig, sole));
            FLUSHING.store(false, Ordering::Release);
            if sole {
                die_by_default(sig);
            }
        }
    }
}

fn on_signal(sig: libc::c_int, sole: bool) {
    let target = live()
        .as_ref()
        .map(|l| (l.flush.clone(), l.timeout, l.settle));
    let Some((flush, timeout, settle)) = target else {
        return;
    };
    let report = flush(sole, timeout);
    if !report.is_clean() {
        diag::warn(format_args!("flush on signal {sig}: {report}"));
    }
    if sole && !settle.is_zero() {
        std::thread::sleep(settle);
    }
}

/// Waits, bounded by the flush deadline, while the process is about to die
/// of a signal lens alone handles: a `shutdown` or an `exit` that races the
/// signal flush does not end the process with status 0 first (a scheduler
/// would read a preempted job as a success).
pub(crate) fn wait_for_pending_death() {
    if !DYING.load(Ordering::Acquire) {
        return;
    }
    let limit = Duration::from_millis(DYING_WAIT_MS.load(Ordering::Relaxed));
    let start = std::time::Instant::now();
    while DYING.load(Ordering::Acquire) && start.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(5));
    }
}

extern "C" fn wait_for_death_at_exit() {
    let _ = std::panic::catch_unwind(wait_for_pending_death);
}
