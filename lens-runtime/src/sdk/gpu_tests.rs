use super::*;
use crate::gpu_fake::{uuid, Fake, FAST};
use crate::metrics_test_support::{collect, flat, provider};
use opentelemetry::metrics::MeterProvider as _;

#[test]
fn placeholder_registers() {
    let fake = Fake::gpus(2);
    let (w, _warn) = fake.worker(None, FAST);
    let (p, e) = provider();
    assert!(register_on(&p.meter("t"), &w));
    let rms = collect(&p, &e);
    assert!(flat(&rms).iter().any(|m| m.name() == sc::METRIC_HW_POWER));
    let _ = uuid(0);
}
