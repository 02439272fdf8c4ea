//! The `console` exporter: OTLP JSON, one record per line, on stdout.

use super::file::{JsonLines, Sink};
use std::sync::Arc;

/// A console exporter for any signal.
pub(crate) fn console() -> JsonLines {
    JsonLines::new(Arc::new(Sink::Stdout), true)
}
