//! Spans at thread exit: OpenTelemetry's current context lives in a
//! thread local that panics when reached after it is destroyed, and a
//! panic in a thread-local destructor aborts the process. Lens spans
//! started, and guards dropped, in destructors that run after it (a
//! user's thread local) must not reach it: the process goes on.
//!
//! One test: each scenario ends a thread, and an abort ends the whole
//! binary (reported by `cargo test` as the test binary killed by SIGABRT).

mod common;

use lens::{managed_span, span_cm, LensConfig, SpanGuard, TelemetryBuilder};
use std::cell::RefCell;

/// Starts a span (and ends it) when dropped.
struct StartsASpan;

impl Drop for StartsASpan {
    fn drop(&mut self) {
        let g = span_cm!("in.a.destructor");
        g.set_attribute("k", 1);
        let _m = managed_span!("step", "managed.in.a.destructor");
        let detached = lens::detached_span("detached.in.a.destructor");
        drop(detached.enter());
    }
}

thread_local! {
    static STARTS: StartsASpan = const { StartsASpan };
    static HELD: RefCell<Option<SpanGuard>> = const { RefCell::new(None) };
}

#[test]
fn spans_and_guards_in_thread_local_destructors_do_not_abort() {
    let mut c = LensConfig::default();
    c.enabled = true;
    c.metrics_enabled = false;
    c.span_groups = "all".into();
    c.quiet = true;
    let exporter = common::Capture::default();
    let handle = TelemetryBuilder::new(c, 0, 1)
        .with_span_exporter(exporter.clone())
        .install()
        .unwrap();

    // registered before OpenTelemetry's context, so destroyed after it
    std::thread::spawn(|| {
        STARTS.with(|_| {});
        drop(span_cm!("before.exit"));
    })
    .join()
    .expect("a span started in a late destructor");

    // the thread's first span is in that destructor, OpenTelemetry's
    // context made (by raw OpenTelemetry code) and destroyed before it
    std::thread::spawn(|| {
        STARTS.with(|_| {});
        let _ = lens::otel::Context::current();
    })
    .join()
    .expect("a thread's first span in a late destructor");

    // a guard kept in a thread local, dropped after the context is gone
    std::thread::spawn(|| {
        HELD.with(|_| {});
        let g = span_cm!("held.in.a.thread.local");
        HELD.with(|h| *h.borrow_mut() = Some(g));
    })
    .join()
    .expect("a guard dropped in a late destructor");

    handle
        .shutdown(std::time::Duration::from_secs(5))
        .into_result()
        .unwrap();
    let names: Vec<String> = exporter
        .finished()
        .iter()
        .map(|s| s.name.to_string())
        .collect();
    assert!(names.contains(&"before.exit".to_owned()), "{names:?}");
    // made while the context was there: recorded, ended at thread exit
    assert!(
        names.contains(&"held.in.a.thread.local".to_owned()),
        "{names:?}"
    );
}
