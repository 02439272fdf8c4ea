// A struct is not a span attribute value (managed_span!).
struct Config {
    lr: f64,
}

fn main() {
    let config = Config { lr: 0.1 };
    let _g = lens::managed_span!("step", "train.step", config);
    let _ = config.lr;
}
