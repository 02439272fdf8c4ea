//! A target's route: its span group and how re-entered spans are recorded.

use crate::api::groups::SpanGroup;

/// How a re-entered `tracing` span is recorded.
///
/// ```
/// use lens::tracing::TracingMode;
/// assert_eq!(TracingMode::default(), TracingMode::Lifetime);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TracingMode {
    /// One lens span from creation to close, however often the span is
    /// entered (async code: entered on every poll).
    #[default]
    Lifetime,
    /// One lens span per enter/exit (spans made once and entered many
    /// times, as candle's per-layer spans are on every `forward`).
    PerEntry,
}

/// A target's group and mode.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Route {
    pub(crate) group: &'static SpanGroup,
    pub(crate) mode: TracingMode,
}

/// Everything the layer is built from.
#[derive(Debug, Clone)]
pub(crate) struct Routes {
    /// `(target prefix, route or off)`, in the order given.
    pub(crate) targets: Vec<(String, Option<Route>)>,
    /// The route of targets with no entry (`None`: off).
    pub(crate) default: Option<Route>,
    /// The least severe level recorded.
    pub(crate) level: tracing::Level,
}
