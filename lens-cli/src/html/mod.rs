//! HTML output (stub).
use crate::input::{Origin, Sink};
use crate::input::otlp::{Metric, Span};
use crate::report::{Aggregator, Report};

/// Collects the aggregation plus a bounded timeline.
#[derive(Debug)]
pub(crate) struct Collector { agg: Aggregator }
/// The kept timeline.
#[derive(Debug)]
pub(crate) struct Timeline;
impl Collector {
    /// A collector keeping `steps` steps per rank.
    pub(crate) fn new(_steps: usize) -> Self { Collector { agg: Aggregator::default() } }
    /// Splits into the aggregation and the timeline.
    pub(crate) fn into_parts(self) -> (Aggregator, Timeline) { (self.agg, Timeline) }
}
impl Sink for Collector {
    fn spans(&mut self, o: &Origin, s: &[Span<'_>]) { self.agg.spans(o, s) }
    fn metrics(&mut self, o: &Origin, m: &[Metric<'_>]) { self.agg.metrics(o, m) }
    fn logs(&mut self, o: &Origin, n: usize) { self.agg.logs(o, n) }
}
/// Renders the page.
pub(crate) fn render(_r: &Report, _t: &Timeline) -> String { String::new() }
