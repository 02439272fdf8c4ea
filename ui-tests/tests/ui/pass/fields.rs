// Attribute keys (identifier, dotted, string literal, shorthand) and values
// (scalars, strings, Option, Vec, slices, arrays, references) in all three
// macros.
use lens::{managed_span, span_cm, trace_fn};
use std::borrow::Cow;
use std::sync::Arc;

#[trace_fn(
    group = "step",
    fields(
        iteration,
        nv.dl.rank = 0,
        "gen_ai.request.model" = model,
        loss = Some(0.5),
        skipped = None::<u64>,
        ids = vec![1u64, 2, 3],
        weights = &weights[..],
        flags = [true, false],
        tag = Cow::Borrowed("warmup"),
        owner = Arc::<str>::from("rl"),
        prompt = "redacted at compile time",
        r#type = "raw identifier key",
        computed = iteration * 2 + weights.len() as u64,
    )
)]
fn train_step(iteration: u64, model: &str, weights: &[f64]) -> u64 {
    iteration
}

fn main() {
    lens::set_enabled_span_groups(&lens::SpanGroupSet::resolve("all", &[]).unwrap());
    let weights = vec![0.5, 0.25];
    assert_eq!(train_step(3, "llama", &weights), 3);

    let rank: i32 = 1;
    let tokens: Vec<String> = vec!["a".into(), "b".into()];
    let maybe: Option<&str> = None;
    let step = managed_span!(
        "step",
        "train.step",
        rank,
        nv.dl.world_size = 8u32,
        "nv.dl.local_rank" = 0u8,
        tokens = &tokens,
        maybe = maybe,
        ratio = 0.5f32,
        big = u64::MAX,
        sizes = [1usize, 2],
    );
    assert!(!step.is_none());
    drop(step);

    let name = String::from("eval.pass");
    let _eval = span_cm!(
        name,
        samples = 128,
        split = "val",
        "eval.metric" = Some(0.9),
        scores = vec![0.1, 0.2]
    );
    let _dynamic = span_cm!(format!("eval.{}", 2));
    let _plain = span_cm!("plain",);
}
