// A trait method without a body has nothing to instrument.
use lens::trace_fn;

trait Model {
    #[trace_fn(group = "forward_backward")]
    fn forward(&self, x: f32) -> f32;
}

struct Linear;

impl Model for Linear {
    fn forward(&self, x: f32) -> f32 {
        x
    }
}

fn main() {
    let _ = Linear.forward(1.0);
}
