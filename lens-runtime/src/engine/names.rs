//! The attribute and event names the engine writes itself (the public
//! list, `semconv`, names them from here).

/// On a span still open at telemetry shutdown, ended by truncation: the
/// attribute (`true`) and the name of its event.
pub(crate) const SPAN_TRUNCATED: &str = "nemo.span.truncated";
/// The attribute of the truncation event that says why.
pub(crate) const SPAN_TRUNCATED_REASON: &str = "nemo.span.truncated.reason";
