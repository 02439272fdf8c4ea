// A `const fn` cannot create spans.
use lens::trace_fn;

#[trace_fn(group = "step")]
const fn world_size() -> usize {
    8
}

fn main() {
    let _ = world_size();
}
