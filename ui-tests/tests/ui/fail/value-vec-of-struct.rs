// Array attributes hold scalars only.
struct Sample {
    reward: f64,
}

fn main() {
    let samples = vec![Sample { reward: 1.0 }];
    let _g = lens::span_cm!("rollout", samples = samples);
    let _ = samples[0].reward;
}
