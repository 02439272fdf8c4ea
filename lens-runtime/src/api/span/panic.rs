//! The panic hook that lets a span unwound by a panic carry the panic's
//! message.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

thread_local! {
    // the message and, when backtraces are on, the backtrace of the panic
    static LAST_PANIC: RefCell<Option<(String, Option<String>)>> = const { RefCell::new(None) };
}

/// Set once any panic message was recorded, so that span ends can forget a
/// stale message cheaply (one relaxed load while no panic ever happened).
pub(crate) static PANIC_RECORDED: AtomicBool = AtomicBool::new(false);

/// Installs (once) a panic hook that remembers the panic message for the
/// guards the panic unwinds through, then calls the previous hook. Called by
/// setup and [`set_tracer_provider`], never on the span path, and never from
/// a panicking thread (taking the hook there aborts the process).
#[cfg_attr(not(feature = "sdk-core"), allow(dead_code))] // setup and set_tracer_provider
pub(crate) fn install_panic_hook() {
    static HOOK: Once = Once::new();
    if std::thread::panicking() {
        return;
    }
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "Box<dyn Any>".to_owned());
            // captured here, at the panic site: by the time a guard's drop
            // runs, the frames below it are unwound
            let stack = super::exception::captured_backtrace();
            let _ = LAST_PANIC.try_with(|p| {
                if let Ok(mut p) = p.try_borrow_mut() {
                    *p = Some((msg, stack));
                }
            });
            PANIC_RECORDED.store(true, Ordering::Relaxed);
            previous(info);
        }));
    });
}

/// The message (and backtrace, when captured) of the panic unwinding
/// through a span: the one the hook recorded on this thread. A panic re-raised with `resume_unwind` does not
/// run the hook; a message left from an earlier, caught panic is forgotten
/// at the first span start or end outside a panic, so it is not reused for
/// it (the span is labelled "panicked").
pub(crate) fn panic_message() -> (String, Option<String>) {
    LAST_PANIC
        .try_with(|p| p.try_borrow().ok().and_then(|p| p.clone()))
        .ok()
        .flatten()
        .unwrap_or_else(|| ("panicked".to_owned(), None))
}

#[cold]
#[inline(never)]
pub(crate) fn forget_panic_message() {
    let _ = LAST_PANIC.try_with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            *p = None;
        }
    });
}
