//! The batch processor's queue: single spans (the SDK path) and whole
//! buffers handed over by lens's own span path.

use opentelemetry_sdk::trace::SpanData;
use std::collections::VecDeque;

/// The spans waiting for export: single spans (the SDK path) and whole
/// buffers handed over by lens's own span path, kept as they came so the
/// handing thread does not copy them; the exporter thread joins them.
#[derive(Default)]
pub(super) struct Queue {
    pub(super) single: VecDeque<SpanData>,
    batches: Vec<Vec<SpanData>>,
    /// Spans in `batches`.
    batched: usize,
}

impl Queue {
    pub(super) fn len(&self) -> usize {
        self.single.len() + self.batched
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Queues one span after everything queued so far (after the last
    /// buffer, if any, so spans leave in the order they came).
    pub(super) fn push_back(&mut self, span: SpanData) {
        match self.batches.last_mut() {
            Some(last) => {
                last.push(span);
                self.batched += 1;
            }
            None => self.single.push_back(span),
        }
    }

    pub(super) fn push_batch(&mut self, spans: Vec<SpanData>) {
        self.batched += spans.len();
        self.batches.push(spans);
    }

    /// The whole buffers queued (joined by the exporter thread, without
    /// the lock).
    pub(super) fn take_batches(&mut self) -> Vec<Vec<SpanData>> {
        self.batched = 0;
        std::mem::take(&mut self.batches)
    }
}
