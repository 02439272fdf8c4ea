//! The rank × step matrix of step durations (spans carrying
//! `dl.iteration`, or the former `nv.dl.iteration`) with the durations of
//! their direct children (phases); the straggler analysis over it is in
//! `analysis.rs`.

mod analysis;

use std::collections::BTreeMap;

pub(crate) use analysis::{Heat, StepRow, Straggler};

/// How many distinct phase names are tracked per step.
pub(crate) const MAX_PHASES: usize = 8;
/// Buckets further than this beyond a rank's first one are not tracked.
const MAX_SPREAD: i64 = 50_000_000;
/// The stride stops doubling here (iterations are i64).
const MAX_STRIDE: i64 = 1 << 62;
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
        // iterations are any i64 (a rank's first and this one may be
        // i64::MIN and i64::MAX): every difference is checked, and room is
        // made before cells are added, so that a far iteration coarsens the
        // matrix rather than allocating every cell up to it
        let (slot, need) = loop {
            let slot = iteration.div_euclid(self.stride);
            let Some(need) = self.cells_needed(rank, slot) else {
                self.untracked += 1;
                return;
            };
            let fits = self.cells.saturating_add(need) <= self.max_cells;
            // coarsening cannot take a rank below one cell
            let helps = need > 1 || self.cells > self.ranks.len();
            if fits || !helps || self.stride >= MAX_STRIDE {
                break (slot, need);
            }
            self.coarsen();
        };
        let rs = self.ranks.entry(rank).or_insert_with(|| RankSteps {
            base: slot,
            cells: Vec::new(),
        });
        if slot < rs.base {
            // checked by cells_needed
            let grow = (rs.base - slot) as usize;
            rs.cells
                .splice(0..0, std::iter::repeat_n(Cell::default(), grow));
            rs.base = slot;
        }
        let idx = (slot - rs.base) as usize;
        if idx >= rs.cells.len() {
            rs.cells.resize(idx + 1, Cell::default());
        }
        self.cells += need;
        let cell = &mut rs.cells[idx];
        if self.stride == 1 && cell.n > 0 {
            if dur < cell.dur {
                return;
            }
            *cell = Cell::default();
        }
        cell.dur = cell.dur.saturating_add(dur.max(1));
        cell.n = cell.n.saturating_add(1);
        for &(slot, ns) in phases {
            cell.phases[slot] += ns as f32;
        }
    }

    /// The cells to add for `slot` of `rank`; None when it lies more than
    /// [`MAX_SPREAD`] buckets from the rank's others.
    fn cells_needed(&self, rank: i64, slot: i64) -> Option<usize> {
        let Some(rs) = self.ranks.get(&rank) else {
            return Some(1);
        };
        let len = i64::try_from(rs.cells.len()).ok()?;
        let need = if slot < rs.base {
            rs.base.checked_sub(slot)?
        } else {
            slot.checked_sub(rs.base)?.checked_sub(len - 1)?.max(0)
        };
        let span = need.checked_add(len)?;
        (span <= MAX_SPREAD + 1).then_some(need as usize)
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
                m.dur = m.dur.saturating_add(c.dur);
                m.n = m.n.saturating_add(c.n);
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
        let idx = usize::try_from(slot.checked_sub(rank.base)?).ok()?;
        rank.cells.get(idx).filter(|c| c.n > 0)
    }

    /// Phase slot → phase name.
    pub(crate) fn phase_names(&self) -> &[String] {
        &self.phases
    }

    /// The rows of the synchronization-aware diagnosis: per bucket that
    /// holds steps, every rank's mean step and its phases in `order` (slots).
    /// Only buckets that hold cells are visited (iterations may lie as far
    /// apart as i64::MIN and i64::MAX).
    pub(crate) fn diagnosis_rows(&self, order: &[usize]) -> Vec<super::diagnose::Row> {
        let mut buckets: BTreeMap<i64, Vec<super::diagnose::RankStep>> = BTreeMap::new();
        for (&rank, rs) in &self.ranks {
            for (k, c) in rs.cells.iter().enumerate() {
                if c.n == 0 {
                    continue;
                }
                let Some(slot) = i64::try_from(k).ok().and_then(|k| rs.base.checked_add(k)) else {
                    continue;
                };
                buckets
                    .entry(slot)
                    .or_default()
                    .push(super::diagnose::RankStep {
                        rank,
                        step_ns: c.mean() as f64,
                        phases: order.iter().map(|&p| c.phase_mean(p)).collect(),
                    });
            }
        }
        buckets
            .into_iter()
            .map(|(slot, ranks)| super::diagnose::Row {
                iteration: slot.saturating_mul(self.stride),
                span: self.stride,
                ranks,
            })
            .collect()
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

    /// The step matrix alone, with a small cell budget so that coarsening
    /// runs: extreme iterations, ranks and durations.
    #[test]
    fn the_step_matrix_takes_any_iteration() {
        use crate::fuzz::{env_u64, Rng, BUDGET};
        let seed = env_u64("LENS_FUZZ_SEED").unwrap_or(39);
        let start = std::time::Instant::now();
        for case in 0..env_u64("LENS_FUZZ_CASES").unwrap_or(2000) {
            if start.elapsed() > BUDGET {
                break;
            }
            let mut r = Rng(seed ^ case.wrapping_mul(0x9e37_79b9));
            let mut m = StepMatrix::with_max_cells(r.below(200) as usize);
            let slot = m.phase_slot("forward").unwrap_or(0);
            let near = r.next() as i64;
            for _ in 0..r.below(300) {
                let rank = match r.below(4) {
                    0 => r.next() as i64,
                    _ => r.below(6) as i64,
                };
                let it = match r.below(6) {
                    0 => i64::MIN + r.below(4) as i64,
                    1 => i64::MAX - r.below(4) as i64,
                    2 => r.next() as i64,
                    3 => near.saturating_add(r.below(100_000) as i64),
                    _ => r.below(1000) as i64,
                };
                let (any, small) = (r.next(), r.below(1_000_000));
                let dur = *r.pick(&[0, 1, u64::MAX, any, small]);
                m.record(rank, it, dur, &[(slot, dur)]);
            }
            let a = m.analyze(*r.pick(&[0.0, 10.0, 1e300]), *r.pick(&[0.0, 0.5, 1.0]));
            assert!(a.rows.len() <= 2_000_000);
        }
    }
}
