//! A disabled site allocates nothing (counting global allocator).

use lens::{managed_span, trace_fn};

#[global_allocator]
static GLOBAL: tests::CountingAlloc = tests::CountingAlloc;

use tests::allocations;

#[trace_fn(group = "step", fields(name = format!("step-{i}"), v = vec![1, 2, 3]), args(i))]
fn step(i: u64) -> u64 {
    let _g = managed_span!("optimizer", format!("opt-{i}"), s = String::from("x"));
    i + 1
}

#[test]
fn disabled_sites_allocate_nothing() {
    lens::set_enabled_span_groups(&lens::SpanGroupSet::none());
    // warm up thread-locals
    step(0);
    let n = allocations(|| {
        let mut acc = 0;
        for i in 0..10_000 {
            acc += step(i);
        }
        acc
    });
    assert_eq!(n, 0, "disabled sites allocated {n} times");
    // the counter works: an enabled site allocates
    lens::set_enabled_span_groups(&lens::SpanGroupSet::resolve("step", &[]).unwrap());
    let n = allocations(|| step(1));
    assert!(n > 0, "counting allocator saw nothing for an enabled site");
    lens::set_enabled_span_groups(&lens::SpanGroupSet::none());
}
