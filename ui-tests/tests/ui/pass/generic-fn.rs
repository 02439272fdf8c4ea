// Generic functions: type, const and lifetime parameters, inline bounds.
use lens::trace_fn;
use std::fmt::Display;

#[trace_fn(group = "step", args(n))]
fn largest<T: PartialOrd + Copy>(xs: &[T], n: usize) -> T {
    let mut best = xs[0];
    for x in &xs[..n] {
        if *x > best {
            best = *x;
        }
    }
    best
}

#[trace_fn(group = "step", fields(width = N))]
fn sum<const N: usize>(xs: [u64; N]) -> u64 {
    xs.iter().sum()
}

#[trace_fn(group = "evaluate", fields(len = label.to_string().len()))]
fn describe<L: Display>(label: L) -> String {
    format!("<{label}>")
}

fn main() {
    lens::set_enabled_span_groups(&lens::SpanGroupSet::resolve("all", &[]).unwrap());
    assert_eq!(largest(&[3, 9, 4], 3), 9);
    assert_eq!(largest(&[0.5, 0.25], 2), 0.5);
    assert_eq!(sum([1, 2, 3]), 6);
    assert_eq!(describe(42), "<42>");
}
