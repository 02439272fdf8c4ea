//! A library instrumented with lens but without the SDK.

use lens::{managed_span, span_cm, trace_fn, InSpan};

/// A training step, gated by the `step` group.
#[trace_fn(group = "step", name = "train.step", fields(iteration = it), args(it), err)]
pub fn step(it: u64) -> Result<u64, String> {
    let _fb = managed_span!("forward_backward", "fb", microbatches = 2);
    let _always = span_cm!("always.on", x = 1.5);
    Ok(it + 1)
}

/// An async rollout, gated by a consumer group.
#[trace_fn(group = lens::nemo_rl::ROLLOUT)]
pub async fn rollout(n: u32) -> u32 {
    async move { n * 2 }
        .in_span(managed_span!("job", "inner"))
        .await
}
