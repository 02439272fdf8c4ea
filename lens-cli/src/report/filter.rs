//! `lens report --name PATTERN --rank RANKS`: which spans and ranks the
//! tables show. The diagnosis, the step table and the whole-step straggler
//! table always read every span of every rank.

use serde::Serialize;

/// The spans and ranks the tables are restricted to (empty: all).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Filter {
    /// Name patterns, any of which selects a span: a glob (`*` any run of
    /// characters, `?` one) when the pattern has `*` or `?`, matched
    /// against the whole name; else a substring.
    pub(crate) names: Vec<String>,
    /// Inclusive rank ranges, any of which selects a rank.
    pub(crate) ranks: Vec<[i64; 2]>,
}

impl Filter {
    /// True when it selects everything.
    pub(crate) fn is_empty(&self) -> bool {
        self.names.is_empty() && self.ranks.is_empty()
    }

    /// Whether span name `name` is selected.
    pub(crate) fn name(&self, name: &str) -> bool {
        self.names.is_empty() || self.names.iter().any(|p| matches(p, name))
    }

    /// Whether `rank` is selected.
    pub(crate) fn rank(&self, rank: i64) -> bool {
        self.ranks.is_empty() || self.ranks.iter().any(|&[a, b]| (a..=b).contains(&rank))
    }
}

/// `name` matches `pattern`: a glob when it has `*` or `?`, else a substring.
fn matches(pattern: &str, name: &str) -> bool {
    if pattern.contains(['*', '?']) {
        let p: Vec<char> = pattern.chars().collect();
        let n: Vec<char> = name.chars().collect();
        glob(&p, &n)
    } else {
        name.contains(pattern)
    }
}

/// Glob match of the whole of `n` (`*`, `?`), linear backtracking to the
/// last `*`: O(|p| · |n|) at worst, no recursion.
fn glob(p: &[char], n: &[char]) -> bool {
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < n.len() {
        match p.get(i) {
            Some('*') => {
                star = Some((i, j));
                i += 1;
            }
            Some(&c) if c == '?' || c == n[j] => {
                i += 1;
                j += 1;
            }
            _ => match star {
                Some((si, sj)) => {
                    i = si + 1;
                    j = sj + 1;
                    star = Some((si, sj + 1));
                }
                None => return false,
            },
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

/// Parses `0,3,5-7` into inclusive ranges (for clap).
pub(crate) fn parse_ranks(s: &str) -> Result<Vec<[i64; 2]>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        let num = |t: &str| {
            t.trim()
                .parse::<i64>()
                .ok()
                .filter(|r| *r >= 0)
                .ok_or_else(|| format!("bad rank {t:?} in {s:?}; expected e.g. 0,3,5-7"))
        };
        let range = match part.split_once('-') {
            Some((a, b)) => [num(a)?, num(b)?],
            None => [num(part)?; 2],
        };
        if range[0] > range[1] {
            return Err(format!("rank range {part:?} runs backwards"));
        }
        out.push(range);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_and_substrings() {
        assert!(matches("allreduce*", "allreduce.grads"));
        assert!(!matches("allreduce*", "pre.allreduce"));
        assert!(matches("*reduce*", "pre.allreduce"));
        assert!(matches("a?c", "abc"));
        assert!(!matches("a?c", "abbc"));
        assert!(matches("a*b*c", "a-x-b-y-c"));
        assert!(!matches("a*b*c", "a-x-b-y"));
        assert!(matches("step", "train.step"));
        assert!(!matches("Step", "train.step"));
        assert!(matches("*", ""));
        assert!(matches("é?", "éü"));
    }

    #[test]
    fn rank_lists() {
        assert_eq!(parse_ranks("0,3,5-7"), Ok(vec![[0, 0], [3, 3], [5, 7]]));
        assert!(parse_ranks("7-5").is_err());
        assert!(parse_ranks("x").is_err());
        assert!(parse_ranks("").is_err());
        assert!(parse_ranks("-1").is_err());
        let f = Filter {
            names: vec![],
            ranks: parse_ranks("1,4-5").expect("ranks"),
        };
        assert!(f.rank(4) && f.rank(1) && !f.rank(2) && !f.rank(6));
        assert!(Filter::default().rank(99) && Filter::default().name("x"));
    }
}
