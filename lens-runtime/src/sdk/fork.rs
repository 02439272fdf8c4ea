//! `fork()`: a forked child is inert.
//!
//! Only the forking thread exists in a child: the exporter threads do not,
//! and a lock another thread of the parent held at the moment of the fork
//! stays locked forever. So a child created by `fork()` (without `exec`)
//! records nothing: at the fork, in the child, every span group is
//! switched off, the lens tracer is forgotten, the open-span registry is
//! reset without ending the parent's spans (the parent exports them, the
//! child never does), and spans that still reach a lens processor are
//! dropped and counted. The child's handle shuts down at once without
//! touching the parent's pipeline. Everything done here is a plain atomic
//! store: async-signal-safe, as a fork handler must be.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

static IN_CHILD: AtomicBool = AtomicBool::new(false);

/// Whether this process is a child forked after lens was set up.
#[inline]
pub(crate) fn in_child() -> bool {
    IN_CHILD.load(Ordering::Relaxed)
}

/// Registers the fork handler, once per process.
pub(crate) fn install_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `child` only does atomic stores and calls no allocator.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(child)) };
        if rc != 0 {
            crate::diag::warn(format_args!(
                "cannot register the fork handler (error {rc}); a forked child may export its parent's spans"
            ));
        }
    });
}

extern "C" fn child() {
    IN_CHILD.store(true, Ordering::Relaxed);
    crate::api::groups::disable_all_after_fork();
    crate::api::span::forget_tracer_after_fork();
    crate::api::span::open::reset_after_fork();
}
