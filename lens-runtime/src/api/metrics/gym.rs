//! Gym environment-server metrics (`gym.*`).

use super::common::*;
use crate::api::semconv as sc;
use opentelemetry::metrics::{Gauge, Histogram, Meter};
use opentelemetry::KeyValue;

/// Environment-server values, as [`GymMetrics::record`] takes them. Unset
/// fields are not recorded.
///
/// ```
/// let r = lens::metrics::GymRecord { verify_duration_ms: Some(12.0), ..Default::default() };
/// assert_eq!(r.servers_active, None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GymRecord {
    /// → histogram `gym.server.request_duration_ms` (`ms`).
    pub request_duration_ms: Option<f64>,
    /// → histogram `gym.rollout.duration_ms` (`ms`).
    pub rollout_duration_ms: Option<f64>,
    /// → histogram `gym.verify.duration_ms` (`ms`).
    pub verify_duration_ms: Option<f64>,
    /// → gauge `gym.verify.success_rate` (0..1; no unit, as in Python).
    pub verify_success_rate: Option<f64>,
    /// → gauge `gym.servers.active` (no unit, as in Python).
    pub servers_active: Option<u64>,
}

/// RL environment-server instruments (`gym.*`): three duration histograms
/// and two gauges, see [`GymRecord`].
///
/// ```
/// use lens::{metrics::GymMetrics, metrics::GymRecord};
/// let meter = lens::otel::global::meter("doc");
/// let gym = GymMetrics::new(&meter);
/// gym.record(&GymRecord { request_duration_ms: Some(35.0), servers_active: Some(4), ..Default::default() });
/// ```
#[derive(Debug)]
pub struct GymMetrics {
    request_duration: Histogram<f64>,
    rollout_duration: Histogram<f64>,
    verify_duration: Histogram<f64>,
    verify_success_rate: Gauge<f64>,
    servers_active: Gauge<u64>,
    attrs: Box<[KeyValue]>,
}

impl GymMetrics {
    /// Creates the instruments on `meter` (once per meter).
    ///
    /// ```
    /// let meter = lens::otel::global::meter("doc");
    /// let _gym = lens::metrics::GymMetrics::new(&meter);
    /// ```
    pub fn new(meter: &Meter) -> Self {
        Self::with_attributes(meter, [])
    }

    /// Like [`new`](Self::new), adding constant `attributes` to every point
    /// (e.g. the environment's name).
    ///
    /// ```
    /// use lens::otel::KeyValue;
    /// let meter = lens::otel::global::meter("doc");
    /// let _gym = lens::metrics::GymMetrics::with_attributes(&meter, [KeyValue::new("env", "math")]);
    /// ```
    pub fn with_attributes(meter: &Meter, attributes: impl IntoIterator<Item = KeyValue>) -> Self {
        // the Python library's instruments: SDK boundaries, gauges unitless
        let h = |name, desc| shared_histogram(meter, name, UNIT_MS, desc);
        GymMetrics {
            request_duration: h(
                sc::METRIC_GYM_SERVER_REQUEST_DURATION_MS,
                "Duration of one request to an environment server.",
            ),
            rollout_duration: h(
                sc::METRIC_GYM_ROLLOUT_DURATION_MS,
                "Duration of one rollout collection.",
            ),
            verify_duration: h(
                sc::METRIC_GYM_VERIFY_DURATION_MS,
                "Duration of one verification.",
            ),
            verify_success_rate: unitless_gauge(
                meter,
                sc::METRIC_GYM_VERIFY_SUCCESS_RATE,
                "Fraction of verifications that passed.",
            ),
            servers_active: meter
                .u64_gauge(sc::METRIC_GYM_SERVERS_ACTIVE)
                .with_description("Environment servers currently serving.")
                .build(),
            attrs: attributes.into_iter().collect(),
        }
    }

    /// Records what `record` holds.
    ///
    /// ```
    /// use lens::{metrics::GymMetrics, metrics::GymRecord};
    /// let meter = lens::otel::global::meter("doc");
    /// GymMetrics::new(&meter).record(&GymRecord { verify_success_rate: Some(0.9), ..Default::default() });
    /// ```
    pub fn record(&self, r: &GymRecord) {
        let a = &*self.attrs;
        if let Some(v) = r.request_duration_ms {
            self.request_duration.record(v, a);
        }
        if let Some(v) = r.rollout_duration_ms {
            self.rollout_duration.record(v, a);
        }
        if let Some(v) = r.verify_duration_ms {
            self.verify_duration.record(v, a);
        }
        if let Some(v) = r.verify_success_rate {
            self.verify_success_rate.record(v, a);
        }
        if let Some(v) = r.servers_active {
            self.servers_active.record(v, a);
        }
    }
}
