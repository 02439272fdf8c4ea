//! Error status and `exception` events as the Python library writes them:
//! status description `TypeName: message`, event attributes
//! `exception.type`, `exception.message` and, when a backtrace is captured
//! (`RUST_BACKTRACE` / `RUST_LIB_BACKTRACE`), `exception.stacktrace`.

use super::handle::SpanHandle;
use crate::api::semconv as sc;
use opentelemetry::trace::Status;
use opentelemetry::KeyValue;
use std::backtrace::{Backtrace, BacktraceStatus};

/// The last path segment of a type name, without generic arguments, as
/// Python's `type(exc).__name__`: `std::io::error::Error` → `Error`,
/// `my::Failed<u8>` → `Failed`, `&str` → `str`. Tuples, arrays and slices
/// stay whole.
pub(crate) fn short_type_name(full: &str) -> &str {
    if full.starts_with(['(', '[']) {
        return full;
    }
    let full = full.trim_start_matches(['&', '*']);
    let full = ["mut ", "const ", "dyn "]
        .iter()
        .fold(full, |s, p| s.strip_prefix(p).unwrap_or(s));
    let outer = full.split('<').next().unwrap_or(full);
    let start = outer.rfind("::").map_or(0, |i| i + 2);
    &outer[start..]
}

/// The current backtrace as text, when backtraces are switched on.
pub(crate) fn captured_backtrace() -> Option<String> {
    let bt = Backtrace::capture();
    (bt.status() == BacktraceStatus::Captured).then(|| bt.to_string())
}

/// Marks the span ERROR with `short type: message` and adds the `exception`
/// event. `ty` is the full type name (the event's `exception.type`, as
/// Python's is `module.QualName`).
pub(crate) fn record_exception(
    span: &SpanHandle<'_>,
    ty: &str,
    message: String,
    stack: Option<String>,
) {
    if !span.is_recording() {
        return;
    }
    span.set_status(Status::error(format!("{}: {message}", short_type_name(ty))));
    let mut attrs = vec![
        KeyValue::new(sc::EXCEPTION_TYPE, ty.to_owned()),
        KeyValue::new(sc::EXCEPTION_MESSAGE, message),
    ];
    if let Some(stack) = stack {
        attrs.push(KeyValue::new(sc::EXCEPTION_STACKTRACE, stack));
    }
    span.add_event("exception", attrs);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_the_last_segment() {
        for (full, short) in [
            ("std::io::error::Error", "Error"),
            ("my_crate::errors::DiskFull", "DiskFull"),
            ("my::Failed<alloc::string::String>", "Failed"),
            ("alloc::string::String", "String"),
            ("str", "str"),
            ("panic", "panic"),
            ("(u8, u16)", "(u8, u16)"),
            ("[u8]", "[u8]"),
            ("dyn core::error::Error", "Error"),
            ("&str", "str"),
            ("&mut dyn core::error::Error", "Error"),
            ("&&alloc::string::String", "String"),
        ] {
            assert_eq!(short_type_name(full), short, "{full}");
        }
        assert_eq!(
            short_type_name(std::any::type_name::<std::num::ParseIntError>()),
            "ParseIntError"
        );
    }
}
