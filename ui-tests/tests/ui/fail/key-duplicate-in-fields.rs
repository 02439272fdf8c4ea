// An attribute key may appear once; a second value would replace the first.
use lens::trace_fn;

#[trace_fn(group = "step", fields(loss = 0.5, lr = 0.1, loss = 0.25))]
fn train_step() {}

fn main() {
    train_step();
}
