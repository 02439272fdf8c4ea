//! The span engine: where a span of lens's own path (`NEMO_LENS_SPAN_PATH=lens`)
//! is recorded, kept while open, handed over once finished and made into
//! the SDK's `SpanData` for export; and the slot of the other engine, the
//! OpenTelemetry SDK's tracer (`NEMO_LENS_SPAN_PATH=sdk`).
//!
//! A layer below `api`: the engine knows the OpenTelemetry API and SDK and
//! nothing of lens's API; `api` reaches it through one socket,
//! `api/engine_socket.rs`, the one file of `api/` that names the engine or
//! `opentelemetry_sdk` (`tests/layers.rs` checks both). The layers above
//! (`sdk`, `setup`) install it and drain it.
//!
//! A span's life across its three threads (ARCHITECTURE.md draws it):
//!
//! - the calling thread: [`recorder`] starts the [`record`] (ids, sampling,
//!   [`clock`]) and places it in a slot of the thread's list in [`open`];
//!   the end marks it finished where it lies; every
//!   [`HAND_OVER_AT`](collector::HAND_OVER_AT) finished records, the ending
//!   thread hands the list's finished slots over as one batch;
//! - the collector thread (`lens-span-collect`, [`collector`]): takes the
//!   handed-over batches and drains every list on an interval, into the
//!   sink (lens's batch span processor, in `sdk`);
//! - the export thread (`lens-span-export`, in `sdk`): builds the SDK's
//!   `SpanData` from the records where they lie ([`to_span_data`]) just
//!   before each export.

pub(crate) mod attrs;
#[cfg(feature = "sdk-core")]
pub(crate) mod clock;
#[cfg(feature = "sdk-core")]
pub(crate) mod collector;
pub(crate) mod fork_fresh;
pub(crate) mod names;
pub(crate) mod open;
#[cfg(feature = "sdk-core")]
pub(crate) mod record;
#[cfg(feature = "sdk-core")]
pub(crate) mod recorder;
#[cfg(feature = "sdk-core")]
pub(crate) mod sdk_tracer;
pub(crate) mod sync;
#[cfg(feature = "sdk-core")]
pub(crate) mod to_span_data;
