//! Finished records become the SDK's `SpanData`, where they are exported.
//!
//! A sink builds the records it is given on its exporter thread, one
//! export batch at a time, just before the export: the batch's memory is
//! then taken and given back by the one thread that frees it after export
//! (the allocator hands the same memory back for the next batch, as it
//! does for the SDK's own batch processor), and so are each span's
//! attributes. Built on the collector thread instead, the batches were
//! freed on another thread's heap, which glibc trims and faults in again
//! (page faults that the `total_cpu` bench counts as CPU time off the
//! calling thread), and every span crossed one more CPU cache.

use crate::engine::clock;
use crate::engine::record::{FinishedBatch, RareFields, Record, SpanSink};
use opentelemetry::trace::SpanContext;
use opentelemetry_sdk::trace::SpanData;

/// Builds a sink's records into export batches (the records are the
/// sink's own: [`sort_out`] sent any other pipeline's back first).
#[derive(Clone, Copy)]
pub(crate) struct Builder<'a> {
    /// Spans per export batch at most.
    max: usize,
    /// Redacts each span as the building sink's exporters must see it.
    redact: &'a dyn Fn(&mut SpanData),
}

impl<'a> Builder<'a> {
    /// A builder of export batches of at most `max` spans redacted by
    /// `redact`.
    pub(crate) fn new(max: usize, redact: &'a dyn Fn(&mut SpanData)) -> Self {
        Builder {
            max: max.max(1),
            redact,
        }
    }

    /// Builds the sampled records of `batches`, in order, into export
    /// batches of at most `max` spans, and hands each to `emit` as soon as
    /// it is full (the last one when the records run out). An export batch
    /// is made with room for what is left, up to `max`, and never grown.
    /// Unsampled records are dropped (the samplers lens builds make none).
    /// Once `emit` returns `false` the records left are dropped unbuilt.
    /// Returns how many unsampled records were dropped before then.
    pub(crate) fn build(
        &self,
        batches: Vec<FinishedBatch>,
        emit: &mut dyn FnMut(Vec<SpanData>) -> bool,
    ) -> u64 {
        let mut left: usize = batches.iter().map(FinishedBatch::len).sum();
        let mut spans: Vec<SpanData> = Vec::new();
        let mut go_on = true;
        let mut unsampled = 0;
        for batch in batches {
            let take = |rec: &mut Record| {
                left -= 1;
                if !go_on || !rec.is_sampled() {
                    unsampled += u64::from(go_on);
                    // SAFETY: dropped once, never used again (`consume`)
                    unsafe { std::ptr::drop_in_place(rec) };
                    return;
                }
                if spans.capacity() == 0 {
                    spans.reserve_exact((left + 1).min(self.max));
                }
                // SAFETY: moved out once, never used again (`consume`)
                unsafe { push_built(&mut spans, rec, self.redact) };
                if spans.len() >= self.max {
                    go_on = emit(std::mem::take(&mut spans));
                }
            };
            // SAFETY: `take` moves each record out or drops it, once
            unsafe { batch.consume(take) };
        }
        if !spans.is_empty() {
            emit(spans);
        }
        unsampled
    }
}

/// Sorts out, where a sink is handed `batches` (before it queues them),
/// the records it is not to export: records of another pipeline (ended
/// after a re-init replaced theirs) go to their own sink at once, so that
/// its flush and shutdown find them in its queue; records whose pipeline
/// is gone, and unsampled ones, are dropped. Returns the rest, the records
/// of the sink at `me`, in order; when every record is its own (the usual
/// case) the batches are returned as they came, only read.
pub(crate) fn sort_out(mut batches: Vec<FinishedBatch>, me: usize) -> Vec<FinishedBatch> {
    let mine = |r: &Record| {
        r.is_sampled()
            && r.settings
                .sink
                .as_ref()
                .is_none_or(|o| o.as_ptr().cast::<()>() as usize == me)
    };
    for batch in &mut batches {
        if batch.all(mine) {
            continue;
        }
        // records of other sinks, grouped by sink, in order
        let mut others: Vec<(std::sync::Arc<dyn SpanSink>, Vec<Record>)> = Vec::new();
        let mut keep = Vec::with_capacity(batch.len());
        for r in std::mem::take(batch).into_records() {
            if mine(&r) {
                keep.push(r);
                continue;
            }
            if !r.is_sampled() {
                continue;
            }
            let Some(own) = r.settings.sink.as_ref().and_then(std::sync::Weak::upgrade) else {
                continue; // that pipeline is gone: dropped
            };
            match others
                .iter_mut()
                .find(|(s, _)| std::sync::Arc::ptr_eq(s, &own))
            {
                Some((_, v)) => v.push(r),
                None => others.push((own, vec![r])),
            }
        }
        *batch = FinishedBatch::from(keep);
        for (own, records) in others {
            own.submit(vec![FinishedBatch::from(records)]);
        }
    }
    batches.retain(|b| !b.is_empty());
    batches
}

/// The address that identifies `sink` to [`sort_out`].
pub(crate) fn address(sink: &dyn SpanSink) -> usize {
    std::ptr::from_ref(sink).cast::<()>() as usize
}

/// Pushes the span `rec` becomes onto `spans`, redacted: built in the
/// batch's next slot (not on the stack and copied there), and redacted
/// while it is in this thread's cache.
///
/// # Safety
///
/// `rec` is a live record, neither used nor dropped afterwards.
#[inline]
unsafe fn push_built(spans: &mut Vec<SpanData>, rec: &Record, redact: &dyn Fn(&mut SpanData)) {
    spans.reserve(1); // room already, but for a batch grown past its size
    let Some(slot) = spans.spare_capacity_mut().first_mut() else {
        return; // unreachable: `reserve(1)` made room
    };
    // SAFETY: the caller's promise: `rec` is live and moved out once,
    // here, and not used or dropped after
    let span = unsafe { move_into_span_data(rec, slot) };
    redact(span);
    // SAFETY: the slot at `len` is initialised just above
    unsafe { spans.set_len(spans.len() + 1) };
}

/// Writes the span as the SDK's exporters take it into `out`, moving
/// the record's owned fields there: made in place, field by field,
/// rather than built on the stack and copied (352 bytes), from the
/// record where it lies (168 bytes, not copied out first).
///
/// # Safety
///
/// `rec` is a live record, and is neither used nor dropped afterwards
/// (its owned fields now belong to the span).
#[inline]
unsafe fn move_into_span_data<'a>(
    rec: &Record,
    out: &'a mut std::mem::MaybeUninit<SpanData>,
) -> &'a mut SpanData {
    // SAFETY: `rec` is live (the caller's promise); each owned field is
    // read out once, and the record is neither used nor dropped after
    // (the caller's promise), so each is owned once.
    let (name, attributes, rare) = unsafe {
        (
            std::ptr::read(&rec.name),
            std::ptr::read(&rec.attributes),
            std::ptr::read(&rec.rare),
        )
    };
    let (trace_state, status, events, links) = match rare {
        None => Default::default(),
        Some(m) => {
            let RareFields {
                trace_state,
                status,
                events,
                links,
            } = *m;
            (trace_state, status, events, links)
        }
    };
    out.write(SpanData {
        span_context: SpanContext::new(rec.trace_id, rec.span_id, rec.flags, false, trace_state),
        parent_span_id: rec.parent_span_id,
        parent_span_is_remote: rec.parent_is_remote,
        span_kind: rec.kind.clone(),
        name,
        start_time: clock::to_system(rec.start),
        end_time: clock::to_system(rec.end.max(rec.start)),
        attributes: attributes.into_vec(),
        dropped_attributes_count: rec.dropped_attributes,
        events,
        links,
        status,
        instrumentation_scope: rec.settings.scope(),
    })
}
