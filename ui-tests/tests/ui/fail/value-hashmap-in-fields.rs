// A HashMap is not a span attribute value.
use lens::trace_fn;
use std::collections::HashMap;

#[trace_fn(group = "evaluate", fields(scores = scores.clone()))]
fn evaluate(scores: &HashMap<String, f64>) -> usize {
    scores.len()
}

fn main() {
    let _ = evaluate(&HashMap::new());
}
