// A consumer group is named by path, so rustc reports a wrong one.
use lens::trace_fn;

#[trace_fn(group = lens::megatron::MICROBATCHES)]
fn microbatch() {}

fn main() {
    microbatch();
}
