// #[trace_fn] on a struct.
use lens::trace_fn;

#[trace_fn(group = "step")]
struct Trainer {
    lr: f64,
}

fn main() {
    let t = Trainer { lr: 0.1 };
    let _ = t.lr;
}
