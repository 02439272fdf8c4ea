//! Trace and span ids that are unique across threads, across ranks whose
//! code seeds its RNGs identically, and across `fork()`ed children: the
//! SDK's `IdGenerator` over the per-thread source lens's span recorder
//! draws from ([`crate::engine::recorder::ids`]).

use crate::engine::recorder::ids;
use opentelemetry::trace::{SpanId, TraceId};
use opentelemetry_sdk::trace::IdGenerator;

/// The id generator every lens tracer provider uses.
///
/// ```
/// use lens::ForkSafeIdGenerator;
/// use opentelemetry_sdk::trace::IdGenerator;
/// let g = ForkSafeIdGenerator::new();
/// assert_ne!(g.new_trace_id(), g.new_trace_id());
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ForkSafeIdGenerator(());

impl ForkSafeIdGenerator {
    /// Creates the generator (and registers the fork handler once).
    pub fn new() -> Self {
        ids::install_fork_handler();
        ForkSafeIdGenerator(())
    }
}

impl Default for ForkSafeIdGenerator {
    fn default() -> Self {
        Self::new()
    }
}

impl IdGenerator for ForkSafeIdGenerator {
    fn new_trace_id(&self) -> TraceId {
        ids::trace_id()
    }

    fn new_span_id(&self) -> SpanId {
        ids::span_id()
    }
}
