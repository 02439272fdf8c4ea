//! Request-level spans and metrics of one streamed generation.

use crate::inference_server as inf;
use crate::metrics::{InferenceMetrics, InferenceRecord, TokenTimer};
use crate::{managed_span, LensSpan, SpanGuard};

/// One streamed generation request on an inference server: a `request`
/// span (group `inference_server::REQUEST`, a child of the current context)
/// with a `prefill` child until the first token and a `decode` child after
/// it (groups `PREFILL`, `DECODE`), timed by a [`TokenTimer`];
/// [`finish`](Self::finish) ends the spans and records
/// `gen_ai.server.request.duration`, `time_to_first_token`,
/// `time_per_output_token` and the token usage. The spans are detached (not
/// current): run your async work inside them with
/// [`in_span`](crate::InSpan::in_span) or read them with
/// [`phase_span`](Self::phase_span).
///
/// ```
/// use lens::metrics::{Generation, InferenceMetrics, InferenceRecord};
/// let metrics = InferenceMetrics::new(&lens::otel::global::meter("doc"));
/// let mut generation = Generation::start(&metrics);
/// for _token in 0..4 {
///     generation.token(); // the first ends `prefill` and opens `decode`
/// }
/// let record = generation.finish(InferenceRecord { input_tokens: Some(12), ..Default::default() });
/// assert_eq!(record.output_tokens, Some(4));
/// ```
#[derive(Debug)]
pub struct Generation<'m> {
    metrics: &'m InferenceMetrics,
    timer: TokenTimer,
    request: Option<LensSpan>,
    phase: Option<LensSpan>,
}

/// A child of `parent` (or of the current context without one), detached.
fn child(parent: Option<&LensSpan>, make: impl FnOnce() -> SpanGuard) -> Option<LensSpan> {
    let _attached = parent.map(|p| p.context().clone().attach());
    make().into_span()
}

impl<'m> Generation<'m> {
    /// Starts the request (its arrival): opens `request` and `prefill`.
    ///
    /// ```
    /// # let metrics = lens::metrics::InferenceMetrics::new(&lens::otel::global::meter("doc"));
    /// let generation = lens::metrics::Generation::start(&metrics);
    /// # drop(generation);
    /// ```
    pub fn start(metrics: &'m InferenceMetrics) -> Self {
        let request = child(None, || managed_span!(inf::REQUEST, "request"));
        let phase = child(request.as_ref(), || managed_span!(inf::PREFILL, "prefill"));
        Generation {
            metrics,
            timer: TokenTimer::start(),
            request,
            phase,
        }
    }

    /// The `request` span, if its group is on (e.g. to set attributes or
    /// propagate it).
    ///
    /// ```
    /// # let metrics = lens::metrics::InferenceMetrics::new(&lens::otel::global::meter("doc"));
    /// let g = lens::metrics::Generation::start(&metrics);
    /// if let Some(s) = g.request_span() { s.set_attribute("gen_ai.request.max_tokens", 64); }
    /// ```
    pub fn request_span(&self) -> Option<&LensSpan> {
        self.request.as_ref()
    }

    /// The span of the current phase (`prefill`, then `decode`), if its
    /// group is on.
    ///
    /// ```
    /// # let metrics = lens::metrics::InferenceMetrics::new(&lens::otel::global::meter("doc"));
    /// let g = lens::metrics::Generation::start(&metrics);
    /// let _prefill = g.phase_span();
    /// ```
    pub fn phase_span(&self) -> Option<&LensSpan> {
        self.phase.as_ref()
    }

    /// Counts one output token; the first ends `prefill` and opens
    /// `decode`. Returns whether it was the first.
    ///
    /// ```
    /// # let metrics = lens::metrics::InferenceMetrics::new(&lens::otel::global::meter("doc"));
    /// let mut g = lens::metrics::Generation::start(&metrics);
    /// assert!(g.token());
    /// ```
    pub fn token(&mut self) -> bool {
        let first = self.timer.token();
        if first {
            drop(self.phase.take()); // ends prefill
            self.phase = child(self.request.as_ref(), || {
                managed_span!(inf::DECODE, "decode")
            });
        }
        first
    }

    /// Ends the spans and records the metrics of `base` completed by the
    /// timer (see [`TokenTimer::finish`]); returns what was recorded.
    ///
    /// ```
    /// # let metrics = lens::metrics::InferenceMetrics::new(&lens::otel::global::meter("doc"));
    /// let g = lens::metrics::Generation::start(&metrics);
    /// let r = g.finish(Default::default());
    /// assert_eq!(r.output_tokens, Some(0));
    /// ```
    pub fn finish<'a>(mut self, base: InferenceRecord<'a>) -> InferenceRecord<'a> {
        drop(self.phase.take());
        let record = self.timer.finish(base);
        if let (Some(span), Some(n)) = (&self.request, record.output_tokens) {
            span.set_attribute("gen_ai.usage.output_tokens", n);
        }
        drop(self.request.take());
        self.metrics.record(&record);
        record
    }
}
