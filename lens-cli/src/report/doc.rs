//! The report document: what `lens report` knows about a run, shared by
//! the text, JSON and HTML renderers (`--json` serializes it as is).

use std::collections::BTreeMap;

use serde::Serialize;

use super::metrics::Series;
use super::series::StepSeries;
use super::steps::{Heat, StepRow, Straggler};
use super::{Settings, MAX_LISTED};
use crate::input::Diagnostics;

/// A truncated or failed span.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Flagged {
    /// Rank that exported it.
    pub(crate) rank: i64,
    /// Span name.
    pub(crate) name: String,
    /// Hex span id.
    pub(crate) span_id: String,
    /// Start (Unix ns).
    pub(crate) start_ns: u64,
    /// Duration (ns).
    pub(crate) dur_ns: u64,
    /// Truncation reason or status message.
    pub(crate) detail: String,
}

/// A count plus the first [`MAX_LISTED`] items.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Listed {
    /// How many there were.
    pub(crate) count: u64,
    /// The first ones.
    pub(crate) items: Vec<Flagged>,
}

impl Listed {
    pub(super) fn push(&mut self, f: impl FnOnce() -> Flagged) {
        self.count += 1;
        if self.items.len() < MAX_LISTED {
            self.items.push(f());
        }
    }
}

/// One rank's totals.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RankRow {
    /// `nv.dl.rank`.
    pub(crate) rank: i64,
    /// `host.name`.
    pub(crate) host: String,
    /// `process.pid`.
    pub(crate) pid: Option<i64>,
    /// Spans exported.
    pub(crate) spans: u64,
    /// Step spans exported.
    pub(crate) steps: u64,
    /// Earliest span start (Unix ns).
    pub(crate) first_ns: u64,
    /// Latest span end (Unix ns).
    pub(crate) last_ns: u64,
    /// `last_ns - first_ns`.
    pub(crate) wall_ns: u64,
    /// Metric export batches.
    pub(crate) metric_batches: u64,
    /// Log records.
    pub(crate) log_records: u64,
}

/// Totals over all spans.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SpanTotals {
    /// Spans read.
    pub(crate) count: u64,
    /// Spans marked `nemo.span.truncated`.
    pub(crate) truncated: u64,
    /// Spans with ERROR status.
    pub(crate) errors: u64,
    /// Sum over the ranks `--rank` selects (all without it) of their wall
    /// time (the denominator of `share`).
    pub(crate) wall_ns: u64,
    /// Names of spans carrying `dl.iteration` (or the former
    /// `nv.dl.iteration`).
    pub(crate) step_span_names: Vec<String>,
}

/// Duration statistics of one span name (ns; quantiles within 1%).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct NameRow {
    /// Spans with this name.
    pub(crate) count: u64,
    /// Summed duration.
    pub(crate) total_ns: u64,
    /// Mean duration (rounded).
    pub(crate) mean: u64,
    /// Shortest (exact).
    pub(crate) min: u64,
    /// Median duration.
    pub(crate) p50: u64,
    /// 95th percentile.
    pub(crate) p95: u64,
    /// 99th percentile.
    pub(crate) p99: u64,
    /// Longest.
    pub(crate) max: u64,
    /// `total_ns` over the summed wall time of all ranks.
    pub(crate) share: f64,
}

/// The step section.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StepsDoc {
    /// Iterations seen.
    pub(crate) count: usize,
    /// Phase (direct child) names tracked.
    pub(crate) phases: Vec<String>,
    /// Step spans whose iteration was out of the tracked range.
    pub(crate) untracked: u64,
    /// Child spans whose parent never arrived in time.
    pub(crate) unattributed_children: u64,
    /// Iterations per row: 1, or a power of two when the run was too long
    /// to keep every step (rows then hold means over that many steps, and
    /// straggler step counts count rows).
    pub(crate) iterations_per_row: i64,
    /// Rank order of each row's `by_rank`.
    pub(crate) ranks: Vec<i64>,
    /// One row per iteration.
    pub(crate) rows: Vec<StepRow>,
}

/// Last/min/max of one metric on one rank.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct MetricRow {
    /// Metric name, with point attributes as `{k=v}` when present.
    pub(crate) name: String,
    /// Rank.
    pub(crate) rank: i64,
    /// Values.
    #[serde(flatten)]
    pub(crate) series: Series,
}

/// One numeric attribute of one rank's step spans, by iteration.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StepSeriesRow {
    /// Attribute key (`loss`, `tokens_per_s`, …).
    pub(crate) name: String,
    /// Rank.
    pub(crate) rank: i64,
    /// Values.
    #[serde(flatten)]
    pub(crate) series: StepSeries,
}

/// What `--name` / `--rank` selected for the tables.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FilterDoc {
    /// `--name` patterns (any selects a span).
    pub(crate) names: Vec<String>,
    /// `--rank` ranks as inclusive `[first, last]` ranges.
    pub(crate) ranks: Vec<[i64; 2]>,
    /// Spans selected: those in `by_name`.
    pub(crate) spans: u64,
}

/// Everything `lens report` knows about a run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    /// Layout version of this document.
    pub(crate) schema_version: u32,
    /// The `--name` / `--rank` filters (null without): they restrict
    /// `by_name`, `truncated`, `errors`, `ranks` and `metrics`; the
    /// diagnosis, `steps`, `stragglers`, `spans` and the missing ranks read
    /// every span.
    pub(crate) filter: Option<FilterDoc>,
    /// Suspects of the diagnosis, ordered by blame (the same as
    /// `diagnosis.suspects`).
    pub(crate) suspects: Vec<super::diagnose::Suspect>,
    /// Which rank and phase cost the job time, or which rank hung it.
    pub(crate) diagnosis: super::diagnose::Diagnosis,
    /// Thresholds used.
    pub(crate) settings: Settings,
    /// What was read and skipped.
    pub(crate) input: Diagnostics,
    /// `nemo.run.id`s seen.
    pub(crate) run_ids: Vec<String>,
    /// Largest `nv.dl.world_size` (else `dl.world_size`) seen.
    pub(crate) world_size: Option<i64>,
    /// Ranks that sent anything (whatever `--rank` selects).
    pub(crate) rank_count: usize,
    /// Per-rank totals (of the ranks `--rank` selects).
    pub(crate) ranks: Vec<RankRow>,
    /// Ranks below `world_size` that exported no span: the first 1000
    /// (`missing_rank_count` counts them all, `missing_rank_ranges` lists
    /// them all).
    pub(crate) missing_ranks: Vec<i64>,
    /// How many ranks below `world_size` exported no span.
    pub(crate) missing_rank_count: u64,
    /// Those ranks as inclusive `[first, last]` ranges, ascending (one more
    /// than the ranks seen at most, whatever the world size claims).
    pub(crate) missing_rank_ranges: Vec<[i64; 2]>,
    /// Totals.
    pub(crate) spans: SpanTotals,
    /// Per span name statistics.
    pub(crate) by_name: BTreeMap<String, NameRow>,
    /// Step matrix summary.
    pub(crate) steps: StepsDoc,
    /// Ranks whose whole step was slower than the others' (jobs whose
    /// ranks do not synchronize; in a synchronized job see `diagnosis`).
    pub(crate) stragglers: Vec<Straggler>,
    /// Truncated spans.
    pub(crate) truncated: Listed,
    /// ERROR-status spans.
    pub(crate) errors: Listed,
    /// Numeric attributes of step spans (loss, tokens/s, learning rate)
    /// per rank: first/last (by iteration), min, max, count and the
    /// `[iteration, value]` points.
    pub(crate) step_series: Vec<StepSeriesRow>,
    /// Numeric step attributes of keys past the first 32 (not tracked).
    pub(crate) step_attributes_untracked: u64,
    /// The step axis of the training view: the first iteration and one
    /// past the last (null without step spans).
    pub(crate) step_axis: Option<(f64, f64)>,
    /// Metric first/last (by time), min, max and count per rank, with the
    /// `[time_ns, value]` points and where each falls on the step axis.
    pub(crate) metrics: Vec<MetricRow>,
    /// Metric points of labels past the first 1000 (not tracked).
    pub(crate) metric_points_untracked: u64,
    /// Metric time series (for HTML).
    #[serde(skip)]
    pub(crate) series: BTreeMap<String, BTreeMap<i64, Series>>,
    /// Step attribute series: key → rank → series (for text and HTML).
    #[serde(skip)]
    pub(crate) step_series_map: BTreeMap<String, BTreeMap<i64, StepSeries>>,
    /// Rank × step heat map (for HTML).
    #[serde(skip)]
    pub(crate) heat: Heat,
    /// Straggler rank → iterations where it was slow.
    #[serde(skip)]
    pub(crate) slow: BTreeMap<i64, Vec<i64>>,
}
