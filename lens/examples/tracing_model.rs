//! A model instrumented with `tracing` the way candle is: each layer makes
//! its span once, at load, and enters it on every forward call. Lens's
//! `tracing` bridge, routed per entry, turns each entry into one lens span
//! (a child of the step around it), in lens's own pipeline: no second
//! exporter, span groups as for lens's own macros. Shipped with the
//! `nemo-lens` crate.
//!
//! ```text
//! NEMO_LENS_ENABLED=1 NEMO_LENS_EXPORTER=file NEMO_LENS_SPAN_GROUPS=per_step \
//!     NEMO_LENS_TRACING_GROUPS="tracing_model=forward_backward:per_entry" \
//!     cargo run -p nemo-lens --example tracing_model
//! ```
//!
//! Without `NEMO_LENS_TRACING_GROUPS` the `tracing` spans are not recorded
//! (the default for an unrouted target is `off`); with `forward_backward`
//! off (`NEMO_LENS_SPAN_GROUPS=default`) each entry costs a bit test.

use lens::tracing::tracing;
use lens::tracing::tracing_subscriber::{layer::SubscriberExt as _, registry};
use std::time::Duration;

/// One layer of the model: its span is made once, entered per forward.
struct Linear {
    span: tracing::Span,
    weight: f64,
}

impl Linear {
    fn new(index: usize) -> Self {
        Linear {
            span: tracing::info_span!("linear", index),
            weight: 1.0 + index as f64 / 10.0,
        }
    }

    fn forward(&self, x: f64) -> f64 {
        let _entered = self.span.enter();
        (x * self.weight).tanh()
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let telemetry = lens::setup_telemetry_from_env()?;
    tracing::subscriber::set_global_default(registry().with(lens::tracing::layer()))?;
    let model: Vec<Linear> = (0..4).map(Linear::new).collect();
    {
        let _job = lens::managed_span!("job", "train.job");
        for iteration in 0..3u64 {
            let _step = lens::managed_span!("step", "train.step", "dl.iteration" = iteration);
            let out = model.iter().fold(0.5, |x, layer| layer.forward(x));
            println!("step {iteration}: {out:.4}");
        }
    }
    telemetry.shutdown(Duration::from_secs(10));
    println!("run {}: done", telemetry.run_id());
    Ok(())
}
