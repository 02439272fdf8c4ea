use lens::trace_fn;

#[trace_fn(group = "step", kind = rpc)]
fn a() {}

#[trace_fn(group = "step", kind = Server)]
fn b() {}

#[trace_fn(group = "step", kind = "server")]
fn c() {}

fn main() {}
