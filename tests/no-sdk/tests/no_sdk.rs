//! The same user code compiles and runs without the SDK; every site is a
//! no-op recording into the global (no-op) provider.

use lens::otel::trace::TraceContextExt;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

#[test]
fn sites_run_as_no_ops_without_the_sdk() {
    lens::set_enabled_span_groups(
        &lens::SpanGroupSet::resolve("all", &[&lens::nemo_rl::FAMILY]).unwrap(),
    );
    assert_eq!(lens_no_sdk_check::step(1), Ok(2));
    assert_eq!(block_on(lens_no_sdk_check::rollout(4)), 8);
    let g = lens::span_cm!("x");
    // the global provider is the no-op one: spans are not recording
    assert!(!g.context().span().is_recording());
}

#[test]
fn config_works_without_the_sdk() {
    let c = lens::LensConfig::from_lookup(&["NEMO_LENS_"], &[], |k| {
        (k == "NEMO_LENS_SPAN_GROUPS").then(|| "per_step".to_owned())
    })
    .unwrap();
    assert_eq!(c.resolve_span_groups().unwrap().names().len(), 8);
}

#[test]
fn instrument_sets_and_w3c_propagation_work_without_the_sdk() {
    use lens::otel::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    // Instrument sets need only the metrics API: they record into the global
    // (here no-op) meter provider.
    let meter = lens::otel::global::meter("no-sdk");
    let training = lens::metrics::TrainingMetrics::new(&meter);
    training.record(&lens::metrics::TrainingRecord {
        step_duration_s: Some(0.5),
        loss: Some(1.25),
        ..Default::default()
    });

    // W3C TraceContext round trip through the string-map carrier.
    let remote = SpanContext::new(
        TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
        SpanId::from_hex("00f067aa0ba902b7").unwrap(),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    let cx = lens::otel::Context::new().with_remote_span_context(remote.clone());
    let _attached = cx.attach();
    let carrier = lens::propagation::inject_context();
    assert_eq!(
        carrier.get("traceparent").map(String::as_str),
        Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    );
    let back = lens::propagation::extract_context(&carrier);
    assert_eq!(back.span().span_context().trace_id(), remote.trace_id());
    assert!(back.span().span_context().is_remote());

    // Baggage travels without the SDK too (lens's own propagator), and the
    // JSON byte carrier of the Python library reads back.
    use lens::otel::baggage::BaggageExt;
    let cx = lens::otel::Context::new()
        .with_remote_span_context(remote.clone())
        .with_baggage([lens::otel::KeyValue::new("job", "a b+c")]);
    let mut map = lens::propagation::Carrier::new();
    lens::propagation::inject_into(&cx, &mut map);
    assert_eq!(map["baggage"], "job=a%20b%2Bc");
    let bytes = lens::propagation::context_to_json_bytes(&cx);
    let back = lens::propagation::context_from_bytes(&bytes).unwrap();
    assert_eq!(back.baggage().get("job").unwrap().as_str(), "a b+c");
}
