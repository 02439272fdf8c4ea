use lens::trace_fn;

#[trace_fn(group = "step", ret = true)]
fn a() -> u64 {
    1
}

#[trace_fn(group = "step", ret)]
fn b() {}

#[trace_fn(group = "step", links())]
fn c() {}

fn main() {}
