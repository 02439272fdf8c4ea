//! Whether this thread's OpenTelemetry context can still be reached.
//!
//! OpenTelemetry keeps the current context in a thread local that it
//! reaches with `LocalKey::with`, which panics once the thread local is
//! destroyed: at thread exit, a span started or a guard dropped in a
//! destructor that runs after it (a user's thread local, say) would panic
//! inside a thread-local destructor, which aborts the process. Lens
//! checks this first.
//!
//! Thread-local destructors run in the reverse order of their
//! registration, so a sentinel registered right after OpenTelemetry's
//! context (touched first, then the sentinel) is destroyed before it: its
//! destructor marks the context gone while it can still be reached, and
//! from then on spans on this thread are inert (not recorded, not made
//! current) and guards leave the context stack alone (it goes with the
//! thread).

use opentelemetry::{Context, ContextGuard};
use std::cell::Cell;

const UNARMED: u8 = 0;
const LIVE: u8 = 1;
const GONE: u8 = 2;

thread_local! {
    // no destructor: readable at any time, during other destructors too
    static STATE: Cell<u8> = const { Cell::new(UNARMED) };
    static SENTINEL: Sentinel = const { Sentinel };
}

struct Sentinel;

impl Drop for Sentinel {
    fn drop(&mut self) {
        STATE.set(GONE);
    }
}

/// Whether spans may use OpenTelemetry's context on this thread (a
/// thread-local load once the thread's first span armed the sentinel).
#[inline(always)]
pub(crate) fn otel_context_live() -> bool {
    match STATE.get() {
        LIVE => true,
        GONE => false,
        _ => arm(),
    }
}

/// Whether OpenTelemetry's context may be gone on this thread: a guard
/// then forgets its `ContextGuard` instead of dropping it (its drop would
/// reach the context).
#[inline(always)]
pub(crate) fn otel_context_gone() -> bool {
    STATE.get() == GONE
}

/// Registers the sentinel after OpenTelemetry's context (this thread's
/// first span). A context destroyed already (the thread's first span is
/// in a destructor that runs after it) panics when reached: caught here,
/// and the thread's spans are inert.
#[cold]
#[inline(never)]
fn arm() -> bool {
    let reachable = std::panic::catch_unwind(|| Context::map_current(|_| ())).is_ok();
    let armed = reachable && SENTINEL.try_with(|_| ()).is_ok();
    STATE.set(if armed { LIVE } else { GONE });
    armed
}

/// Makes `cx` current, unless OpenTelemetry's context is gone on this
/// thread (at thread exit); [`detach`] undoes it.
#[inline(always)]
pub(crate) fn attach_if_live(cx: &Context) -> Option<ContextGuard> {
    otel_context_live().then(|| cx.clone().attach())
}

/// Restores the context before a guard's (drops its `ContextGuard`),
/// unless OpenTelemetry's context is gone on this thread (at thread exit:
/// dropping it would reach the context, and panic): the stack goes with
/// the thread.
#[inline(always)]
pub(crate) fn detach(attached: Option<ContextGuard>) {
    // SAFETY: the `ManuallyDrop` is not used again
    unsafe { detach_in_place(&mut std::mem::ManuallyDrop::new(attached)) }
}

/// [`detach`] of the `ContextGuard` in `attached`, dropped where it lies
/// (a guard's own field: not moved out to be dropped, a copy to the stack
/// first), or forgotten.
///
/// # Safety
///
/// `attached` is not used again (it is dropped or forgotten here).
#[inline(always)]
pub(crate) unsafe fn detach_in_place(attached: &mut std::mem::ManuallyDrop<Option<ContextGuard>>) {
    if attached.is_some() && !otel_context_gone() {
        // SAFETY: dropped once (the caller's promise)
        unsafe { std::mem::ManuallyDrop::drop(attached) }
    }
}
