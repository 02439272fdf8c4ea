//! `fork()`: a child forked while a lens pipeline is live is inert.
//!
//! Only the forking thread exists in a child: the exporter threads do not,
//! and a lock another thread of the parent held at the moment of the fork
//! stays locked forever. So a child created by `fork()` (without `exec`)
//! records nothing: at the fork, in the child, every span group is
//! switched off, the lens tracer is forgotten, the open-span registry is
//! reset without ending the parent's spans (the parent exports them, the
//! child never does), and spans that still reach a lens processor are
//! dropped and counted. The child's handle shuts down at once without
//! touching the parent's pipeline, and reports the spans it dropped. A
//! child forked while no pipeline is live is an ordinary process, and a
//! child may set lens up again: it then gets a pipeline of its own.
//! Everything done in the handler is a plain atomic store or load:
//! async-signal-safe, as a fork handler must be.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Once;

static IN_CHILD: AtomicBool = AtomicBool::new(false);
/// Whether a pipeline is live (a fork now makes an inert child).
static ARMED: AtomicBool = AtomicBool::new(false);
/// Spans ended in an inert child (never exported).
static DROPPED_IN_CHILD: AtomicU64 = AtomicU64::new(0);

/// Whether this process is a child forked while a lens pipeline was live
/// (and has not set lens up again since).
#[inline]
pub(crate) fn in_child() -> bool {
    IN_CHILD.load(Ordering::Relaxed)
}

/// Setup arms the handler while a pipeline is live, and disarms it at the
/// pipeline's teardown.
pub(crate) fn set_armed(on: bool) {
    ARMED.store(on, Ordering::Release);
}

/// A child that sets lens up again leaves the inert state: its new
/// pipeline (threads, queues) is its own.
pub(crate) fn leave_child() {
    IN_CHILD.store(false, Ordering::Release);
    DROPPED_IN_CHILD.store(0, Ordering::Relaxed);
}

/// Counts a span dropped because this is an inert child.
pub(crate) fn note_dropped() {
    DROPPED_IN_CHILD.fetch_add(1, Ordering::Relaxed);
}

/// Spans dropped in this inert child so far.
pub(crate) fn dropped_in_child() -> u64 {
    DROPPED_IN_CHILD.load(Ordering::Relaxed) + crate::api::span::record::dropped_in_child()
}

/// Registers the fork handler, once per process.
pub(crate) fn install_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `child` runs in the child, which has one thread, after
        // the C library has made its allocator usable there (glibc resets
        // malloc's locks before it calls the atfork child handlers). It
        // does atomic stores, and may allocate and free: a fresh span
        // registry when the old one's lock was held at the fork
        // (`ForkFresh::replace` boxes it), and the old registry's list of
        // lists cleared. It takes no lock that another thread of the
        // parent may have held (a registry lock held at fork is left,
        // never waited for). Not async-signal-safe in POSIX's strict sense;
        // sound with glibc, the C library lens supports.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(child)) };
        if rc != 0 {
            crate::diag::warn(format_args!(
                "cannot register the fork handler (error {rc}); a forked child may export its parent's spans"
            ));
        }
    });
}

extern "C" fn child() {
    if !ARMED.load(Ordering::Acquire) {
        return;
    }
    DROPPED_IN_CHILD.store(0, Ordering::Relaxed);
    IN_CHILD.store(true, Ordering::Relaxed);
    crate::api::groups::disable_all_after_fork();
    crate::api::span::forget_tracer_after_fork();
    crate::api::span::open::reset_after_fork();
    // batches in flight in the parent's threads do not exist here
    crate::api::span::open::records::reset_after_fork();
}
