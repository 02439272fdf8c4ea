// A HashMap is not a span attribute value (managed_span!).
use std::collections::HashMap;

fn main() {
    let metrics: HashMap<&str, f64> = HashMap::new();
    let _g = lens::managed_span!("evaluate", "eval.metrics", metrics = metrics);
}
