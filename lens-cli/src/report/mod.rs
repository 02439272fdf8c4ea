//! `lens report`: streams the input through an [`Aggregator`] (bounded
//! memory: sketches, a step matrix, capped lists) and turns it into a
//! [`Report`] that the text, JSON and HTML renderers share.

mod csv;
pub(crate) mod diagnose;
mod doc;
mod filter;
mod metrics;
pub(crate) mod series;
mod steps;
pub(crate) mod text;

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;

use crate::input::otlp::{span_id_u64, Metric, Span, StepIteration};
use crate::input::{Diagnostics, Origin, Sink};
use crate::sketch::Sketch;
pub(crate) use csv::render_csv;
pub(crate) use doc::Report;
use doc::{
    FilterDoc, Flagged, Listed, MetricRow, NameRow, RankRow, SpanTotals, StepSeriesRow, StepsDoc,
};
pub(crate) use filter::{parse_ranks, Filter};
pub(crate) use text::render_text;

/// Version of the `--json` document layout.
pub(crate) const SCHEMA_VERSION: u32 = 1;
/// Truncated / error spans listed individually (the rest are counted).
const MAX_LISTED: usize = 1000;
/// Distinct span names tracked; later new names are counted together.
const MAX_NAMES: usize = 10_000;
/// Pending child durations kept per rank before giving up on old ones.
const MAX_PENDING: usize = 200_000;
/// Ranks that exported nothing listed one by one (all are in the ranges).
const MAX_MISSING_LISTED: usize = 1000;

/// Thresholds of the straggler analysis.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Settings {
    /// A rank is slow in a step when it exceeds the step median by this percent.
    pub(crate) straggler_pct: f64,
    /// …and a straggler when slow in at least this share of its steps.
    pub(crate) straggler_share: f64,
}

#[derive(Debug, Default)]
struct NameStats {
    sketch: Sketch,
    /// Whether `--name` selects this name (its spans enter the tables).
    selected: bool,
}

#[derive(Debug, Default)]
struct RankState {
    host: String,
    pid: Option<i64>,
    spans: u64,
    first_ns: Option<u64>,
    last_ns: u64,
    metric_batches: u64,
    log_records: u64,
    /// Parent span id → (name id, summed ns, first start) of its children
    /// seen so far.
    pending: HashMap<u64, Vec<(u32, u64, u64)>>,
}

/// Streaming aggregation of one run.
#[derive(Debug, Default)]
pub(crate) struct Aggregator {
    names: Vec<(String, NameStats)>,
    name_ids: HashMap<String, u32>,
    ranks: BTreeMap<i64, RankState>,
    steps: steps::StepMatrix,
    step_names: BTreeSet<u32>,
    truncated: Listed,
    errors: Listed,
    metrics: metrics::MetricStore,
    /// Numeric attributes of step spans, by iteration.
    step_series: series::StepSeriesStore,
    /// When each rank's steps ran (puts metric points on the step axis).
    clocks: series::StepClocks,
    world_size: Option<i64>,
    run_ids: BTreeSet<String>,
    unattributed: u64,
    /// Per phase name id: summed start offsets within their steps (ns) and
    /// how many, to order the phases as they run.
    phase_offsets: HashMap<u32, (f64, u64)>,
    /// Spans left open and each rank's last step, for the hang diagnosis.
    hangs: diagnose::HangInput,
    /// What the tables show (`--name`, `--rank`).
    filter: Filter,
    /// Spans the filter selected.
    selected_spans: u64,
    /// Truncated and ERROR spans, whatever the filter selects.
    all_truncated: u64,
    all_errors: u64,
}

/// Open spans kept per rank for the hang diagnosis.
const MAX_OPEN_PER_RANK: usize = 64;

impl Aggregator {
    /// An aggregator whose tables show what `filter` selects (the
    /// diagnosis and the step analysis read everything).
    pub(crate) fn new(filter: Filter) -> Self {
        Aggregator {
            filter,
            ..Aggregator::default()
        }
    }

    fn name_id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.name_ids.get(name) {
            return id;
        }
        if self.names.len() >= MAX_NAMES {
            // names carrying ids would grow the table without bound
            return self.name_id_capped();
        }
        let id = self.names.len() as u32;
        let stats = NameStats {
            selected: self.filter.name(name),
            ..NameStats::default()
        };
        self.names.push((name.to_owned(), stats));
        self.name_ids.insert(name.to_owned(), id);
        id
    }

    #[cold]
    fn name_id_capped(&mut self) -> u32 {
        let other = format!("(other names past the first {MAX_NAMES})");
        if let Some(&id) = self.name_ids.get(&other) {
            return id;
        }
        let id = self.names.len() as u32;
        let stats = NameStats {
            // names unknown: only without a name filter
            selected: self.filter.names.is_empty(),
            ..NameStats::default()
        };
        self.names.push((other.clone(), stats));
        self.name_ids.insert(other, id);
        id
    }

    fn origin(&mut self, o: &Origin) -> &mut RankState {
        if let Some(ws) = o.world_size {
            self.world_size = Some(self.world_size.map_or(ws, |w| w.max(ws)));
        }
        if !o.run_id.is_empty() && !self.run_ids.contains(&o.run_id) {
            self.run_ids.insert(o.run_id.clone());
        }
        let r = self.ranks.entry(o.rank).or_default();
        if r.host.is_empty() {
            r.host.clone_from(&o.host);
            r.pid = o.pid;
        }
        r
    }

    fn span(&mut self, rank: i64, s: &Span<'_>) {
        let dur = s.end_time_unix_nano.saturating_sub(s.start_time_unix_nano);
        let id = self.name_id(&s.name);
        let keep = self.names[id as usize].1.selected && self.filter.rank(rank);
        if keep {
            self.names[id as usize].1.sketch.add(dur);
            self.selected_spans += 1;
        }
        let (mut iteration, mut truncated, mut reason) = (StepIteration::default(), false, "");
        for kv in &s.attributes {
            match kv.key.as_ref() {
                k if iteration.offer(k, &kv.value) => {}
                "nemo.span.truncated" => truncated = kv.value.is_true(),
                "nemo.span.truncated.reason" => reason = kv.value.as_str().unwrap_or(""),
                _ => {}
            }
        }
        let flagged = |detail: &str| Flagged {
            rank,
            name: s.name.to_string(),
            span_id: s.span_id.to_string(),
            start_ns: s.start_time_unix_nano,
            dur_ns: dur,
            detail: detail.to_owned(),
        };
        if truncated {
            self.all_truncated += 1;
            if keep {
                self.truncated.push(|| flagged(reason));
            }
            let open = self.hangs.open.entry(rank).or_default();
            if open.len() < MAX_OPEN_PER_RANK {
                open.push(diagnose::OpenSpan {
                    name: s.name.to_string(),
                    span_id: span_id_u64(&s.span_id),
                    parent_id: span_id_u64(&s.parent_span_id),
                    start_ns: s.start_time_unix_nano,
                    dur_ns: dur,
                    iteration: iteration.get(),
                });
            }
        }
        if s.status.code == 2 {
            self.all_errors += 1;
            if keep {
                self.errors.push(|| flagged(&s.status.message));
            }
        }
        let Some(r) = self.ranks.get_mut(&rank) else {
            return;
        };
        r.spans += 1;
        r.first_ns = Some(
            r.first_ns
                .map_or(s.start_time_unix_nano, |f| f.min(s.start_time_unix_nano)),
        );
        r.last_ns = r.last_ns.max(s.end_time_unix_nano);
        let children = r.pending.remove(&span_id_u64(&s.span_id));
        let parent = span_id_u64(&s.parent_span_id);
        if parent != 0 {
            if r.pending.len() >= MAX_PENDING {
                self.unattributed += r.pending.len() as u64;
                r.pending.clear();
            }
            let e = r.pending.entry(parent).or_default();
            match e.iter_mut().find(|(n, ..)| *n == id) {
                Some(slot) => {
                    slot.1 = slot.1.saturating_add(dur);
                    slot.2 = slot.2.min(s.start_time_unix_nano);
                }
                None => e.push((id, dur, s.start_time_unix_nano)),
            }
        }
        if let Some(it) = iteration.get() {
            self.step_names.insert(id);
            if !truncated {
                let last = self.hangs.last_step.entry(rank).or_insert(it);
                *last = (*last).max(it);
                self.clocks
                    .record(rank, it, s.start_time_unix_nano, s.end_time_unix_nano);
            }
            for kv in &s.attributes {
                self.step_series.offer(rank, it, &kv.key, &kv.value);
            }
            let mut phases = Vec::new();
            for (child, ns, start) in children.unwrap_or_default() {
                let off = self.phase_offsets.entry(child).or_default();
                off.0 += start.saturating_sub(s.start_time_unix_nano) as f64;
                off.1 += 1;
                let name = &self.names[child as usize].0;
                if let Some(slot) = self.steps.phase_slot(name) {
                    phases.push((slot, ns));
                }
            }
            self.steps.record(rank, it, dur, &phases);
        }
    }

    /// The synchronization-aware diagnosis: the phases in the order they
    /// run (their mean start within the step), every step's profile, and
    /// the spans left open.
    fn diagnose(&self) -> diagnose::Diagnosis {
        let names = self.steps.phase_names();
        let offset = |name: &str| {
            self.name_ids
                .get(name)
                .and_then(|id| self.phase_offsets.get(id))
                .map_or(f64::MAX, |(sum, n)| sum / (*n).max(1) as f64)
        };
        let mut order: Vec<usize> = (0..names.len()).collect();
        order.sort_by(|&a, &b| offset(&names[a]).total_cmp(&offset(&names[b])));
        let ordered: Vec<String> = order.iter().map(|&k| names[k].clone()).collect();
        let rows = self.steps.diagnosis_rows(&order);
        diagnose::diagnose(rows, &ordered, &self.hangs)
    }

    /// Finishes the aggregation.
    pub(crate) fn finish(self, diag: Diagnostics, settings: Settings) -> Report {
        let analysis = self
            .steps
            .analyze(settings.straggler_pct, settings.straggler_share);
        let diagnosis = self.diagnose();
        let filter = &self.filter;
        let ranks: Vec<RankRow> = self
            .ranks
            .iter()
            .filter(|(&rank, _)| filter.rank(rank))
            .map(|(&rank, r)| RankRow {
                rank,
                host: r.host.clone(),
                pid: r.pid,
                spans: r.spans,
                steps: self.steps.steps_of(rank),
                first_ns: r.first_ns.unwrap_or(0),
                last_ns: r.last_ns,
                wall_ns: r.last_ns.saturating_sub(r.first_ns.unwrap_or(r.last_ns)),
                metric_batches: r.metric_batches,
                log_records: r.log_records,
            })
            .collect();
        let wall: u64 = ranks.iter().fold(0, |w, r| w.saturating_add(r.wall_ns));
        let by_name = self
            .names
            .iter()
            .filter(|(_, st)| st.sketch.count() > 0)
            .map(|(name, st)| {
                let k = &st.sketch;
                let row = NameRow {
                    count: k.count(),
                    total_ns: u64::try_from(k.sum()).unwrap_or(u64::MAX),
                    mean: k.mean(),
                    min: k.min(),
                    p50: k.quantile(0.5),
                    p95: k.quantile(0.95),
                    p99: k.quantile(0.99),
                    max: k.max(),
                    share: if wall > 0 {
                        k.sum() as f64 / wall as f64
                    } else {
                        0.0
                    },
                };
                (name.clone(), row)
            })
            .collect();
        let missing = missing_ranks(
            self.world_size.unwrap_or(0),
            self.ranks
                .iter()
                .filter(|(_, s)| s.spans > 0)
                .map(|(&r, _)| r),
        );
        let metric_points_untracked = self.metrics.dropped_points;
        let mut metrics_series = self.metrics.into_sorted();
        if !filter.ranks.is_empty() {
            for by_rank in metrics_series.values_mut() {
                by_rank.retain(|&rank, _| filter.rank(rank));
            }
            metrics_series.retain(|_, by_rank| !by_rank.is_empty());
        }
        let clocks = self.clocks.finish();
        for (&rank, s) in metrics_series.values_mut().flat_map(|r| r.iter_mut()) {
            s.at_step = s.points.iter().map(|&(t, _)| clocks.at(rank, t)).collect();
        }
        let step_axis = clocks.axis();
        let step_attributes_untracked = self.step_series.untracked;
        let mut step_series = self.step_series.into_sorted();
        if !filter.ranks.is_empty() {
            for by_rank in step_series.values_mut() {
                by_rank.retain(|&rank, _| filter.rank(rank));
            }
            step_series.retain(|_, by_rank| !by_rank.is_empty());
        }
        let step_rows = step_series
            .iter()
            .flat_map(|(name, by_rank)| {
                by_rank.iter().map(move |(&rank, s)| StepSeriesRow {
                    name: name.clone(),
                    rank,
                    series: s.clone(),
                })
            })
            .collect();
        let metrics = metrics_series
            .iter()
            .flat_map(|(name, by_rank)| {
                by_rank.iter().map(move |(&rank, s)| MetricRow {
                    name: name.clone(),
                    rank,
                    series: s.clone(),
                })
            })
            .collect();
        let filter_doc = (!self.filter.is_empty()).then(|| FilterDoc {
            names: self.filter.names.clone(),
            ranks: self.filter.ranks.clone(),
            spans: self.selected_spans,
        });
        Report {
            schema_version: SCHEMA_VERSION,
            filter: filter_doc,
            rank_count: self.ranks.len(),
            settings,
            input: diag.clone(),
            run_ids: self.run_ids.into_iter().collect(),
            world_size: self.world_size,
            spans: SpanTotals {
                count: diag.spans,
                truncated: self.all_truncated,
                errors: self.all_errors,
                wall_ns: wall,
                step_span_names: self
                    .step_names
                    .iter()
                    .map(|&i| self.names[i as usize].0.clone())
                    .collect(),
            },
            ranks,
            missing_ranks: missing.listed,
            missing_rank_count: missing.count,
            missing_rank_ranges: missing.ranges,
            by_name,
            steps: StepsDoc {
                count: analysis.rows.len(),
                phases: analysis.phases,
                untracked: self.steps.untracked,
                unattributed_children: self.unattributed,
                iterations_per_row: self.steps.stride(),
                ranks: analysis.ranks,
                rows: analysis.rows,
            },
            heat: analysis.heat,
            suspects: diagnosis.suspects.clone(),
            diagnosis,
            stragglers: analysis.stragglers,
            truncated: self.truncated,
            errors: self.errors,
            metrics,
            metric_points_untracked,
            series: metrics_series,
            step_series: step_rows,
            step_attributes_untracked,
            step_axis,
            step_series_map: step_series,
            slow: analysis.slow,
        }
    }
}

/// The ranks below the world size that exported no span.
#[derive(Debug, Default, PartialEq)]
struct Missing {
    /// The first [`MAX_MISSING_LISTED`].
    listed: Vec<i64>,
    /// All of them, as inclusive ranges.
    ranges: Vec<[i64; 2]>,
    /// How many.
    count: u64,
}

/// The ranks in `0..world_size` not in `seen` (ascending). `world_size`
/// comes from the input and may be anything up to i64::MAX: it is only a
/// bound, and the work is in the ranks seen.
fn missing_ranks(world_size: i64, seen: impl Iterator<Item = i64>) -> Missing {
    let mut m = Missing::default();
    let mut next = 0i64;
    let gap = |m: &mut Missing, a: i64, b: i64| {
        // a..=b, with a <= b
        m.ranges.push([a, b]);
        m.count = m.count.saturating_add(b.abs_diff(a) + 1);
        let room = MAX_MISSING_LISTED - m.listed.len();
        m.listed.extend((a..=b).take(room));
    };
    for r in seen {
        if r < next {
            continue;
        }
        if r >= world_size {
            break;
        }
        if r > next {
            gap(&mut m, next, r - 1);
        }
        // r < world_size, so r + 1 cannot overflow
        next = r + 1;
    }
    if next < world_size {
        gap(&mut m, next, world_size - 1);
    }
    m
}

impl Sink for Aggregator {
    fn spans(&mut self, origin: &Origin, spans: &[Span<'_>]) {
        self.origin(origin);
        for s in spans {
            self.span(origin.rank, s);
        }
    }

    fn metrics(&mut self, origin: &Origin, metrics: &[Metric<'_>]) {
        self.origin(origin).metric_batches += 1;
        self.metrics.add(origin.rank, metrics);
    }

    fn logs(&mut self, origin: &Origin, count: usize) {
        self.origin(origin).log_records += count as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_ranks_cost_what_was_seen_not_the_world_size() {
        let m = missing_ranks(6, [0, 2, 3].into_iter());
        assert_eq!(m.listed, [1, 4, 5]);
        assert_eq!(m.ranges, [[1, 1], [4, 5]]);
        assert_eq!(m.count, 3);
        let m = missing_ranks(i64::MAX, [-4, 0, 1, 3, i64::MAX].into_iter());
        assert_eq!(m.ranges, [[2, 2], [4, i64::MAX - 1]]);
        assert_eq!(m.count, i64::MAX as u64 - 3);
        assert_eq!(m.listed.len(), MAX_MISSING_LISTED);
        assert_eq!(m.listed[..3], [2, 4, 5]);
        assert_eq!(missing_ranks(-5, [0].into_iter()), Missing::default());
        assert_eq!(missing_ranks(0, std::iter::empty()), Missing::default());
        assert_eq!(missing_ranks(2, [0, 1, 7].into_iter()), Missing::default());
    }
}
