//! Metric points per (metric, rank): first/last/min/max and a bounded,
//! evenly decimated time series, placed on the step axis for the training
//! view.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;

use crate::input::otlp::{KeyValue, Metric};

/// Points kept per series; beyond it every other point is dropped.
const MAX_POINTS: usize = 512;
/// Points kept over all series: with many series each keeps fewer.
const MAX_POINTS_ALL: usize = 1 << 20;
/// Distinct metric labels (name plus point attributes) tracked.
const MAX_LABELS: usize = 1000;

/// One metric series of one rank.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Series {
    /// Points seen.
    pub(crate) count: u64,
    /// Earliest value (by time).
    pub(crate) first: f64,
    /// Latest value (by time).
    pub(crate) last: f64,
    /// Smallest value.
    pub(crate) min: f64,
    /// Largest value.
    pub(crate) max: f64,
    #[serde(skip)]
    first_t: u64,
    #[serde(skip)]
    last_t: u64,
    /// Kept `[time (Unix ns), value]` points, by time (all of them up to
    /// 512; an evenly decimated subset beyond).
    pub(crate) points: Vec<(u64, f64)>,
    /// Where each kept point falls on the step axis (the iteration plus
    /// the fraction of the way to the next step; null without step spans).
    pub(crate) at_step: Vec<Option<f64>>,
    #[serde(skip)]
    stride: u64,
    #[serde(skip)]
    cap: usize,
}

impl Series {
    fn new(cap: usize) -> Self {
        Series {
            cap,
            count: 0,
            first: f64::NAN,
            last: f64::NAN,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            first_t: u64::MAX,
            last_t: 0,
            points: Vec::new(),
            at_step: Vec::new(),
            stride: 1,
        }
    }

    fn add(&mut self, t: u64, v: f64) {
        if !v.is_finite() {
            return;
        }
        if self.count.is_multiple_of(self.stride) {
            if self.points.len() >= self.cap {
                let mut i = 0;
                self.points.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride *= 2;
            }
            if self.count.is_multiple_of(self.stride) {
                self.points.push((t, v));
            }
        }
        self.count += 1;
        if t < self.first_t || self.first.is_nan() {
            self.first_t = t;
            self.first = v;
        }
        if t >= self.last_t {
            self.last_t = t;
            self.last = v;
        }
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }
}

/// All metric series: metric label → rank → series.
#[derive(Debug, Default)]
pub(crate) struct MetricStore {
    series: HashMap<String, BTreeMap<i64, Series>>,
    count: usize,
    /// Points of labels past [`MAX_LABELS`], not tracked.
    pub(crate) dropped_points: u64,
}

fn label(name: &str, attrs: &[KeyValue<'_>]) -> Option<String> {
    if attrs.is_empty() {
        return None;
    }
    let mut s = format!("{name}{{");
    for (i, kv) in attrs.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!("{}={}", kv.key, kv.value.to_value()));
    }
    s.push('}');
    Some(s)
}

impl MetricStore {
    fn add_point(&mut self, name: &str, attrs: &[KeyValue<'_>], rank: i64, t: u64, v: f64) {
        let key = label(name, attrs);
        let key = key.as_deref().unwrap_or(name);
        if !self.series.contains_key(key) {
            if self.series.len() >= MAX_LABELS {
                self.dropped_points += 1;
                return;
            }
            self.series.insert(key.to_owned(), BTreeMap::new());
        }
        let cap = (MAX_POINTS_ALL / (self.count + 1)).clamp(16, MAX_POINTS);
        if let Some(by_rank) = self.series.get_mut(key) {
            let series = by_rank.entry(rank).or_insert_with(|| {
                self.count += 1;
                Series::new(cap)
            });
            series.add(t, v);
        }
    }

    /// Adds the points of one batch of metrics from `rank`. Histograms
    /// contribute their mean (sum / count).
    pub(crate) fn add(&mut self, rank: i64, metrics: &[Metric<'_>]) {
        for m in metrics {
            for pts in [&m.gauge, &m.sum].into_iter().flatten() {
                for p in &pts.data_points {
                    let v = p.as_double.or(p.as_int.map(|i| i as f64));
                    if let Some(v) = v {
                        self.add_point(&m.name, &p.attributes, rank, p.time_unix_nano, v);
                    }
                }
            }
            if let Some(h) = &m.histogram {
                for p in &h.data_points {
                    if let (Some(sum), true) = (p.sum, p.count > 0) {
                        let mean = sum / p.count as f64;
                        self.add_point(&m.name, &p.attributes, rank, p.time_unix_nano, mean);
                    }
                }
            }
        }
    }

    /// Series sorted by metric label, then rank; points by time.
    pub(crate) fn into_sorted(self) -> BTreeMap<String, BTreeMap<i64, Series>> {
        let mut out: BTreeMap<String, BTreeMap<i64, Series>> = self.series.into_iter().collect();
        for s in out.values_mut().flat_map(|r| r.values_mut()) {
            s.points.sort_by_key(|p| p.0);
        }
        out
    }
}
