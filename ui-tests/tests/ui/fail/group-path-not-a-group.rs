// A group path must name a `SpanGroup`; rustc's error sits on the path.
use lens::trace_fn;

#[trace_fn(group = lens::megatron::FAMILY)]
fn microbatch() {}

fn main() {
    microbatch();
    let _g = lens::managed_span!(lens::groups::FAMILY, "train.step");
}
