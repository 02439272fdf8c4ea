//! Flows (arrows) for span links and cross-rank parents.
//!
//! The span that links (or whose parent is remote) knows both ends, but the
//! other end may already have been written. So the first pass gives each
//! edge its own flow id, ends it on the linking span, and remembers
//! `source span → edge ids`, plus a Bloom filter of the span ids of each
//! file. A second pass re-reads only the files that may hold a source and
//! starts the flows there (an instant event at the source's start). Memory
//! is bounded by the number of edges (capped), not by the number of spans.

use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap as HashMap;

/// Edges remembered at most; further ones are counted and dropped.
const MAX_EDGES: usize = 2_000_000;
/// Bloom filter hash functions.
const K: u64 = 7;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A fixed-size Bloom filter of span ids (about 1% false positives at the
/// estimated span count).
#[derive(Debug)]
struct Bloom {
    bits: Vec<u64>,
    mask: u64,
}

impl Bloom {
    fn for_file(path: &Path) -> Self {
        let bytes = std::fs::metadata(path).map_or(1 << 20, |m| m.len());
        let gz = path.extension().is_some_and(|e| e == "gz");
        // ~300 bytes of JSON per span; gzip shrinks that about tenfold
        let spans = bytes / if gz { 30 } else { 300 };
        let bits = (spans.saturating_mul(10))
            .clamp(1 << 12, 1 << 30)
            .next_power_of_two();
        Bloom {
            bits: vec![0; (bits / 64) as usize],
            mask: bits - 1,
        }
    }

    fn probes(id: u64) -> impl Iterator<Item = u64> {
        let (h1, h2) = (mix(id), mix(id ^ 0x9e37_79b9_7f4a_7c15) | 1);
        (0..K).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)))
    }

    fn insert(&mut self, id: u64) {
        for h in Self::probes(id) {
            let b = h & self.mask;
            self.bits[(b / 64) as usize] |= 1 << (b % 64);
        }
    }

    fn may_contain(&self, id: u64) -> bool {
        Self::probes(id).all(|h| {
            let b = h & self.mask;
            self.bits[(b / 64) as usize] & (1 << (b % 64)) != 0
        })
    }
}

/// Flow edges of one conversion.
#[derive(Debug, Default)]
pub(crate) struct Flows {
    wanted: HashMap<u64, Vec<u64>>,
    edges: usize,
    blooms: Vec<Bloom>,
    /// Edges dropped beyond the cap.
    pub(crate) dropped: u64,
}

impl Flows {
    /// A file of the first pass starts.
    pub(crate) fn file(&mut self, index: usize, path: &Path) {
        while self.blooms.len() <= index {
            self.blooms.push(Bloom::for_file(path));
        }
    }

    /// Records that span `id` is in the current file.
    pub(crate) fn saw(&mut self, id: u64) {
        if let Some(b) = self.blooms.last_mut() {
            b.insert(id);
        }
    }

    /// A new edge from span `src` to span `dst`; its flow id.
    pub(crate) fn edge(&mut self, src: u64, dst: u64) -> Option<u64> {
        if src == 0 {
            return None;
        }
        if self.edges >= MAX_EDGES {
            self.dropped += 1;
            return None;
        }
        self.edges += 1;
        let id = mix(src ^ dst.rotate_left(29)).max(1);
        self.wanted.entry(src).or_default().push(id);
        Some(id)
    }

    /// The files that may hold a source span.
    pub(crate) fn files_to_reread(&self, files: &[PathBuf]) -> Vec<PathBuf> {
        files
            .iter()
            .zip(&self.blooms)
            .filter(|(_, b)| self.wanted.keys().any(|&id| b.may_contain(id)))
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// The flow ids that start at span `id`, once.
    pub(crate) fn take(&mut self, id: u64) -> Option<Vec<u64>> {
        self.wanted.remove(&id)
    }

    /// Whether any edge waits for its source.
    pub(crate) fn pending(&self) -> usize {
        self.wanted.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bloom_has_no_false_negatives_and_few_false_positives() {
        let mut b = Bloom::for_file(Path::new("/nonexistent"));
        for i in 0..3000u64 {
            b.insert(i * 7919);
        }
        assert!((0..3000u64).all(|i| b.may_contain(i * 7919)));
        let fp = (0..10_000u64)
            .filter(|i| b.may_contain(i * 7919 + 1))
            .count();
        assert!(fp < 300, "{fp} false positives");
    }

    #[test]
    fn edges_are_distinct_per_pair() {
        let mut f = Flows::default();
        let a = f.edge(5, 10);
        let b = f.edge(5, 11);
        assert_ne!(a, b);
        assert_eq!(f.take(5).map(|v| v.len()), Some(2));
        assert_eq!(f.edge(0, 3), None);
    }
}
