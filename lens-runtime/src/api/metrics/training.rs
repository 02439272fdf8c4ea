//! Training metrics (`nv.dl.*`).

use super::common::*;
use crate::api::semconv as sc;
use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter};
use opentelemetry::KeyValue;

/// One training step's values, as [`TrainingMetrics::record`] takes them.
/// Unset fields are not recorded.
///
/// ```
/// let r = lens::metrics::TrainingRecord { loss: Some(2.3), iterations: Some(1), ..Default::default() };
/// assert_eq!(r.tflops, None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TrainingRecord {
    /// Step wall time in seconds → histogram `nv.dl.step.duration` (`s`).
    pub step_duration_s: Option<f64>,
    /// → gauge `nv.dl.loss` (`1`).
    pub loss: Option<f64>,
    /// → gauge `nv.dl.grad_norm` (`1`).
    pub grad_norm: Option<f64>,
    /// → gauge `nv.dl.learning_rate` (`1`).
    pub learning_rate: Option<f64>,
    /// → gauge `nv.dl.throughput.tokens_per_sec` (`{token}/s`).
    pub tokens_per_sec: Option<f64>,
    /// → gauge `nv.dl.throughput.tflops` (`{TFLOP}/s`).
    pub tflops: Option<f64>,
    /// Iterations completed since the last record (usually 1) → counter
    /// `nv.dl.iterations` (`{iteration}`).
    pub iterations: Option<u64>,
}

/// Training-loop instruments (`nv.dl.*`): step-duration histogram, loss,
/// gradient norm, learning rate, tokens/s and TFLOP/s gauges, iteration
/// counter, see [`TrainingRecord`].
///
/// ```
/// use lens::{metrics::TrainingMetrics, metrics::TrainingRecord};
/// let meter = lens::otel::global::meter("doc");
/// let train = TrainingMetrics::new(&meter);
/// train.record(&TrainingRecord {
///     step_duration_s: Some(1.8), loss: Some(2.31), iterations: Some(1), ..Default::default()
/// });
/// ```
#[derive(Debug)]
pub struct TrainingMetrics {
    step_duration: Histogram<f64>,
    loss: Gauge<f64>,
    grad_norm: Gauge<f64>,
    learning_rate: Gauge<f64>,
    tokens_per_sec: Gauge<f64>,
    tflops: Gauge<f64>,
    iterations: Counter<u64>,
    attrs: Box<[KeyValue]>,
}

impl TrainingMetrics {
    /// Creates the instruments on `meter` (once per meter).
    ///
    /// ```
    /// let meter = lens::otel::global::meter("doc");
    /// let _train = lens::metrics::TrainingMetrics::new(&meter);
    /// ```
    pub fn new(meter: &Meter) -> Self {
        Self::with_attributes(meter, [])
    }

    /// Like [`new`](Self::new), adding constant `attributes` to every point.
    ///
    /// ```
    /// use lens::otel::KeyValue;
    /// let meter = lens::otel::global::meter("doc");
    /// let _t = lens::metrics::TrainingMetrics::with_attributes(&meter, [KeyValue::new("phase", "sft")]);
    /// ```
    pub fn with_attributes(meter: &Meter, attributes: impl IntoIterator<Item = KeyValue>) -> Self {
        let g = |name, unit, desc| gauge(meter, name, unit, desc);
        TrainingMetrics {
            step_duration: histogram(
                meter,
                sc::METRIC_NV_DL_STEP_DURATION,
                UNIT_S,
                "Wall time of one training step.",
                &STEP_DURATION_BUCKETS_S,
            ),
            loss: g(sc::METRIC_NV_DL_LOSS, UNIT_ONE, "Training loss."),
            grad_norm: g(
                sc::METRIC_NV_DL_GRAD_NORM,
                UNIT_ONE,
                "Global gradient norm.",
            ),
            learning_rate: g(sc::METRIC_NV_DL_LEARNING_RATE, UNIT_ONE, "Learning rate."),
            tokens_per_sec: g(
                sc::METRIC_NV_DL_THROUGHPUT_TOKENS_PER_SEC,
                UNIT_TOKENS_PER_S,
                "Training token throughput.",
            ),
            tflops: g(
                sc::METRIC_NV_DL_THROUGHPUT_TFLOPS,
                UNIT_TFLOPS,
                "Model TFLOP/s achieved.",
            ),
            iterations: meter
                .u64_counter(sc::METRIC_NV_DL_ITERATIONS)
                .with_unit(UNIT_ITERATION)
                .with_description("Training iterations completed.")
                .build(),
            attrs: attributes.into_iter().collect(),
        }
    }

    /// Records what `record` holds.
    ///
    /// ```
    /// use lens::{metrics::TrainingMetrics, metrics::TrainingRecord};
    /// let meter = lens::otel::global::meter("doc");
    /// TrainingMetrics::new(&meter).record(&TrainingRecord { tflops: Some(410.0), ..Default::default() });
    /// ```
    pub fn record(&self, r: &TrainingRecord) {
        let a = &*self.attrs;
        if let Some(v) = r.step_duration_s {
            self.step_duration.record(v, a);
        }
        let set = |g: &Gauge<f64>, v: Option<f64>| {
            if let Some(v) = v {
                g.record(v, a);
            }
        };
        set(&self.loss, r.loss);
        set(&self.grad_norm, r.grad_norm);
        set(&self.learning_rate, r.learning_rate);
        set(&self.tokens_per_sec, r.tokens_per_sec);
        set(&self.tflops, r.tflops);
        if let Some(n) = r.iterations {
            self.iterations.add(n, a);
        }
    }
}
