//! A log-bucket quantile sketch (DDSketch-style) with 1% relative error:
//! memory grows with the log of the value range, never with the count.

/// Relative accuracy of quantiles.
const ALPHA: f64 = 0.01;

/// Quantile sketch over non-negative integer durations (ns).
#[derive(Debug, Clone, Default)]
pub(crate) struct Sketch {
    /// Bucket counts from bucket index `offset` on.
    buckets: Vec<u64>,
    offset: i32,
    zeros: u64,
    count: u64,
    min: u64,
    max: u64,
    sum: u128,
}

fn ln_gamma() -> f64 {
    ((1.0 + ALPHA) / (1.0 - ALPHA)).ln()
}

impl Sketch {
    /// Adds one value.
    pub(crate) fn add(&mut self, v: u64) {
        if self.count == 0 {
            self.min = v;
            self.max = v;
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.count += 1;
        self.sum += u128::from(v);
        if v == 0 {
            self.zeros += 1;
            return;
        }
        let idx = ((v as f64).ln() / ln_gamma()).ceil() as i32;
        if self.buckets.is_empty() {
            self.offset = idx;
            self.buckets.push(0);
        } else if idx < self.offset {
            let grow = (self.offset - idx) as usize;
            self.buckets.splice(0..0, std::iter::repeat_n(0, grow));
            self.offset = idx;
        } else if (idx - self.offset) as usize >= self.buckets.len() {
            self.buckets.resize((idx - self.offset) as usize + 1, 0);
        }
        self.buckets[(idx - self.offset) as usize] += 1;
    }

    /// Number of values added.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// Largest value added (0 when empty).
    pub(crate) fn max(&self) -> u64 {
        self.max
    }

    /// Smallest value added, exact (0 when empty).
    pub(crate) fn min(&self) -> u64 {
        self.min
    }

    /// Mean of the values added, rounded (0 when empty).
    pub(crate) fn mean(&self) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let c = u128::from(self.count);
        u64::try_from((self.sum + c / 2) / c).unwrap_or(u64::MAX)
    }

    /// Sum of values added.
    pub(crate) fn sum(&self) -> u128 {
        self.sum
    }

    /// The `q` quantile (0..=1), within 1% of a value of the input.
    pub(crate) fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = (q.clamp(0.0, 1.0) * (self.count - 1) as f64).round() as u64;
        if rank < self.zeros {
            return 0;
        }
        let mut seen = self.zeros;
        let gamma = (1.0 + ALPHA) / (1.0 - ALPHA);
        for (i, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen > rank {
                let idx = self.offset + i as i32;
                let v = 2.0 * gamma.powi(idx) / (gamma + 1.0);
                return (v.round() as u64).clamp(self.min, self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_within_one_percent() {
        let mut s = Sketch::default();
        let mut vals: Vec<u64> = (1..=100_000u64).map(|i| i * 7919 % 1_000_003 + 1).collect();
        for &v in &vals {
            s.add(v);
        }
        vals.sort_unstable();
        for q in [0.5, 0.95, 0.99] {
            let exact = vals[(q * (vals.len() - 1) as f64).round() as usize] as f64;
            let got = s.quantile(q) as f64;
            assert!(
                (got - exact).abs() / exact <= 0.011,
                "q{q}: {got} vs {exact}"
            );
        }
        assert_eq!(s.max(), *vals.last().unwrap_or(&0));
        assert_eq!(s.min(), vals[0]);
        let exact_mean = vals.iter().map(|&v| u128::from(v)).sum::<u128>() as f64 / 1e5;
        assert!((s.mean() as f64 - exact_mean).abs() <= 0.5);
        assert_eq!(s.count(), 100_000);
    }

    #[test]
    fn empty_and_zero() {
        let mut s = Sketch::default();
        assert_eq!(s.quantile(0.5), 0);
        s.add(0);
        s.add(0);
        s.add(10);
        assert_eq!(s.quantile(0.5), 0);
        assert_eq!(s.quantile(1.0), 10);
    }
}
