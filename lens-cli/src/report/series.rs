//! The training view's series: numeric attributes of step spans (loss,
//! tokens/s, learning rate) by iteration, each rank's step clock (which puts
//! a timed metric point on the step axis), and the text sparkline.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;

use crate::input::otlp::{AnyValue, ITERATION_KEYS};

/// Points kept per series; beyond it every other point is dropped.
const MAX_POINTS: usize = 512;
/// Points kept over all step series and clocks.
const MAX_POINTS_ALL: usize = 1 << 20;
/// Distinct step attribute keys tracked.
const MAX_KEYS: usize = 32;

/// One numeric step attribute of one rank, by iteration.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StepSeries {
    /// Step spans that carried it.
    pub(crate) count: u64,
    /// Value at the lowest iteration.
    pub(crate) first: f64,
    /// Value at the highest iteration.
    pub(crate) last: f64,
    /// Smallest value.
    pub(crate) min: f64,
    /// Largest value.
    pub(crate) max: f64,
    /// Kept `[iteration, value]` points, by iteration (all of them up to
    /// 512; an evenly decimated subset beyond).
    pub(crate) points: Vec<(i64, f64)>,
    #[serde(skip)]
    first_it: i64,
    #[serde(skip)]
    last_it: i64,
    #[serde(skip)]
    stride: u64,
    #[serde(skip)]
    cap: usize,
}

/// Keeps every point until `cap`, then every other one (and from then on
/// every `stride`-th): an even subset whatever the length.
fn decimate<T>(points: &mut Vec<T>, count: u64, stride: &mut u64, cap: usize, p: T) {
    if !count.is_multiple_of(*stride) {
        return;
    }
    if points.len() >= cap {
        let mut i = 0;
        points.retain(|_| {
            i += 1;
            i % 2 == 1
        });
        *stride *= 2;
    }
    if count.is_multiple_of(*stride) {
        points.push(p);
    }
}

impl StepSeries {
    fn new(cap: usize) -> Self {
        StepSeries {
            count: 0,
            first: f64::NAN,
            last: f64::NAN,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            points: Vec::new(),
            first_it: i64::MAX,
            last_it: i64::MIN,
            stride: 1,
            cap,
        }
    }

    fn add(&mut self, it: i64, v: f64) {
        decimate(
            &mut self.points,
            self.count,
            &mut self.stride,
            self.cap,
            (it, v),
        );
        self.count += 1;
        if it <= self.first_it {
            self.first_it = it;
            self.first = v;
        }
        if it >= self.last_it {
            self.last_it = it;
            self.last = v;
        }
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }
}

/// A step attribute that is not a training quantity: ids, ranks, the
/// iteration itself, thread and code locations.
fn is_bookkeeping(key: &str) -> bool {
    ITERATION_KEYS.contains(&key)
        || matches!(key, "step" | "iteration" | "microbatch")
        || ["thread.", "code.", "process.", "nemo.", "otel."]
            .iter()
            .any(|p| key.starts_with(p))
        || [".id", "_id", "rank", "world_size", "lineno"]
            .iter()
            .any(|s| key.ends_with(s))
}

/// Step attribute series: key → rank → series.
#[derive(Debug, Default)]
pub(crate) struct StepSeriesStore {
    series: HashMap<String, BTreeMap<i64, StepSeries>>,
    count: usize,
    /// Numeric step attributes of keys past the first [`MAX_KEYS`].
    pub(crate) untracked: u64,
}

impl StepSeriesStore {
    /// Offers one attribute of `rank`'s step span of iteration `it`: kept
    /// when it is a finite number and not bookkeeping.
    pub(crate) fn offer(&mut self, rank: i64, it: i64, key: &str, value: &AnyValue<'_>) {
        let Some(v) = value
            .double_value
            .or(value.int_value.map(|i| i as f64))
            .filter(|v| v.is_finite())
        else {
            return;
        };
        if is_bookkeeping(key) {
            return;
        }
        if !self.series.contains_key(key) {
            if self.series.len() >= MAX_KEYS {
                self.untracked += 1;
                return;
            }
            self.series.insert(key.to_owned(), BTreeMap::new());
        }
        let cap = (MAX_POINTS_ALL / (self.count + 1)).clamp(16, MAX_POINTS);
        if let Some(by_rank) = self.series.get_mut(key) {
            let s = by_rank.entry(rank).or_insert_with(|| {
                self.count += 1;
                StepSeries::new(cap)
            });
            s.add(it, v);
        }
    }

    /// The series by key, then rank, points by iteration.
    pub(crate) fn into_sorted(self) -> BTreeMap<String, BTreeMap<i64, StepSeries>> {
        let mut out: BTreeMap<String, BTreeMap<i64, StepSeries>> =
            self.series.into_iter().collect();
        for s in out.values_mut().flat_map(|r| r.values_mut()) {
            s.points.sort_by_key(|p| p.0);
        }
        out
    }
}

/// When one rank's steps ran: a decimated list of (iteration, start, end).
#[derive(Debug, Clone, Default)]
pub(crate) struct StepClock {
    steps: Vec<(i64, u64, u64)>,
    count: u64,
    stride: u64,
}

/// Every rank's step clock.
#[derive(Debug, Default)]
pub(crate) struct StepClocks {
    ranks: BTreeMap<i64, StepClock>,
}

impl StepClocks {
    /// Records that `rank` ran iteration `it` from `start` to `end` (ns).
    pub(crate) fn record(&mut self, rank: i64, it: i64, start: u64, end: u64) {
        let n = self.ranks.len();
        let c = self.ranks.entry(rank).or_insert_with(|| StepClock {
            stride: 1,
            ..StepClock::default()
        });
        let cap = (MAX_POINTS_ALL / (n + 1)).clamp(16, MAX_POINTS);
        decimate(&mut c.steps, c.count, &mut c.stride, cap, (it, start, end));
        c.count += 1;
    }

    /// Sorts the clocks by start time.
    pub(crate) fn finish(mut self) -> Self {
        for c in self.ranks.values_mut() {
            c.steps.sort_by_key(|s| s.1);
        }
        self
    }

    /// The step axis: the lowest iteration and one past the highest.
    pub(crate) fn axis(&self) -> Option<(f64, f64)> {
        let its = self
            .ranks
            .values()
            .flat_map(|c| c.steps.iter().map(|s| s.0));
        let (lo, hi) = its.fold((i64::MAX, i64::MIN), |(a, b), i| (a.min(i), b.max(i)));
        (lo <= hi).then_some((lo as f64, hi as f64 + 1.0))
    }

    /// Where time `t` (Unix ns) of `rank` falls on the step axis: the
    /// iteration, plus the fraction of the way to the next step kept;
    /// clamped to the steps (a point before the first step is at its
    /// start, one after the last at its end). A rank without steps reads
    /// the clock of the lowest rank with some.
    pub(crate) fn at(&self, rank: i64, t: u64) -> Option<f64> {
        let c = self
            .ranks
            .get(&rank)
            .filter(|c| !c.steps.is_empty())
            .or_else(|| self.ranks.values().find(|c| !c.steps.is_empty()))?;
        let s = &c.steps;
        let first = s[0];
        if t <= first.1 {
            return Some(first.0 as f64);
        }
        let i = s.partition_point(|x| x.1 <= t) - 1;
        let (it, start, end) = s[i];
        if let Some(&(next_it, next_start, _)) = s.get(i + 1) {
            let f = (t - start) as f64 / (next_start - start).max(1) as f64;
            return Some(it as f64 + f * (next_it - it) as f64);
        }
        let f = ((t - start) as f64 / (end.saturating_sub(start)).max(1) as f64).min(1.0);
        Some(it as f64 + f)
    }
}

/// Block characters from low to high.
const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// A sparkline of `values` (in order) at most `width` characters wide:
/// each character the mean of its share of the values, scaled between
/// `lo` and `hi`. Empty with fewer than 2 values.
pub(crate) fn sparkline(values: &[f64], lo: f64, hi: f64, width: usize) -> String {
    if values.len() < 2 || width == 0 {
        return String::new();
    }
    let n = values.len().min(width);
    let span = hi - lo;
    (0..n)
        .map(|i| {
            let a = i * values.len() / n;
            let b = ((i + 1) * values.len() / n).max(a + 1);
            let mean = values[a..b].iter().sum::<f64>() / (b - a) as f64;
            let level = if span > 0.0 {
                ((mean - lo) / span * 7.0).round().clamp(0.0, 7.0) as usize
            } else {
                3
            };
            BLOCKS[level]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(v: f64) -> AnyValue<'static> {
        AnyValue {
            double_value: Some(v),
            ..AnyValue::default()
        }
    }

    #[test]
    fn step_attributes_are_kept_by_iteration_and_bookkeeping_is_not() {
        let mut st = StepSeriesStore::default();
        for it in (0..5).rev() {
            st.offer(0, it, "loss", &num(10.0 - it as f64));
            st.offer(0, it, "thread.id", &num(7.0));
            st.offer(0, it, "dl.iteration", &num(it as f64));
        }
        st.offer(0, 9, "loss", &num(f64::NAN));
        let s = st.into_sorted();
        assert_eq!(s.keys().collect::<Vec<_>>(), ["loss"]);
        let l = &s["loss"][&0];
        assert_eq!(
            (l.count, l.first, l.last, l.min, l.max),
            (5, 10.0, 6.0, 6.0, 10.0)
        );
        assert_eq!(l.points.first(), Some(&(0, 10.0)));
        assert_eq!(l.points.last(), Some(&(4, 6.0)));
    }

    #[test]
    fn long_series_are_decimated_evenly() {
        let mut st = StepSeriesStore::default();
        for it in 0..10_000 {
            st.offer(3, it, "tokens_per_s", &num(it as f64));
        }
        let s = &st.into_sorted()["tokens_per_s"][&3];
        assert_eq!(s.count, 10_000);
        assert!(s.points.len() <= MAX_POINTS && s.points.len() > MAX_POINTS / 4);
        assert_eq!(s.points[0].0, 0);
        assert!(s.points.last().expect("points").0 > 9_000);
    }

    #[test]
    fn metric_times_fall_on_the_step_axis() {
        let mut c = StepClocks::default();
        for it in 0..4 {
            c.record(0, it, 1000 + it as u64 * 100, 1090 + it as u64 * 100);
        }
        let c = c.finish();
        assert_eq!(c.axis(), Some((0.0, 4.0)));
        assert_eq!(c.at(0, 10), Some(0.0));
        assert_eq!(c.at(0, 1150), Some(1.5));
        assert_eq!(c.at(0, 1345), Some(3.5));
        assert_eq!(c.at(0, 99_999), Some(4.0));
        // a rank without steps reads another's clock
        assert_eq!(c.at(5, 1150), Some(1.5));
        assert_eq!(StepClocks::default().at(0, 1), None);
    }

    #[test]
    fn sparkline_spans_the_blocks() {
        assert_eq!(sparkline(&[0.0, 1.0, 2.0, 7.0], 0.0, 7.0, 10), "▁▂▃█");
        assert_eq!(sparkline(&[1.0], 0.0, 1.0, 10), "");
        assert_eq!(sparkline(&[5.0, 5.0], 5.0, 5.0, 10), "▄▄");
        assert_eq!(
            sparkline(&(0..100).map(f64::from).collect::<Vec<_>>(), 0.0, 99.0, 8)
                .chars()
                .count(),
            8
        );
    }
}
