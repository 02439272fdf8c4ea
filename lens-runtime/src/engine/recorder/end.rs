//! The end of a span of lens's path: its record marked finished where it
//! lies, and, every [`HAND_OVER_AT`](collector::HAND_OVER_AT) finished
//! records in a list, the list's batch handed to the collector.

use crate::engine::clock::Stamp;
use crate::engine::collector;
use crate::engine::open::Registration;

/// Ends the span at `reg` at `at`, if it is still open (`sampled`: its
/// span context's flag, for the count of spans a forked child drops; read
/// only then).
#[inline(always)]
pub(crate) fn end_record(reg: &Registration, sampled: impl FnOnce() -> bool, at: Stamp) {
    match reg.mark_finished(collector::HAND_OVER_AT, |r| r.end = at) {
        Ok(Some((batch, in_flight))) => {
            collector::hand_over(batch);
            drop(in_flight);
        }
        Ok(None) => {}
        Err(()) if sampled() => collector::count_dropped_in_child(),
        Err(()) => {}
    }
}
