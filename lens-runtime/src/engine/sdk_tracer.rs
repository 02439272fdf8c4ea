//! The other engine: the OpenTelemetry SDK's tracer lens spans are made
//! with once a provider is installed and lens's own recorder is not (the
//! SDK span path, `NEMO_LENS_SPAN_PATH=sdk`). Read with one acquire load
//! on the span path.

use opentelemetry_sdk::trace::SdkTracer;
use std::sync::atomic::{AtomicPtr, Ordering};

// The tracer lens spans are created with once a provider is installed.
// Each install leaks one small tracer (installs are rare: setup, tests);
// in exchange the hot path is one acquire load, no lock, no refcount.
static TRACER: AtomicPtr<SdkTracer> = AtomicPtr::new(std::ptr::null_mut());

/// The tracer installed, if any.
#[inline]
pub(crate) fn get() -> Option<&'static SdkTracer> {
    // SAFETY: the pointer is null or a leaked `Box<SdkTracer>`, never freed.
    unsafe { TRACER.load(Ordering::Acquire).as_ref() }
}

/// Installs `tracer` (`None`: forgets the one installed), turning lens's
/// own recorder off: it is set up after the tracer, by setup.
pub(crate) fn set(tracer: Option<SdkTracer>) {
    crate::engine::recorder::uninstall();
    let ptr = tracer.map_or(std::ptr::null_mut(), |t| Box::into_raw(Box::new(t)));
    TRACER.store(ptr, Ordering::Release);
}
