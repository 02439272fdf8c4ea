// Methods: `&self`, `&mut self`, `self`, associated functions, trait impls
// and default trait methods.
use lens::trace_fn;

#[derive(Debug, Default, PartialEq)]
struct Trainer {
    step: u64,
    lr: f64,
}

impl Trainer {
    #[trace_fn(group = "model_init", args(lr))]
    fn new(lr: f64) -> Self {
        Self { step: 0, lr }
    }

    #[trace_fn(group = "step", fields(step = self.step, lr = self.lr))]
    fn peek(&self) -> u64 {
        self.step
    }

    #[trace_fn(group = "optimizer", fields(step = self.step), args(by))]
    fn advance(&mut self, by: u64) {
        self.step += by;
    }

    #[trace_fn(group = "checkpoint", err)]
    fn save(&mut self) -> Result<u64, String> {
        if self.step == 0 {
            return Err("nothing to save".to_owned());
        }
        self.step += 0;
        Ok(self.step)
    }

    #[trace_fn(group = "job", fields(step = self.step))]
    fn finish(self) -> u64 {
        self.step
    }

    #[trace_fn(group = "job")]
    fn into_parts(self: Box<Self>) -> (u64, f64) {
        (self.step, self.lr)
    }
}

trait Model {
    fn forward(&self, x: f32) -> f32;

    #[trace_fn(group = "forward_backward", name = "model.backward")]
    fn backward(&self, g: f32) -> f32 {
        -g
    }
}

struct Linear {
    w: f32,
}

impl Model for Linear {
    #[trace_fn(group = "forward_backward", name = "model.forward", args(x), fields(w = self.w))]
    fn forward(&self, x: f32) -> f32 {
        self.w * x
    }
}

fn main() {
    lens::set_enabled_span_groups(&lens::SpanGroupSet::resolve("all", &[]).unwrap());
    let mut t = Trainer::new(0.1);
    assert_eq!(t.save(), Err("nothing to save".to_owned()));
    t.advance(2);
    assert_eq!(t.peek(), 2);
    assert_eq!(t.save(), Ok(2));
    assert_eq!(Box::new(Trainer::new(0.5)).into_parts(), (0, 0.5));
    assert_eq!(t.finish(), 2);
    let m = Linear { w: 2.0 };
    assert_eq!(m.forward(3.0), 6.0);
    assert_eq!(m.backward(1.0), -1.0);
}
