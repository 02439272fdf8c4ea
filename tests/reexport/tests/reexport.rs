//! Every macro through a re-export: this crate has no `::lens`, so the
//! generated code must follow `crate = ::my_reexport::lens`.

use my_reexport::lens::{self, managed_span, span_cm, trace_fn};
use std::future::Future as _;

lens::define_span_group! {
    crate = ::my_reexport::lens,
    /// A family declared through the re-export.
    pub serving {
        groups: [request],
        presets: { default: [default, request] },
    }
}

#[trace_fn(group = "step", crate = ::my_reexport::lens, fields(%x), ret(Ok), err(Debug))]
fn step(x: u64) -> Result<u64, String> {
    Ok(x + 1)
}

#[trace_fn(crate = ::my_reexport::lens, group = serving::REQUEST, args(n))]
async fn request(n: u64) -> u64 {
    n
}

#[test]
fn macros_compile_and_run_through_the_reexport() {
    lens::set_enabled_span_groups(
        &lens::SpanGroupSet::resolve("all", &[&serving::FAMILY]).unwrap(),
    );
    assert_eq!(step(1), Ok(2));
    let g = managed_span!(crate = ::my_reexport::lens, "step", "s", x = ?1);
    assert!(!g.is_none());
    let off = managed_span!(crate = ::my_reexport::lens, serving::REQUEST, "r");
    drop(off);
    let _c = span_cm!(crate = ::my_reexport::lens, "c", n = 2);
    let fut = std::pin::pin!(request(3));
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert_eq!(fut.poll(&mut cx), std::task::Poll::Ready(3));
}
