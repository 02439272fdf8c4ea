//! Spans of lens's own path made where they are returned: the recorder
//! writes a span's context and registration straight into the fields of
//! the `LensSpan` or `SpanGuard` being made (no value made on the stack
//! and copied), and what a start or an attach that panics leaves is ended
//! here, not leaked.

use super::{forget_stale_panic, record_panic, ActiveGuard, LensSpan, SpanHandle, SpanInner};
use crate::api::engine_socket::{clock, recorder, Registration, SpanPlace, Written};
use opentelemetry::ContextGuard;

/// Ends, with the panic unwinding through it, the record of a span whose
/// start panicked after the record was registered (making its context:
/// e.g. an OpenTelemetry context observer's view), as `finish` would have
/// ended it: not left open to be truncated at shutdown.
#[cold]
#[inline(never)]
fn end_unstarted(reg: Registration) {
    record_panic(&SpanHandle::Record(reg));
    // made in this process (a fork cannot come between), so never counted
    // as a span lost in a child
    recorder::end_record(&reg, || false, clock::now());
}

/// Writes the span `start` writes into `span`, a span of lens's own path:
/// its context and registration (by `start`), then its `has_record` flag.
/// If `start` panics once the record is registered (making its context:
/// an OpenTelemetry context observer's view), the record is ended with
/// the panic, and `span` is left unwritten.
///
/// # Safety
///
/// `span` is valid for writes and holds no value; it holds one when this
/// returns.
#[inline(always)]
unsafe fn write_from_recorder(
    span: *mut LensSpan,
    start: impl for<'a> FnOnce(SpanPlace<'a>) -> Written<'a>,
) {
    /// The registration written so far, ended if the start unwinds.
    struct EndOnUnwind(*const Option<Registration>);
    impl Drop for EndOnUnwind {
        #[inline(always)]
        fn drop(&mut self) {
            // SAFETY: the slot is initialised by `SpanPlace::new` (`None`
            // until the record is registered), and nothing else reads it
            if let Some(reg) = unsafe { *self.0 } {
                end_unstarted(reg);
            }
        }
    }
    // SAFETY: the pointers are to fields of `*span` (`ManuallyDrop` is
    // `repr(transparent)`), each written before the return: `open` (by
    // `SpanPlace::new`, then by `start`) and `cx` by `start` (the `Written`
    // it returns can only have been made by writing this very `SpanPlace`:
    // it is branded with its lifetime), then `has_record`. If `start`
    // panics, only `open` was written (each `start` returns `write`'s
    // proof at once: a panic after the write would leak the context, not
    // read it), and its registration, if any, is ended here (a
    // `Registration` is `Copy`: nothing to drop).
    unsafe {
        let inner = std::ptr::addr_of_mut!((*span).inner).cast::<SpanInner>();
        let open = std::ptr::addr_of_mut!((*inner).open);
        let out = SpanPlace::new(
            &mut *std::ptr::addr_of_mut!((*inner).cx).cast(),
            &mut *open.cast(),
        );
        let end_on_unwind = EndOnUnwind(open);
        let _written = start(out);
        std::mem::forget(end_on_unwind);
        std::ptr::addr_of_mut!((*inner).has_record).write(true);
    }
    // after the start, not before (before, it is one more call on every
    // span's path, with nothing to forget nearly always). So a
    // start that unwinds by `resume_unwind` (no hook) right after a panic
    // was caught with no span in between records that panic's message.
    forget_stale_panic();
}

impl LensSpan {
    /// A span of lens's own path, made where it is returned: `start`
    /// writes its context and registration straight into its fields.
    #[inline(always)]
    pub(super) fn from_recorder(start: impl for<'a> FnOnce(SpanPlace<'a>) -> Written<'a>) -> Self {
        let mut out = std::mem::MaybeUninit::<LensSpan>::uninit();
        // SAFETY: `out` is a `LensSpan` to write; it is fully written by
        // `write_from_recorder` when it returns
        unsafe {
            write_from_recorder(out.as_mut_ptr(), start);
            out.assume_init()
        }
    }
}

impl ActiveGuard {
    /// Writes into `out` the guard of a span of lens's own path, current
    /// on this thread (whose OpenTelemetry context is live): `start`
    /// writes the started span's context and registration straight into
    /// the guard's fields (no context, `LensSpan` or guard made on the
    /// stack and copied field by field, which costs most with
    /// `NEMO_LENS_OTEL_CONTEXT=ids`), and `out` is where the caller keeps
    /// it (a guard made here and returned would be copied there once
    /// more).
    #[inline(always)]
    pub(crate) fn from_recorder_live_into(
        out: &mut std::mem::MaybeUninit<ActiveGuard>,
        start: impl for<'a> FnOnce(SpanPlace<'a>) -> Written<'a>,
    ) {
        /// Ends the span written into a guard that is not made after all
        /// (attaching its context panicked: e.g. a span started inside
        /// `Context::map_current`, whose borrow of the context stack makes
        /// the attach panic), as dropping the `LensSpan` would.
        struct EndOnUnwind(*mut LensSpan);
        impl Drop for EndOnUnwind {
            #[inline(always)]
            fn drop(&mut self) {
                end_unattached(self.0);
            }
        }
        /// Out of line, so that the site's unwind path is one call.
        #[cold]
        #[inline(never)]
        fn end_unattached(span: *mut LensSpan) {
            // SAFETY: only reached while unwinding from the attach below
            // (`EndOnUnwind` is forgotten after it), when the span's
            // fields are all written and nothing else owns or drops them
            unsafe { std::ptr::drop_in_place(span) }
        }
        let guard = out.as_mut_ptr();
        // SAFETY: the pointers are to fields of `out` (`ManuallyDrop` is
        // `repr(transparent)`), each written once before the return: the
        // span by `write_from_recorder`, then `attached`. If `start` panics,
        // `write_from_recorder` cleans up and `out` is left unwritten. If the
        // attach panics, `EndOnUnwind` drops the span (written by then)
        // and `out`, a `MaybeUninit`, is left holding nothing.
        unsafe {
            let span = std::ptr::addr_of_mut!((*guard).span).cast::<LensSpan>();
            write_from_recorder(span, start);
            let end_on_unwind = EndOnUnwind(span);
            let cx = std::ptr::addr_of!((*span).inner).cast::<SpanInner>();
            let attached = (*cx).cx.clone().attach();
            std::mem::forget(end_on_unwind);
            std::ptr::addr_of_mut!((*guard).attached)
                .cast::<Option<ContextGuard>>()
                .write(Some(attached));
        }
    }
}
