//! The instrumentation scope of lens's spans, metrics and logs, and the
//! tracer / meter of that scope (the Python library's `get_tracer` /
//! `get_meter`).

use opentelemetry::global::BoxedTracer;
use opentelemetry::metrics::Meter;
use opentelemetry::InstrumentationScope;
use std::borrow::Cow;

/// The instrumentation scope name of every lens span, metric and log record,
/// the same as the Python library's, so one backend filter on `nemo.lens`
/// finds the spans of both languages.
///
/// ```
/// assert_eq!(lens::SCOPE_NAME, "nemo.lens");
/// ```
pub const SCOPE_NAME: &str = "nemo.lens";

/// The scope called `name`, or lens's own scope (with lens's version) when
/// `name` is empty or [`SCOPE_NAME`].
fn scope(name: Cow<'static, str>) -> InstrumentationScope {
    if name.is_empty() || name == SCOPE_NAME {
        InstrumentationScope::builder(SCOPE_NAME)
            .with_version(env!("CARGO_PKG_VERSION"))
            .build()
    } else {
        InstrumentationScope::builder(name).build()
    }
}

/// A tracer of the global tracer provider (the one `setup_telemetry`
/// installs; a no-op tracer when nothing is installed or this rank does not
/// export). `""` gives lens's own scope, [`SCOPE_NAME`] (the default of the
/// Python library's `get_tracer`); any other name gives that scope.
///
/// ```
/// use lens::otel::trace::Tracer as _;
/// let tracer = lens::tracer("");
/// tracer.in_span("raw.work", |_cx| {});
/// let mine = lens::tracer("my.component");
/// # let _ = mine;
/// ```
pub fn tracer(name: impl Into<Cow<'static, str>>) -> BoxedTracer {
    opentelemetry::global::tracer_with_scope(scope(name.into()))
}

/// A meter of the global meter provider (the one `setup_telemetry`
/// installs; a no-op meter when nothing is installed or this rank does not
/// export). `""` gives lens's own scope, [`SCOPE_NAME`] (the default of the
/// Python library's `get_meter`); any other name gives that scope.
///
/// ```
/// let meter = lens::meter("");
/// meter.u64_counter("requests").build().add(1, &[]);
/// ```
pub fn meter(name: impl Into<Cow<'static, str>>) -> Meter {
    opentelemetry::global::meter_with_scope(scope(name.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_own_name_give_lens_scope_with_version() {
        for n in ["", SCOPE_NAME] {
            let s = scope(n.into());
            assert_eq!(s.name(), "nemo.lens");
            assert_eq!(s.version(), Some(env!("CARGO_PKG_VERSION")));
        }
        let s = scope("x.y".into());
        assert_eq!((s.name(), s.version()), ("x.y", None));
    }
}
