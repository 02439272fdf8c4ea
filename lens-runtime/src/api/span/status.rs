//! The status a span is given by hand.

use std::borrow::Cow;

/// The status of a span, as set by `SpanGuard::set_status`.
///
/// ```
/// use lens::SpanStatus;
/// let g = lens::span_cm!("x");
/// g.set_status(SpanStatus::Error("disk full".into()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpanStatus {
    /// The default: no status was set.
    Unset,
    /// The operation completed successfully.
    Ok,
    /// The operation failed, with a description.
    Error(Cow<'static, str>),
}
