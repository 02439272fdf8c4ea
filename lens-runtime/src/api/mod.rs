//! The API layer: what instrumented code needs, on the OpenTelemetry API
//! alone (span groups, attribute values, span guards, futures, semantic
//! conventions; with `sdk`, also the instrument sets and W3C propagation).

pub mod attr;
pub mod future;
pub mod groups;
#[cfg(feature = "sdk")]
pub mod metrics;
#[cfg(feature = "sdk")]
pub mod propagation;
pub mod semconv;
pub mod span;
