//! A span-group spec resolved against families.

use super::family::*;
use std::fmt;

/// An unknown name in a span-group spec.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown span group or preset `{name}`; valid names are: {}", valid.join(", "))]
pub struct SpanGroupError {
    pub(super) name: String,
    pub(super) valid: Vec<&'static str>,
}

impl SpanGroupError {
    /// The name that matched no group or preset.
    ///
    /// ```
    /// let e = lens::SpanGroupSet::resolve("stpe", &[]).unwrap_err();
    /// assert_eq!(e.name(), "stpe");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every valid group and preset name, sorted.
    ///
    /// ```
    /// let e = lens::SpanGroupSet::resolve("stpe", &[]).unwrap_err();
    /// assert!(e.valid_names().contains(&"step"));
    /// ```
    pub fn valid_names(&self) -> &[&'static str] {
        &self.valid
    }
}

/// The whole chain on one line: what `main` prints when it returns this
/// error.
impl fmt::Debug for SpanGroupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A resolved set of enabled groups over one or more families.
///
/// ```
/// use lens::{groups, SpanGroupSet};
/// let set = SpanGroupSet::resolve("default, STEP", &[]).unwrap();
/// assert!(set.contains(&groups::STEP) && set.contains(&groups::JOB));
/// assert!(!set.contains(&groups::OPTIMIZER));
/// ```
#[derive(Debug, Clone, Default)]
pub struct SpanGroupSet {
    // (family, mask of that family's word); the base family is always first.
    pub(super) entries: Vec<(&'static SpanGroupFamily, u64)>,
}

impl SpanGroupSet {
    /// The empty set: every group off.
    ///
    /// ```
    /// assert!(lens::SpanGroupSet::none().names().is_empty());
    /// ```
    pub fn none() -> Self {
        SpanGroupSet {
            entries: vec![(&base::FAMILY, 0)],
        }
    }

    /// Resolves a spec such as `"default,step"`, `"per_step"` or `"all"`
    /// against the base family plus `families`. Names are case-insensitive,
    /// blank parts are ignored, and a preset name expands in every consumer
    /// family that defines it (in the base family only when none does: a
    /// consumer family's presets are complete, as in the Python library).
    ///
    /// ```
    /// use lens::{groups, SpanGroupSet};
    /// let set = SpanGroupSet::resolve(" , per_step ,", &[]).unwrap();
    /// assert!(set.contains(&groups::OPTIMIZER));
    /// let err = SpanGroupSet::resolve("default,stpe", &[]).unwrap_err();
    /// assert!(err.to_string().contains("`stpe`"));
    /// ```
    pub fn resolve(
        spec: &str,
        families: &[&'static SpanGroupFamily],
    ) -> Result<Self, SpanGroupError> {
        let mut set = SpanGroupSet::none();
        for fam in families {
            if !set.entries.iter().any(|(f, _)| std::ptr::eq(*f, *fam)) {
                set.entries.push((fam, 0));
            }
        }
        for part in spec.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            if !set.add_name(part) {
                return Err(SpanGroupError {
                    name: part.to_owned(),
                    valid: set.valid_names(),
                });
            }
        }
        Ok(set)
    }

    fn add_name(&mut self, name: &str) -> bool {
        let mut matched = false;
        let mut base_bits = 0;
        // A consumer family states its presets completely (a preset that
        // extends the base one lists it as a member), so the base family's
        // preset of the same name applies only when no consumer family in
        // the set defines one: `per_step` with `nemo_rl` is nemo_rl's
        // `per_step`, not its union with the base `per_step`.
        let consumer_defines = |n: &str| {
            self.entries[1..]
                .iter()
                .any(|(f, _)| f.presets.iter().any(|p| p.name.eq_ignore_ascii_case(n)))
        };
        let skip_base_preset = consumer_defines(name);
        for (i, (fam, mask)) in self.entries.iter_mut().enumerate() {
            for p in fam.presets {
                if i == 0 && skip_base_preset {
                    continue;
                }
                if p.name.eq_ignore_ascii_case(name) {
                    *mask |= p.own;
                    base_bits |= p.base;
                    matched = true;
                }
            }
            for g in fam.groups {
                if g.name.eq_ignore_ascii_case(name) {
                    *mask |= g.mask;
                    matched = true;
                }
            }
        }
        // preset bits over word 0 (base presets, and base groups named by
        // consumer presets); entry 0 is always the base family
        self.entries[0].1 |= base_bits;
        matched
    }

    fn valid_names(&self) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = self
            .entries
            .iter()
            .flat_map(|(f, _)| {
                f.groups
                    .iter()
                    .map(|g| g.name)
                    .chain(f.presets.iter().map(|p| p.name))
            })
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Whether `group` is in this set.
    ///
    /// ```
    /// use lens::{groups, SpanGroupSet};
    /// assert!(SpanGroupSet::resolve("all", &[]).unwrap().contains(&groups::OPTIMIZER));
    /// ```
    pub fn contains(&self, group: &SpanGroup) -> bool {
        self.entries
            .iter()
            .any(|(f, m)| std::ptr::eq(f.word, group.word) && m & group.mask != 0)
    }

    /// The groups this set leaves off in the consumer families it reaches
    /// (those with at least one of their own groups on), in family then
    /// declaration order: the sites a user of that family may expect to
    /// record. A family the set does not reach at all (a program linking
    /// `megatron` that never uses it) and base groups are not listed.
    #[cfg(any(feature = "sdk-core", test))]
    pub(crate) fn off_in_reached_families(&self) -> Vec<&'static SpanGroup> {
        self.entries[1..]
            .iter()
            .filter(|(f, m)| f.groups.iter().any(|g| m & g.mask != 0))
            .flat_map(|(f, m)| f.groups.iter().filter(move |g| m & g.mask == 0))
            .copied()
            .collect()
    }

    /// Names of the groups in this set, base groups first.
    ///
    /// ```
    /// let s = lens::SpanGroupSet::resolve("default", &[]).unwrap();
    /// assert_eq!(s.names(), ["job", "checkpoint", "evaluate"]);
    /// ```
    pub fn names(&self) -> Vec<&'static str> {
        self.entries
            .iter()
            .flat_map(|(f, m)| {
                f.groups
                    .iter()
                    .filter(move |g| m & g.mask != 0)
                    .map(|g| g.name)
            })
            .collect()
    }
}
