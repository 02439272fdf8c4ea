// A struct is not a span attribute value (span_cm!).
struct Config {
    lr: f64,
}

fn main() {
    let config = Config { lr: 0.1 };
    let _g = lens::span_cm!("eval.pass", "train.config" = config);
    let _ = config.lr;
}
