//! The API layer's one socket into the span engine ([`crate::engine`]):
//! every name `api/` takes from the engine comes through here, and this is
//! the one file of `api/` that names `opentelemetry_sdk` (the provider lens
//! spans are made with). `tests/layers.rs` fails when another file of
//! `api/` names either.
//!
//! What comes through: the attribute list a site hands its span, the
//! names the engine writes, the open-span lists a span registers in (both
//! span paths), and, with the SDK built in, lens's own recorder (start,
//! end, the placement of a started span, the clock), the slot of the SDK's
//! tracer and the SDK's provider type it is installed from. Nothing else:
//! this module uses no other module of `api/`, so that every module of
//! `api/` can use it. Installing, draining and forking the engine are the
//! business of the layers above (`sdk`, `setup`), which use the engine
//! directly.

pub use crate::engine::attrs::Attrs;
// the names the engine writes itself, checked against `semconv`'s
#[cfg(test)]
pub(crate) use crate::engine::names::{SPAN_TRUNCATED, SPAN_TRUNCATED_REASON};
#[cfg(feature = "sdk-core")]
pub(crate) use crate::engine::open::record_slots::find;
pub(crate) use crate::engine::open::{register, Registration};
#[cfg(feature = "sdk-core")]
pub(crate) use crate::engine::recorder::placement::{OwnedRef, SpanPlace, Written};
/// The provider [`set_tracer_provider`](crate::set_tracer_provider)
/// installs lens spans from.
#[cfg(feature = "sdk-core")]
pub(crate) use opentelemetry_sdk::trace::SdkTracerProvider;

/// Lens's own recorder: the one in use, and a span's end.
#[cfg(feature = "sdk-core")]
pub(crate) mod recorder {
    pub(crate) use crate::engine::recorder::Recorder;
    pub(crate) use crate::engine::recorder::{end_record, forget_after_fork, get, ids_only};
}

/// The clock of the recorder's records.
#[cfg(feature = "sdk-core")]
pub(crate) mod clock {
    pub(crate) use crate::engine::clock::now;
}

/// The slot of the SDK's tracer.
#[cfg(feature = "sdk-core")]
pub(crate) mod sdk_tracer {
    pub(crate) use crate::engine::sdk_tracer::{get, set};
}
