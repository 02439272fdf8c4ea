//! Where the finished spans of lens's span path go: the pipeline's sink.

use opentelemetry_sdk::trace::SpanData;

/// Where finished spans go.
pub(crate) trait SpanSink: Send + Sync + 'static {
    /// Takes a batch of finished spans; never blocks.
    fn submit(&self, spans: Vec<SpanData>);

    /// Redacts a span as this sink's exporters must see it; the collector
    /// calls it on each span it builds, before [`submit`](Self::submit).
    fn redact(&self, span: &mut SpanData);

    /// Spans per export call at most: the batches submitted are built up
    /// to this size, so that nothing downstream joins (copies) them.
    fn max_batch(&self) -> usize;

    /// An empty batch with room for `max_batch()` spans, made where the
    /// batches are freed, if one is ready.
    fn spare(&self) -> Option<Vec<SpanData>>;
}
