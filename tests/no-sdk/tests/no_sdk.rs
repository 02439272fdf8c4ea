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
