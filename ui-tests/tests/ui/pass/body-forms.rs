// Bodies the expansion moves into a closure (so that a disabled site holds
// no guard across the body): `?` and early `return` without `err`, an
// argument both recorded and moved, `impl Trait` arguments and a borrowing
// `impl Trait` return, `Self`, a `&mut self` method returning a borrow, and
// `#[track_caller]`, whose body stays in the function so that
// `Location::caller()` is the caller's. Each runs with its group on and off.
use lens::trace_fn;
use std::fmt::Display;
use std::panic::Location;

#[trace_fn(group = "step")]
fn first_even(xs: &[u32]) -> Option<u32> {
    let x = *xs.iter().find(|x| *x % 2 == 0)?;
    if x == 0 {
        return None;
    }
    Some(x)
}

#[trace_fn(group = "step", fields(len = v.len()))]
fn consume(v: Vec<u8>) -> Vec<u8> {
    let mut v = v;
    v.push(1);
    v
}

#[trace_fn(group = "step", args(label))]
fn describe(label: &str, value: impl Display) -> String {
    format!("{label}={value}")
}

#[trace_fn(group = "step", fields(n = xs.len()))]
fn big(xs: &[u32], min: u32) -> impl Iterator<Item = &u32> + '_ {
    xs.iter().filter(move |x| **x >= min)
}

#[trace_fn(group = "step")]
fn apply<T: Copy>(x: T, f: impl Fn(T) -> T, times: usize) -> T {
    let mut x = x;
    for _ in 0..times {
        x = f(x);
    }
    x
}

struct Counter {
    n: Vec<u64>,
}

impl Counter {
    #[trace_fn(group = "optimizer")]
    fn make(n: u64) -> Self {
        Self { n: vec![n] }
    }

    #[trace_fn(group = "optimizer", fields(len = self.n.len()))]
    fn last_mut(&mut self) -> &mut u64 {
        if self.n.is_empty() {
            self.n.push(0);
        }
        self.n.last_mut().unwrap()
    }
}

#[trace_fn(group = "step")]
#[track_caller]
fn caller_line() -> u32 {
    Location::caller().line()
}

fn main() {
    let all = lens::SpanGroupSet::resolve("all", &[]).unwrap();
    for groups in [all, lens::SpanGroupSet::none()] {
        lens::set_enabled_span_groups(&groups);
        assert_eq!(first_even(&[1, 4]), Some(4));
        assert_eq!(first_even(&[1, 3]), None);
        assert_eq!(first_even(&[0]), None);
        assert_eq!(consume(vec![0]), vec![0, 1]);
        assert_eq!(describe("lr", 0.5), "lr=0.5");
        assert_eq!(big(&[1, 5, 7], 5).count(), 2);
        assert_eq!(apply(1u64, |v| v * 2, 3), 8);
        let mut c = Counter::make(2);
        *c.last_mut() += 1;
        assert_eq!(c.n, vec![3]);
        assert_eq!(caller_line(), line!());
    }
}
