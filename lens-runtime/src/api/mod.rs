//! The API layer: what instrumented code needs, on the OpenTelemetry API
//! alone (span groups, attribute values, span guards, futures, semantic
//! conventions, the instrument sets and W3C propagation).

pub(crate) mod attr;
pub(crate) mod engine_socket;
pub(crate) mod future;
pub(crate) mod groups;
pub(crate) mod metrics;
pub(crate) mod propagation;
pub(crate) mod scope;
pub mod semconv;
#[cfg(feature = "tower")]
pub(crate) mod serving;
pub(crate) mod span;
#[cfg(any(feature = "logs", feature = "tracing"))]
pub(crate) mod targets;
