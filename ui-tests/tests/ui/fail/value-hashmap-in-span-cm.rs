// A HashMap is not a span attribute value (span_cm!).
use std::collections::HashMap;

fn main() {
    let mut counts = HashMap::new();
    counts.insert("tokens", 3u64);
    let _g = lens::span_cm!("eval.pass", eval.counts = counts);
}
