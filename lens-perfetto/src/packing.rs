//! Keeps slices properly nested on each track. Spans of one thread (or of
//! a whole rank, when spans carry no `thread.id`) may overlap without
//! nesting (async work, prefetching); a track needs every two slices to be
//! disjoint or nested. Spans arrive roughly in end order, so each lane
//! keeps its top-level intervals; a span goes to the first lane where no
//! interval crosses its start (it then encloses the intervals after it).

use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;

/// Top-level intervals remembered per lane (older ones are forgotten).
const KEEP: usize = 64;

/// Top-level `(start, end)` intervals of one lane, sorted by end (a ring:
/// once full, the oldest is dropped without moving the others).
type Lane = VecDeque<(u64, u64)>;

/// Lanes per (rank, thread).
#[derive(Debug, Default)]
pub struct Packing {
    lanes: HashMap<(i64, i64), Vec<Lane>>,
}

impl Packing {
    /// The lane (0, 1, …) of a span `[start, end]` of `thread` on `rank`.
    pub fn lane(&mut self, rank: i64, thread: i64, start: u64, end: u64) -> usize {
        let lanes = self.lanes.entry((rank, thread)).or_default();
        for (i, lane) in lanes.iter_mut().enumerate() {
            if fits(lane, start) {
                place(lane, start, end);
                return i;
            }
        }
        let mut lane = Lane::new();
        place(&mut lane, start, end);
        lanes.push(lane);
        lanes.len() - 1
    }
}

/// No top-level interval of `lane` starts before `start` and ends after it.
fn fits(lane: &Lane, start: u64) -> bool {
    lane.iter()
        .rev()
        .take_while(|&&(_, e)| e > start)
        .all(|&(s, _)| s >= start)
}

/// Adds `[start, end]`, absorbing the intervals it encloses.
fn place(lane: &mut Lane, start: u64, end: u64) {
    while lane
        .back()
        .is_some_and(|&(s, e)| s >= start && e <= end && e > start)
    {
        lane.pop_back();
    }
    // keep the list sorted by end (arrival is only roughly in end order;
    // most often the span ends last, and goes at the back)
    if lane.back().is_none_or(|&(_, e)| e <= end) {
        lane.push_back((start, end));
    } else {
        let at = lane.partition_point(|&(_, e)| e <= end);
        lane.insert(at, (start, end));
    }
    if lane.len() > KEEP {
        lane.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_spans_share_a_lane_and_overlapping_ones_do_not() {
        let mut p = Packing::default();
        // children end first
        assert_eq!(p.lane(0, 0, 2, 4), 0);
        assert_eq!(p.lane(0, 0, 5, 8), 0);
        assert_eq!(p.lane(0, 0, 1, 10), 0); // parent of both
        assert_eq!(p.lane(0, 0, 9, 12), 1); // starts inside, ends after
        assert_eq!(p.lane(0, 0, 11, 20), 0); // after the parent: lane 0 again
        assert_eq!(p.lane(0, 0, 0, 30), 0); // encloses lane 0's roots
        assert_eq!(p.lane(1, 0, 9, 12), 0); // another rank
    }
}
