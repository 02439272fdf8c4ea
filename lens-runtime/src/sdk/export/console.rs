//! The `console` exporter: OTLP JSON, one record per line, on stdout.
//!
//! Lines are written to file descriptor 1 directly, never through
//! `std::io::stdout()`, so an application holding the stdout lock cannot
//! stall the export (see `file::write_fd`).

use super::file::{JsonLines, Sink};

/// A console exporter for any signal.
pub(crate) fn console() -> JsonLines {
    JsonLines::new(Sink::stdout(), true)
}
