use lens::trace_fn;

#[trace_fn(group = "step", parent = id)]
fn a(id: u64) {}

#[trace_fn(group = "step", links(name))]
fn b(name: &str) {}

fn main() {}
