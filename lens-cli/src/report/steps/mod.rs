//! The rank × step matrix of step durations (spans carrying
//! `dl.iteration`, or the former `nv.dl.iteration`) with the durations of
//! their direct children (phases); the straggler analysis over it is in
//! `analysis.rs`.

mod analysis;

use std::collections::BTreeMap;

pub(crate) use analysis::{Heat, StepRow, Straggler};

/// How many distinct phase names are tracked per step.
pub(crate) const MAX_PHASES: usize = 8;
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
