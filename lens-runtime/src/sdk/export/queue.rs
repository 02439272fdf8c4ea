//! The batch processor's queue: single spans (the SDK path) and whole
//! buffers handed over by lens's own span path.

use opentelemetry_sdk::trace::SpanData;
use std::collections::VecDeque;

/// Room of the buffer a single span starts after a full handed-over one.
const SMALL: usize = 64;

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
    /// buffer, if any, so spans leave in the order they came). A full
    /// buffer is not grown: a handed-over one holds up to an export batch
    /// (~700 KB at 2,048 spans), and reallocating it here would copy all of
    /// it on the ending thread, under the queue's lock; a small buffer of
    /// its own follows it instead (joined at export).
    pub(super) fn push_back(&mut self, span: SpanData) {
        match self.batches.last_mut() {
            Some(last) if last.len() < last.capacity() => last.push(span),
            Some(_) => {
                let mut own = Vec::with_capacity(SMALL);
                own.push(span);
                self.batches.push(own);
            }
            None => return self.single.push_back(span),
        }
        self.batched += 1;
    }

    /// Whether a single span queued now would join lens's buffers.
    pub(super) fn has_batches(&self) -> bool {
        !self.batches.is_empty()
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

/// The spans of `single` (emptied, its allocation kept) and of `batches`,
/// in order, as export batches of at most `max`. A buffer that fits is
/// exported as it came, and only a buffer larger than `max` is cut. A
/// buffer joins the one before it when the join fits in `max` (partial
/// buffers, such as a collector drain's, leave in one export call, not one
/// each); batches are not refilled to exactly `max`, which would shift
/// every later buffer by the first partial one and copy each of its spans,
/// twice.
pub(super) fn export_batches(
    single: &mut VecDeque<SpanData>,
    batches: Vec<Vec<SpanData>>,
    max: usize,
) -> VecDeque<Vec<SpanData>> {
    let max = max.max(1);
    let mut out = VecDeque::new();
    let mut cur: Vec<SpanData> = Vec::new();
    while !single.is_empty() {
        let n = single.len().min(max - cur.len());
        cur.extend(single.drain(..n));
        if cur.len() == max {
            out.push_back(std::mem::take(&mut cur));
        }
    }
    let mut pieces: Vec<Vec<SpanData>> = Vec::new();
    for mut b in batches {
        // a buffer larger than `max` is cut from its end: each cut copies
        // only the piece it cuts off, into an allocation of its size (cut
        // from the front, each piece would keep the allocation of the whole
        // rest, and each cut copy that rest: quadratic memory and time)
        while b.len() > max {
            pieces.push(b.split_off((b.len() - 1) / max * max));
        }
        if !pieces.is_empty() {
            b.shrink_to_fit();
        }
        push_joined(&mut out, &mut cur, b, max);
        while let Some(p) = pieces.pop() {
            push_joined(&mut out, &mut cur, p, max);
        }
    }
    if !cur.is_empty() {
        out.push_back(cur);
    }
    out
}

/// Adds `b` (at most `max` spans) after `cur`: joined when both fit in one
/// batch (an export call costs far more than copying a partial buffer),
/// else `cur` goes out and `b`, as it came, takes its place.
fn push_joined(
    out: &mut VecDeque<Vec<SpanData>>,
    cur: &mut Vec<SpanData>,
    mut b: Vec<SpanData>,
    max: usize,
) {
    if b.is_empty() {
        return;
    }
    if !cur.is_empty() && cur.len() + b.len() <= max {
        cur.append(&mut b);
    } else {
        let full = std::mem::replace(cur, b);
        if !full.is_empty() {
            out.push_back(full);
        }
    }
    if cur.len() == max {
        out.push_back(std::mem::take(cur));
    }
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

    /// `n` finished, sampled spans with ids from `from` on.
    fn run(from: u64, n: u64) -> Vec<SpanData> {
        (from..from + n).map(|i| finished(i, true)).collect()
    }

    #[test]
    fn export_batches_keep_the_order_and_the_size_limit() {
        let mut next = 0u64;
        let mut take = |n: u64| {
            let v: Vec<SpanData> = (next..next + n).map(|i| finished(i, true)).collect();
            next += n;
            v
        };
        let mut single: VecDeque<SpanData> = take(5).into();
        let batches = vec![take(3), take(8), take(1), take(4), take(0), take(2)];
        for max in [1, 2, 4, 7, 100] {
            let mut s = single.clone();
            let out = export_batches(&mut s, batches.clone(), max);
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
        single.clear();
        assert!(export_batches(&mut single, Vec::new(), 4).is_empty());
    }

    /// Partial buffers (each a collector drain's few spans, built with
    /// exactly their capacity) that fit in one export batch together leave
    /// in one export call, not one call each.
    #[test]
    fn partial_buffers_that_fit_together_leave_in_one_call() {
        let batches: Vec<Vec<SpanData>> = (0..5).map(|k| run(k * 100, 100)).collect();
        assert!(batches.iter().all(|b| b.capacity() == b.len()));
        let out = export_batches(&mut VecDeque::new(), batches, 512);
        let lens: Vec<usize> = out.iter().map(Vec::len).collect();
        assert_eq!(lens, [500], "one export call per drained buffer");
        // lens's defaults: handed-over batches of 512, 2048 per call
        let full = |k: u64| {
            (k * 512..(k + 1) * 512)
                .map(|i| finished(i, true))
                .collect::<Vec<_>>()
        };
        let out = export_batches(&mut VecDeque::new(), (0..4).map(full).collect(), 2048);
        let lens: Vec<usize> = out.iter().map(Vec::len).collect();
        assert_eq!(lens, [2048]);
    }

    /// A long buffer (the SDK path's spans join the last buffer queued,
    /// up to the queue's size while the exporter is busy) is cut into
    /// pieces that hold about their own spans' memory, not each the
    /// capacity of the whole rest of the buffer it was cut from (quadratic
    /// memory: 65 536 queued spans cut by 2 048 hold a million spans'
    /// room, a queue of 2^20 tens of GB).
    #[test]
    fn a_long_buffer_is_cut_into_pieces_that_hold_their_own_size() {
        let (n, max) = (4096u64, 64);
        let long: Vec<SpanData> = (0..n).map(|i| finished(i, true)).collect();
        let out = export_batches(&mut VecDeque::new(), vec![long], max);
        assert_eq!(out.len(), (n as usize).div_ceil(max));
        let ids: Vec<String> = out.iter().flatten().map(|s| s.name.to_string()).collect();
        assert_eq!(ids, (0..n).map(|i| format!("s{i}")).collect::<Vec<_>>());
        let room: usize = out.iter().map(Vec::capacity).sum();
        assert!(room <= 2 * n as usize, "{room} spans' room for {n} spans");
    }

    /// A single span queued after a full handed-over buffer does not grow
    /// (reallocate and copy) that buffer.
    #[test]
    fn a_single_span_after_a_full_buffer_does_not_grow_it() {
        let mut q = Queue::default();
        let full: Vec<SpanData> = (0..8).map(|i| finished(i, true)).collect();
        let (ptr, cap) = (full.as_ptr(), full.capacity());
        q.push_batch(full);
        for i in 8..12 {
            q.push_back(finished(i, true));
        }
        assert_eq!(q.len(), 12);
        let batches = q.take_batches();
        assert_eq!((batches[0].as_ptr(), batches[0].capacity()), (ptr, cap));
        assert_eq!(batches.iter().map(Vec::len).collect::<Vec<_>>(), [8, 4]);
        let out = export_batches(&mut VecDeque::new(), batches, 16);
        let ids: Vec<u64> = out
            .iter()
            .flatten()
            .map(|s| u64::from_be_bytes(s.span_context.span_id().to_bytes()) - 1)
            .collect();
        assert_eq!(ids, (0..12).collect::<Vec<_>>());
    }

    /// A partial batch first does not make every later full buffer be cut
    /// and copied: buffers that fit leave as they came (same allocation).
    #[test]
    fn full_buffers_after_a_partial_one_are_not_copied() {
        let (a, b) = (run(1, 4), run(5, 4));
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut single: VecDeque<SpanData> = [finished(0, true)].into();
        let out = export_batches(&mut single, vec![a, b], 4);
        let lens: Vec<usize> = out.iter().map(Vec::len).collect();
        assert_eq!(lens, [1, 4, 4]);
        assert_eq!((out[1].as_ptr(), out[2].as_ptr()), (pa, pb));
    }
}
