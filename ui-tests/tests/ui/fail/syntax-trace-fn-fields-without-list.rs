// `fields` takes a parenthesised list; every malformed option is reported.
use lens::trace_fn;

#[trace_fn(group = "step", fields, args = iteration)]
fn train_step(iteration: u64) {
    let _ = iteration;
}

fn main() {
    train_step(1);
}
