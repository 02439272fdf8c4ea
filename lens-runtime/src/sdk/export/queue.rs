//! The batch processor's queue: single spans (the SDK path) and whole
//! batches of finished records handed over by lens's own span path.

use crate::engine::record::FinishedBatch;
use opentelemetry_sdk::trace::SpanData;
use std::collections::VecDeque;

/// The spans waiting for export: single spans (the SDK path), and the
/// batches of records lens's own span path hands over, kept as they came
/// (the exporter thread builds them into spans just before their export).
#[derive(Default)]
pub(super) struct Queue {
    pub(super) single: VecDeque<SpanData>,
    records: Vec<FinishedBatch>,
    /// Records in `records`.
    recorded: usize,
}

impl Queue {
    pub(super) fn len(&self) -> usize {
        self.single.len() + self.recorded
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Queues one span of the SDK path.
    pub(super) fn push_back(&mut self, span: SpanData) {
        self.single.push_back(span);
    }

    /// Queues a batch of lens's records.
    pub(super) fn push_records(&mut self, batch: FinishedBatch) {
        self.recorded += batch.len();
        self.records.push(batch);
    }

    /// The batches of records queued (built by the exporter thread,
    /// without the lock).
    pub(super) fn take_records(&mut self) -> Vec<FinishedBatch> {
        self.recorded = 0;
        std::mem::take(&mut self.records)
    }
}

/// The spans of `single` (emptied, its allocation kept), in order, as
/// export batches of at most `max`.
pub(super) fn export_batches(
    single: &mut VecDeque<SpanData>,
    max: usize,
) -> VecDeque<Vec<SpanData>> {
    let max = max.max(1);
    let mut out = VecDeque::new();
    while !single.is_empty() {
        let n = single.len().min(max);
        out.push_back(single.drain(..n).collect());
    }
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A finished span `s{i}` as lens's own span path hands it over.
    pub(in crate::sdk::export) fn finished(i: u64, sampled: bool) -> SpanData {
        use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId};
        let flags = match sampled {
            true => TraceFlags::SAMPLED,
            false => TraceFlags::default(),
        };
        SpanData {
            span_context: SpanContext::new(
                TraceId::from(1u128),
                SpanId::from(i + 1),
                flags,
                false,
                Default::default(),
            ),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: format!("s{i}").into(),
            start_time: std::time::SystemTime::UNIX_EPOCH,
            end_time: std::time::SystemTime::UNIX_EPOCH,
            attributes: Vec::new(),
            dropped_attributes_count: 0,
            events: Default::default(),
            links: Default::default(),
            status: Status::Unset,
            instrumentation_scope: Default::default(),
        }
    }

    #[test]
    fn export_batches_keep_the_order_and_the_size_limit() {
        let single: VecDeque<SpanData> = (0..23).map(|i| finished(i, true)).collect();
        for max in [1, 2, 4, 7, 100] {
            let mut s = single.clone();
            let out = export_batches(&mut s, max);
            assert!(s.is_empty());
            assert!(
                out.iter().all(|b| !b.is_empty() && b.len() <= max),
                "max {max}"
            );
            let ids: Vec<u64> = out
                .iter()
                .flatten()
                .map(|s| u64::from_be_bytes(s.span_context.span_id().to_bytes()) - 1)
                .collect();
            assert_eq!(ids, (0..23).collect::<Vec<_>>(), "max {max}");
        }
        assert!(export_batches(&mut VecDeque::new(), 4).is_empty());
    }
}
