// Every macro form in one file, compiled twice: here by trybuild, and by
// `tests/clippy.rs` (which includes this file as a module) so that
// `cargo clippy -p ui-tests --all-targets -- -D warnings` lints the generated
// code. Keep it warning-free under the workspace lints.
#![deny(warnings, clippy::all)]

use lens::{managed_span, span_cm, trace_fn};
use std::fmt::Display;

lens::define_span_group! {
    /// A family declared privately (its statics stay crate-visible).
    pub(crate) serving {
        groups: [request, batch],
        presets: {
            default: [default, request],
            per_step: [per_step, default, batch],
        },
    }
}

#[trace_fn(group = "job")]
fn unit() {}

#[trace_fn(group = "step", name = "train.step", args(iteration, lr), fields(nv.dl.rank = 0, "gen_ai.request.model" = "m", phase = "train"))]
fn train_step(iteration: u64, lr: f64) -> f64 {
    lr * 2.0 + f64::from(u32::try_from(iteration).unwrap_or(0))
}

#[trace_fn(group = "step", fields(n = xs.len()))]
fn largest<T>(xs: &[T]) -> Option<T>
where
    T: PartialOrd + Copy + Display,
{
    xs.iter().copied().fold(None, |best, x| match best {
        Some(b) if b >= x => Some(b),
        _ => Some(x),
    })
}

#[trace_fn(group = "step")]
fn evens(n: u64) -> impl Iterator<Item = u64> {
    (0..n).filter(|x| x % 2 == 0)
}

#[trace_fn(group = "load_checkpoint", args(text), err)]
fn parse(text: &str) -> Result<u64, std::num::ParseIntError> {
    let v = text.parse::<u64>()?;
    Ok(v)
}

#[trace_fn(group = "checkpoint", err)]
fn nothing_to_save(fail: bool) -> Result<(), String> {
    if fail {
        return Err("fail".to_owned());
    }
    Ok(())
}

#[trace_fn(group = "step", args(prefix))]
fn strip<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.strip_prefix(prefix).unwrap_or(text)
}

/// # Safety
/// `p` must point to a valid `u32`.
#[trace_fn(group = "step")]
unsafe fn read(p: *const u32) -> u32 {
    // SAFETY: the caller guarantees it
    unsafe { *p }
}

#[trace_fn(group = "step", args(i))]
async fn double(i: u64) -> u64 {
    i * 2
}

#[trace_fn(group = "evaluate")]
async fn async_unit() {}

#[trace_fn(group = "load_checkpoint", args(text), err)]
async fn async_parse(text: &str) -> Result<u64, std::num::ParseIntError> {
    let v = text.parse::<u64>()?;
    Ok(double(v).await)
}

#[trace_fn(group = serving::REQUEST, args(id))]
fn handle(id: u64) -> u64 {
    let _batch = managed_span!(serving::BATCH, "serving.batch", id);
    id
}

// parameters the body does not use but the span records (no unused-variable
// warning), a `mut` parameter, a pattern and a `_` parameter
#[trace_fn(group = "step", args(model), fields(n = weights.len()))]
fn only_recorded(model: &str, weights: &[f64], mut acc: u64, (a, b): (u64, u64), _: u8) -> u64 {
    acc += a;
    acc + b
}

#[derive(Debug, Default)]
struct Trainer {
    step: u64,
    docs: Vec<String>,
}

impl Trainer {
    #[trace_fn(group = "model_init")]
    fn new() -> Self {
        Self::default()
    }

    #[trace_fn(group = "step", fields(step = self.step))]
    fn peek(&self) -> u64 {
        self.step
    }

    #[trace_fn(group = "optimizer", args(by))]
    fn advance(&mut self, by: u64) {
        self.step += by;
    }

    #[trace_fn(group = "evaluate", err)]
    fn doc_mut(&mut self, i: usize) -> Result<&mut String, String> {
        self.docs.get_mut(i).ok_or_else(|| format!("no doc {i}"))
    }

    #[trace_fn(group = "job")]
    fn finish(self) -> u64 {
        self.step
    }

    #[trace_fn(group = "job", fields(step = self.step))]
    async fn async_peek(&self) -> u64 {
        self.step
    }

    #[trace_fn(group = "job", err)]
    async fn async_bump(&mut self) -> Result<u64, String> {
        self.step += 1;
        Ok(self.step)
    }
}

trait Model {
    fn forward(&self, x: f32) -> f32;
}

struct Linear;

impl Model for Linear {
    #[trace_fn(group = "forward_backward", args(x))]
    fn forward(&self, x: f32) -> f32 {
        x
    }
}

pub(crate) fn main() {
    let set = lens::SpanGroupSet::resolve("all", &[&serving::FAMILY]).unwrap();
    lens::set_enabled_span_groups(&set);
    unit();
    assert!((train_step(1, 0.5) - 2.0).abs() < f64::EPSILON);
    assert_eq!(largest(&[1, 3, 2]), Some(3));
    assert_eq!(evens(4).count(), 2);
    assert_eq!(parse("3"), Ok(3));
    assert!(nothing_to_save(true).is_err() && nothing_to_save(false).is_ok());
    assert_eq!(strip("v1-x", "v1-"), "x");
    let x = 4u32;
    // SAFETY: `&x` is valid
    assert_eq!(unsafe { read(&x) }, 4);
    assert_eq!(handle(1), 1);
    assert_eq!(only_recorded("m", &[1.0], 1, (2, 3), 0), 6);
    let mut t = Trainer::new();
    t.advance(1);
    assert_eq!(t.peek(), 1);
    assert!(t.doc_mut(0).is_err());
    assert_eq!(Linear.forward(1.5).to_bits(), 1.5f32.to_bits());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        assert_eq!(double(2).await, 4);
        async_unit().await;
        assert_eq!(async_parse("2").await, Ok(4));
        assert_eq!(t.async_peek().await, 1);
        assert_eq!(t.async_bump().await, Ok(2));
    });
    assert_eq!(t.finish(), 2);
    let span = managed_span!(
        "step",
        "manual",
        iteration = 1,
        maybe = None::<u64>,
        ids = vec![1u64, 2]
    );
    drop(span);
    let _always = span_cm!("always", "eval.split" = "val", scores = [0.5, 0.25]);
}
