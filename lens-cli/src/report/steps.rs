//! The rank × step matrix of step durations (spans carrying
//! `nv.dl.iteration`) with the durations of their direct children (phases),
//! and the straggler analysis over it.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;

/// How many distinct phase names are tracked per step.
pub(crate) const MAX_PHASES: usize = 8;
/// Columns of the rank × step heat map at most (steps are bucketed).
const HEAT_COLS: usize = 240;
/// Rows carry per-rank durations when ranks × steps stays under this.
const MATRIX_CELLS: usize = 200_000;
/// Iterations further than this beyond a rank's first one are not tracked.
const MAX_SPREAD: i64 = 50_000_000;
/// Cells (ranks × steps) kept at most (~48 bytes each); beyond it pairs of
/// neighbouring iterations are merged, so memory stays bounded.
const MAX_CELLS: usize = 2_000_000;

/// One rank's steps in one bucket of `stride` iterations (sums).
#[derive(Debug, Clone, Copy, Default)]
struct Cell {
    dur: u64,
    /// Steps summed here; 0 when none.
    n: u32,
    phases: [f32; MAX_PHASES],
}

impl Cell {
    fn mean(&self) -> u64 {
        self.dur / u64::from(self.n.max(1))
    }

    fn phase_mean(&self, slot: usize) -> f64 {
        f64::from(self.phases[slot]) / f64::from(self.n.max(1))
    }
}

#[derive(Debug, Default)]
struct RankSteps {
    /// Bucket index (iteration / stride) of `cells[0]`.
    base: i64,
    cells: Vec<Cell>,
}

/// Step durations per rank and iteration, with their phases.
#[derive(Debug)]
pub(crate) struct StepMatrix {
    /// Phase slot → phase name.
    phases: Vec<String>,
    ranks: BTreeMap<i64, RankSteps>,
    /// Iterations per cell (a power of two).
    stride: i64,
    cells: usize,
    max_cells: usize,
    /// Step spans not tracked (iterations out of range).
    pub(crate) untracked: u64,
}

impl Default for StepMatrix {
    fn default() -> Self {
        StepMatrix::with_max_cells(MAX_CELLS)
    }
}

/// One step across ranks.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StepRow {
    /// `nv.dl.iteration`.
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
    /// Slot of a phase name, allocating one while fewer than `MAX_PHASES`.
    pub(crate) fn phase_slot(&mut self, name: &str) -> Option<usize> {
        if let Some(i) = self.phases.iter().position(|p| p == name) {
            return Some(i);
        }
        if self.phases.len() < MAX_PHASES {
            self.phases.push(name.to_owned());
            return Some(self.phases.len() - 1);
        }
        None
    }

    /// A matrix that merges iterations beyond `max_cells` cells.
    pub(crate) fn with_max_cells(max_cells: usize) -> Self {
        StepMatrix {
            phases: Vec::new(),
            ranks: BTreeMap::new(),
            stride: 1,
            cells: 0,
            max_cells: max_cells.max(64),
            untracked: 0,
        }
    }

    /// Iterations per row of the analysis.
    pub(crate) fn stride(&self) -> i64 {
        self.stride
    }

    /// Records one step span; `phases` are (slot, ns) of its direct children.
    /// While each cell is one iteration, a rank reporting an iteration twice
    /// keeps the longer span.
    pub(crate) fn record(&mut self, rank: i64, iteration: i64, dur: u64, phases: &[(usize, u64)]) {
        let slot = iteration.div_euclid(self.stride);
        let rs = self.ranks.entry(rank).or_insert_with(|| RankSteps {
            base: slot,
            cells: Vec::new(),
        });
        let before = rs.cells.len();
        if slot < rs.base {
            let grow = rs.base - slot;
            if grow > MAX_SPREAD {
                self.untracked += 1;
                return;
            }
            rs.cells
                .splice(0..0, std::iter::repeat_n(Cell::default(), grow as usize));
            rs.base = slot;
        }
        let idx = slot - rs.base;
        if idx > MAX_SPREAD {
            self.untracked += 1;
            return;
        }
        let idx = idx as usize;
        if idx >= rs.cells.len() {
            rs.cells.resize(idx + 1, Cell::default());
        }
        self.cells += rs.cells.len() - before;
        let cell = &mut rs.cells[idx];
        if self.stride == 1 && cell.n > 0 {
            if dur < cell.dur {
                return;
            }
            *cell = Cell::default();
        }
        cell.dur += dur.max(1);
        cell.n += 1;
        for &(slot, ns) in phases {
            cell.phases[slot] += ns as f32;
        }
        if self.cells > self.max_cells {
            self.coarsen();
        }
    }

    /// Doubles the stride: merges each pair of neighbouring buckets.
    fn coarsen(&mut self) {
        self.stride *= 2;
        self.cells = 0;
        for rs in self.ranks.values_mut() {
            let Some(last) = (rs.cells.len() as i64).checked_sub(1) else {
                continue;
            };
            let base = rs.base.div_euclid(2);
            let len = (rs.base + last).div_euclid(2) - base + 1;
            let mut cells = vec![Cell::default(); len as usize];
            for (k, c) in rs.cells.iter().enumerate() {
                let j = ((rs.base + k as i64).div_euclid(2) - base) as usize;
                let m = &mut cells[j];
                m.dur += c.dur;
                m.n += c.n;
                for (a, b) in m.phases.iter_mut().zip(c.phases) {
                    *a += b;
                }
            }
            rs.base = base;
            rs.cells = cells;
            self.cells += rs.cells.len();
        }
    }

    fn get<'a>(&self, rank: &'a RankSteps, slot: i64) -> Option<&'a Cell> {
        let idx = usize::try_from(slot - rank.base).ok()?;
        rank.cells.get(idx).filter(|c| c.n > 0)
    }

    /// Step count per rank.
    pub(crate) fn steps_of(&self, rank: i64) -> u64 {
        self.ranks
            .get(&rank)
            .map_or(0, |r| r.cells.iter().map(|c| u64::from(c.n)).sum())
    }

    /// Per-step min/median/max and the ranks slower than the step median by
    /// more than `pct` percent in at least `share` of their steps.
    pub(crate) fn analyze(&self, pct: f64, share: f64) -> StepAnalysis {
        let lo = self.ranks.values().map(|r| r.base).min();
        let hi = self
            .ranks
            .values()
            .map(|r| r.base + r.cells.len() as i64)
            .max();
        let (Some(lo), Some(hi)) = (lo, hi) else {
            return StepAnalysis::default();
        };
        let factor = 1.0 + pct / 100.0;
        let ranks: Vec<i64> = self.ranks.keys().copied().collect();
        let span = (hi - lo) as usize;
        let matrix = ranks.len().saturating_mul(span) <= MATRIX_CELLS;
        let cols = span.min(HEAT_COLS);
        let mut heat_sum = vec![0f32; ranks.len() * cols];
        let mut heat_n = vec![0u32; ranks.len() * cols];
        let mut rows = Vec::new();
        // rank -> (steps, slow steps, excess pct sum, phase excess sums)
        let mut acc: HashMap<i64, (u64, u64, f64, [f64; MAX_PHASES])> = HashMap::default();
        let mut slow: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        let mut vals: Vec<(u64, i64)> = Vec::new();
        let mut ph: Vec<(u64, i64)> = Vec::new();
        for it in lo..hi {
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
            let col = (it - lo) as usize * cols / span;
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
                iteration: it * self.stride,
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
                slow.entry(rank).or_default().push(it * self.stride);
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
                .map(|c| lo + (c * span).div_ceil(cols) as i64)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_slow_rank_and_its_phase() {
        let mut m = StepMatrix::default();
        let fwd = m.phase_slot("forward_backward").unwrap_or(0);
        let opt = m.phase_slot("optimizer_step").unwrap_or(0);
        for it in 0..10 {
            for rank in 0..4 {
                let extra = if rank == 2 { 500 } else { 0 };
                m.record(rank, it, 1000 + extra, &[(fwd, 700 + extra), (opt, 300)]);
            }
        }
        let a = m.analyze(10.0, 0.5);
        assert_eq!(a.rows.len(), 10);
        assert_eq!(a.stragglers.len(), 1);
        assert_eq!(a.stragglers[0].rank, 2);
        assert_eq!(a.stragglers[0].phase.as_deref(), Some("forward_backward"));
        assert_eq!(a.rows[0].max_rank, 2);
    }

    #[test]
    fn long_runs_merge_iterations_and_still_find_the_straggler() {
        let mut m = StepMatrix::with_max_cells(64);
        let fwd = m.phase_slot("forward_backward").unwrap_or(0);
        let opt = m.phase_slot("optimizer_step").unwrap_or(0);
        for rank in 0..4 {
            for it in 0..1000 {
                let extra = if rank == 1 { 400 } else { 0 };
                let jitter = (it * 7 + rank * 13) % 20;
                m.record(
                    rank,
                    it,
                    1000 + extra + jitter as u64,
                    &[(fwd, 700), (opt, 300 + extra)],
                );
            }
        }
        assert!(m.stride() >= 64, "stride {}", m.stride());
        assert!(m.cells <= 64 + 4, "{} cells", m.cells);
        assert_eq!(m.steps_of(2), 1000);
        let a = m.analyze(10.0, 0.5);
        assert_eq!(a.stragglers.len(), 1);
        assert_eq!(a.stragglers[0].rank, 1);
        assert_eq!(a.stragglers[0].phase.as_deref(), Some("optimizer_step"));
        assert!((a.stragglers[0].mean_excess_pct - 40.0).abs() < 3.0);
        assert_eq!(a.rows[1].iteration, m.stride());
    }
}
