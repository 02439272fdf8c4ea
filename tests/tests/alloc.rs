//! A disabled site allocates nothing (counting global allocator).

use lens::{managed_span, trace_fn};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations<R>(f: impl FnOnce() -> R) -> usize {
    let before = ALLOCS.with(Cell::get);
    std::hint::black_box(f());
    ALLOCS.with(Cell::get) - before
}

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
