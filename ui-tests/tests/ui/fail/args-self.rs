// `self` cannot be recorded.
use lens::trace_fn;

struct Trainer {
    step: u64,
}

impl Trainer {
    #[trace_fn(group = "step", args(self))]
    fn train_step(&self) -> u64 {
        self.step
    }
}

fn main() {
    let _ = Trainer { step: 1 }.train_step();
}
