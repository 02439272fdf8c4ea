//! The straggler analysis over a [`StepMatrix`]: per-step min/median/max,
//! ranks slower than the step median in enough steps and the phase that
//! makes them slow, and the rank × step heat map.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;

use super::{StepMatrix, MAX_PHASES};

/// Columns of the rank × step heat map at most (steps are bucketed).
const HEAT_COLS: usize = 240;
/// Rows carry per-rank durations when ranks × steps stays under this.
const MATRIX_CELLS: usize = 200_000;

/// One step across ranks.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StepRow {
    /// `dl.iteration` (or the former `nv.dl.iteration`).
    pub(crate) iteration: i64,
    /// Ranks that reported this step.
    pub(crate) ranks: usize,
    /// Fastest rank and its duration.
    pub(crate) min_rank: i64,
    /// Fastest duration (ns).
    pub(crate) min_ns: u64,
    /// The median rank (lower middle for even counts).
    pub(crate) median_rank: i64,
    /// Median duration (ns).
    pub(crate) median_ns: u64,
    /// Slowest rank.
    pub(crate) max_rank: i64,
    /// Slowest duration (ns).
    pub(crate) max_ns: u64,
    /// Duration per rank (in `StepsDoc::ranks` order; null when missing),
    /// present when the matrix is small enough.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) by_rank: Option<Vec<Option<u64>>>,
}

/// The rank × step matrix reduced to at most [`HEAT_COLS`] columns: the
/// mean of duration / step median over the steps of each column.
#[derive(Debug, Clone, Default)]
pub(crate) struct Heat {
    /// Row order.
    pub(crate) ranks: Vec<i64>,
    /// First iteration of each column.
    pub(crate) first_iteration: Vec<i64>,
    /// `ranks.len() × first_iteration.len()` ratios, row-major; NaN when missing.
    pub(crate) ratio: Vec<f32>,
}

/// A rank that is slow in enough steps.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Straggler {
    /// The rank.
    pub(crate) rank: i64,
    /// Steps in which it was slower than the median by more than the threshold.
    pub(crate) slow_steps: u64,
    /// Steps it reported (with at least one other rank).
    pub(crate) steps: u64,
    /// Mean excess over the step median in its slow steps, in percent.
    pub(crate) mean_excess_pct: f64,
    /// The phase that accounts for most of the excess, when phases exist.
    pub(crate) phase: Option<String>,
    /// Mean excess of that phase over its median in the slow steps (ns).
    pub(crate) phase_excess_ns: u64,
}

/// Result of the straggler analysis.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct StepAnalysis {
    /// One row per iteration, in order.
    pub(crate) rows: Vec<StepRow>,
    /// Stragglers, slowest first.
    pub(crate) stragglers: Vec<Straggler>,
    /// Phase names tracked.
    pub(crate) phases: Vec<String>,
    /// Per straggler rank: the iterations in which it was slow.
    #[serde(skip)]
    pub(crate) slow: BTreeMap<i64, Vec<i64>>,
    /// Rank order of `StepRow::by_rank`.
    pub(crate) ranks: Vec<i64>,
    /// The heat map.
    #[serde(skip)]
    pub(crate) heat: Heat,
}

fn lower_median(v: &mut [(u64, i64)]) -> (u64, i64) {
    v.sort_unstable();
    v[(v.len() - 1) / 2]
}

impl StepMatrix {
    /// Per-step min/median/max and the ranks slower than the step median by
    /// more than `pct` percent in at least `share` of their steps.
    pub(crate) fn analyze(&self, pct: f64, share: f64) -> StepAnalysis {
        // the buckets that hold cells: the union of the ranks' ranges, in
        // order (iterations may lie as far apart as i64::MIN and i64::MAX,
        // so only these are visited, and distances are taken in i128)
        let mut ranges: Vec<(i64, i64)> = self
            .ranks
            .values()
            .filter_map(|r| {
                let last = i64::try_from(r.cells.len()).ok()?.checked_sub(1)?;
                Some((r.base, r.base.checked_add(last)?))
            })
            .collect();
        ranges.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::with_capacity(ranges.len());
        for (a, b) in ranges {
            match merged.last_mut() {
                Some(m) if a <= m.1.saturating_add(1) => m.1 = m.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        let (Some(&(lo, _)), Some(&(_, hi))) = (merged.first(), merged.last()) else {
            return StepAnalysis::default();
        };
        let factor = 1.0 + pct / 100.0;
        let ranks: Vec<i64> = self.ranks.keys().copied().collect();
        // buckets from lo to hi: up to 2^64
        let span = (i128::from(hi) - i128::from(lo) + 1) as u128;
        let matrix = (ranks.len() as u128).saturating_mul(span) <= MATRIX_CELLS as u128;
        let cols = span.min(HEAT_COLS as u128) as usize;
        let mut heat_sum = vec![0f32; ranks.len() * cols];
        let mut heat_n = vec![0u32; ranks.len() * cols];
        let mut rows = Vec::new();
        // rank -> (steps, slow steps, excess pct sum, phase excess sums)
        let mut acc: HashMap<i64, (u64, u64, f64, [f64; MAX_PHASES])> = HashMap::default();
        let mut slow: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        let mut vals: Vec<(u64, i64)> = Vec::new();
        let mut ph: Vec<(u64, i64)> = Vec::new();
        for it in merged.iter().flat_map(|&(a, b)| a..=b) {
            vals.clear();
            for (&rank, rs) in &self.ranks {
                if let Some(c) = self.get(rs, it) {
                    vals.push((c.mean(), rank));
                }
            }
            if vals.is_empty() {
                continue;
            }
            let (median_ns, median_rank) = lower_median(&mut vals);
            let (min_ns, min_rank) = vals[0];
            let (max_ns, max_rank) = vals[vals.len() - 1];
            let col = ((i128::from(it) - i128::from(lo)) as u128 * cols as u128 / span) as usize;
            let mut by_rank = matrix.then(|| vec![None; ranks.len()]);
            for &(dur, rank) in &vals {
                if let Ok(r) = ranks.binary_search(&rank) {
                    heat_sum[r * cols + col] += (dur as f64 / median_ns.max(1) as f64) as f32;
                    heat_n[r * cols + col] += 1;
                    if let Some(b) = by_rank.as_mut() {
                        b[r] = Some(dur);
                    }
                }
            }
            rows.push(StepRow {
                by_rank,
                iteration: it.saturating_mul(self.stride),
                ranks: vals.len(),
                min_rank,
                min_ns,
                median_rank,
                median_ns,
                max_rank,
                max_ns,
            });
            if vals.len() < 2 {
                continue;
            }
            let limit = median_ns as f64 * factor;
            let mut phase_medians: Option<[f64; MAX_PHASES]> = None;
            for &(dur, rank) in &vals {
                let e = acc.entry(rank).or_default();
                e.0 += 1;
                if (dur as f64) <= limit {
                    continue;
                }
                e.1 += 1;
                e.2 += (dur as f64 / median_ns.max(1) as f64 - 1.0) * 100.0;
                slow.entry(rank)
                    .or_default()
                    .push(it.saturating_mul(self.stride));
                let meds = phase_medians.get_or_insert_with(|| self.phase_medians(it, &mut ph));
                if let Some(cell) = self.ranks.get(&rank).and_then(|rs| self.get(rs, it)) {
                    for (s, m) in meds.iter().enumerate() {
                        e.3[s] += cell.phase_mean(s) - m;
                    }
                }
            }
        }
        let mut stragglers = Vec::new();
        for (rank, (steps, slow_steps, excess, phase_ex)) in acc {
            if slow_steps == 0 || (slow_steps as f64) < share * steps as f64 {
                slow.remove(&rank);
                continue;
            }
            let best = (0..self.phases.len())
                .max_by(|&a, &b| phase_ex[a].total_cmp(&phase_ex[b]))
                .filter(|&s| phase_ex[s] > 0.0);
            stragglers.push(Straggler {
                rank,
                slow_steps,
                steps,
                mean_excess_pct: excess / slow_steps as f64,
                phase: best.map(|s| self.phases[s].clone()),
                phase_excess_ns: best.map_or(0, |s| (phase_ex[s] / slow_steps as f64) as u64),
            });
        }
        stragglers.sort_by(|a, b| b.mean_excess_pct.total_cmp(&a.mean_excess_pct));
        let heat = Heat {
            ratio: heat_sum
                .iter()
                .zip(&heat_n)
                .map(|(&s, &n)| if n == 0 { f32::NAN } else { s / n as f32 })
                .collect(),
            first_iteration: (0..cols)
                .map(|c| {
                    // off < span, so lo + off lies in lo..=hi
                    let off = (c as u128 * span).div_ceil(cols as u128);
                    let slot = (i128::from(lo) + off as i128) as i64;
                    slot.saturating_mul(self.stride)
                })
                .collect(),
            ranks: ranks.clone(),
        };
        StepAnalysis {
            rows,
            stragglers,
            phases: self.phases.clone(),
            slow,
            ranks,
            heat,
        }
    }

    fn phase_medians(&self, it: i64, buf: &mut Vec<(u64, i64)>) -> [f64; MAX_PHASES] {
        let mut out = [0.0; MAX_PHASES];
        for (s, slot) in out.iter_mut().enumerate().take(self.phases.len()) {
            buf.clear();
            for (&rank, rs) in &self.ranks {
                if let Some(c) = self.get(rs, it) {
                    buf.push((c.phase_mean(s) as u64, rank));
                }
            }
            if !buf.is_empty() {
                *slot = lower_median(buf).0 as f64;
            }
        }
        out
    }
}
