//! Span groups: named switches held as bits of one static `AtomicU64` word per
//! family, so a disabled site costs one relaxed load and a branch.

use std::fmt;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// A named switch for a set of instrumented sites.
///
/// A group is a reference to its family's word plus a bit mask fixed at
/// compile time. [`SpanGroup::is_enabled`] is `word.load(Relaxed) & mask != 0`.
/// Groups are declared with [`define_span_group!`](../lens/macro.define_span_group.html)
/// (consumer families) or are one of the eight base groups in [`base`].
///
/// ```
/// use lens_runtime::groups::base;
/// assert_eq!(base::STEP.name(), "step");
/// assert!(!base::STEP.is_enabled());
/// ```
#[derive(Debug)]
pub struct SpanGroup {
    name: &'static str,
    family: &'static str,
    word: &'static AtomicU64,
    mask: u64,
}

impl SpanGroup {
    /// Declares a group. Used by `define_span_group!`; `bit` must be below 64.
    #[doc(hidden)]
    pub const fn __new(
        name: &'static str,
        family: &'static str,
        word: &'static AtomicU64,
        bit: u32,
    ) -> Self {
        assert!(bit < 64, "a span group family holds at most 64 groups");
        SpanGroup {
            name,
            family,
            word,
            mask: 1u64 << bit,
        }
    }

    /// Whether sites of this group record spans: one relaxed atomic load.
    ///
    /// ```
    /// use lens_runtime::groups::base;
    /// if base::CHECKPOINT.is_enabled() { /* build expensive attributes */ }
    /// ```
    #[inline(always)]
    pub fn is_enabled(&self) -> bool {
        self.word.load(Ordering::Relaxed) & self.mask != 0
    }

    /// The group's name, e.g. `"step"`.
    ///
    /// ```
    /// assert_eq!(lens_runtime::groups::base::JOB.name(), "job");
    /// ```
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The name of the family that declared this group, e.g. `"base"`.
    ///
    /// ```
    /// assert_eq!(lens_runtime::groups::base::JOB.family(), "base");
    /// ```
    pub const fn family(&self) -> &'static str {
        self.family
    }

    /// The bit mask of this group inside its family word.
    #[doc(hidden)]
    pub const fn __mask(&self) -> u64 {
        self.mask
    }
}

/// A named set of groups of one family (plus, for consumer families, base
/// groups), e.g. `per_step`.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    name: &'static str,
    base: u64,
    own: u64,
}

impl Preset {
    /// Declares a preset from masks over the base word and the family's word.
    #[doc(hidden)]
    pub const fn __new(name: &'static str, base: u64, own: u64) -> Self {
        Preset { name, base, own }
    }

    /// The preset's name.
    ///
    /// ```
    /// assert_eq!(lens_runtime::groups::base::FAMILY.presets()[0].name(), "default");
    /// ```
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

/// A family of span groups with presets. The base family holds the eight base
/// groups; a consumer family declared with `define_span_group!` extends it:
/// its presets may include base groups, and a spec resolved against it also
/// accepts every base group and preset.
///
/// ```
/// use lens_runtime::groups::base;
/// let names: Vec<_> = base::FAMILY.groups().iter().map(|g| g.name()).collect();
/// assert_eq!(names[..3], ["job", "checkpoint", "evaluate"]);
/// ```
#[derive(Debug)]
pub struct SpanGroupFamily {
    name: &'static str,
    word: &'static AtomicU64,
    groups: &'static [&'static SpanGroup],
    presets: &'static [Preset],
}

impl SpanGroupFamily {
    /// Declares a family. Used by `define_span_group!`.
    #[doc(hidden)]
    pub const fn __new(
        name: &'static str,
        word: &'static AtomicU64,
        groups: &'static [&'static SpanGroup],
        presets: &'static [Preset],
    ) -> Self {
        assert!(
            groups.len() <= 64,
            "a span group family holds at most 64 groups"
        );
        SpanGroupFamily {
            name,
            word,
            groups,
            presets,
        }
    }

    /// The family's name.
    ///
    /// ```
    /// assert_eq!(lens_runtime::groups::base::FAMILY.name(), "base");
    /// ```
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The groups declared by this family (not the base groups it extends).
    ///
    /// ```
    /// assert_eq!(lens_runtime::groups::base::FAMILY.groups().len(), 8);
    /// ```
    pub const fn groups(&self) -> &'static [&'static SpanGroup] {
        self.groups
    }

    /// The presets declared by this family.
    ///
    /// ```
    /// let p: Vec<_> = lens_runtime::groups::base::FAMILY.presets().iter().map(|p| p.name()).collect();
    /// assert_eq!(p, ["default", "per_step", "all"]);
    /// ```
    pub const fn presets(&self) -> &'static [Preset] {
        self.presets
    }
}

/// The base family: `job`, `checkpoint`, `evaluate` (preset `default`), plus
/// `model_init`, `load_checkpoint`, `step`, `forward_backward`, `optimizer`
/// (preset `per_step` = default + these); `all` = every base group.
pub mod base {
    use super::{Preset, SpanGroup, SpanGroupFamily};
    use std::sync::atomic::AtomicU64;

    /// Word 0: the bits of the base groups.
    #[doc(hidden)]
    pub static WORD: AtomicU64 = AtomicU64::new(0);

    macro_rules! base_groups {
        ($($(#[$doc:meta])* $id:ident = $name:literal, $bit:literal;)*) => {
            $( $(#[$doc])* pub const $id: SpanGroup = SpanGroup::__new($name, "base", &WORD, $bit); )*
            /// The base family.
            pub static FAMILY: SpanGroupFamily = SpanGroupFamily::__new(
                "base",
                &WORD,
                &[$(&$id),*],
                &[
                    Preset::__new("default", 0b0000_0111, 0),
                    Preset::__new("per_step", 0b1111_1111, 0),
                    Preset::__new("all", 0b1111_1111, 0),
                ],
            );
        };
    }

    base_groups! {
        /// The whole job / run.
        JOB = "job", 0;
        /// Saving a checkpoint.
        CHECKPOINT = "checkpoint", 1;
        /// An evaluation pass.
        EVALUATE = "evaluate", 2;
        /// Building / initialising the model.
        MODEL_INIT = "model_init", 3;
        /// Loading a checkpoint.
        LOAD_CHECKPOINT = "load_checkpoint", 4;
        /// One training step (iteration).
        STEP = "step", 5;
        /// Forward and backward pass of a step.
        FORWARD_BACKWARD = "forward_backward", 6;
        /// Optimizer update of a step.
        OPTIMIZER = "optimizer", 7;
    }
}

/// An unknown name in a span-group spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanGroupError {
    name: String,
    valid: Vec<&'static str>,
}

impl SpanGroupError {
    /// The name that matched no group or preset.
    ///
    /// ```
    /// let e = lens_runtime::groups::SpanGroupSet::resolve("stpe", &[]).unwrap_err();
    /// assert_eq!(e.name(), "stpe");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every valid group and preset name, sorted.
    ///
    /// ```
    /// let e = lens_runtime::groups::SpanGroupSet::resolve("stpe", &[]).unwrap_err();
    /// assert!(e.valid_names().contains(&"step"));
    /// ```
    pub fn valid_names(&self) -> &[&'static str] {
        &self.valid
    }
}

impl fmt::Display for SpanGroupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown span group or preset `{}`; valid names are: {}",
            self.name,
            self.valid.join(", ")
        )
    }
}

impl std::error::Error for SpanGroupError {}

/// A resolved set of enabled groups over one or more families.
///
/// ```
/// use lens_runtime::groups::{base, SpanGroupSet};
/// let set = SpanGroupSet::resolve("default, STEP", &[]).unwrap();
/// assert!(set.contains(&base::STEP) && set.contains(&base::JOB));
/// assert!(!set.contains(&base::OPTIMIZER));
/// ```
#[derive(Debug, Clone, Default)]
pub struct SpanGroupSet {
    // (family, mask of that family's word); the base family is always first.
    entries: Vec<(&'static SpanGroupFamily, u64)>,
}

impl SpanGroupSet {
    /// The empty set: every group off.
    ///
    /// ```
    /// assert!(lens_runtime::groups::SpanGroupSet::none().names().is_empty());
    /// ```
    pub fn none() -> Self {
        SpanGroupSet {
            entries: vec![(&base::FAMILY, 0)],
        }
    }

    /// Resolves a spec such as `"default,step"`, `"per_step"` or `"all"`
    /// against the base family plus `families`. Names are case-insensitive,
    /// blank parts are ignored, and a preset name expands in every family
    /// that defines it.
    ///
    /// ```
    /// use lens_runtime::groups::{base, SpanGroupSet};
    /// let set = SpanGroupSet::resolve(" , per_step ,", &[]).unwrap();
    /// assert!(set.contains(&base::OPTIMIZER));
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
        for (fam, mask) in &mut self.entries {
            for p in fam.presets {
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
    /// use lens_runtime::groups::{base, SpanGroupSet};
    /// assert!(SpanGroupSet::resolve("all", &[]).unwrap().contains(&base::OPTIMIZER));
    /// ```
    pub fn contains(&self, group: &SpanGroup) -> bool {
        self.entries
            .iter()
            .any(|(f, m)| std::ptr::eq(f.word, group.word) && m & group.mask != 0)
    }

    /// Names of the groups in this set, base groups first.
    ///
    /// ```
    /// let s = lens_runtime::groups::SpanGroupSet::resolve("default", &[]).unwrap();
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

// Families that have ever been enabled or looked up: an append-only,
// lock-free-to-read list so `is_span_group_enabled` never takes a lock.
const MAX_FAMILIES: usize = 64;
static FAMILIES: [AtomicPtr<SpanGroupFamily>; MAX_FAMILIES] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_FAMILIES];
static FAMILY_COUNT: AtomicUsize = AtomicUsize::new(0);
static WRITE_LOCK: Mutex<()> = Mutex::new(());

fn registered() -> impl Iterator<Item = &'static SpanGroupFamily> {
    let n = FAMILY_COUNT.load(Ordering::Acquire);
    FAMILIES[..n].iter().filter_map(|p| {
        // SAFETY: only `&'static SpanGroupFamily` pointers are ever stored.
        unsafe { p.load(Ordering::Acquire).as_ref() }
    })
}

/// Makes `family` known to [`is_span_group_enabled`]. Enabling groups does
/// this for every family of the set; calling it twice is harmless.
///
/// ```
/// lens_runtime::groups::register_family(&lens_runtime::groups::base::FAMILY);
/// ```
pub fn register_family(family: &'static SpanGroupFamily) {
    let _lock = WRITE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    register_locked(family);
}

fn register_locked(family: &'static SpanGroupFamily) {
    if registered().any(|f| std::ptr::eq(f, family)) {
        return;
    }
    let n = FAMILY_COUNT.load(Ordering::Relaxed);
    if n < MAX_FAMILIES {
        FAMILIES[n].store(family as *const _ as *mut _, Ordering::Release);
        FAMILY_COUNT.store(n + 1, Ordering::Release);
    }
}

/// Enables exactly the groups of `set` process-wide (every other group of
/// every known family is switched off). Writes happen under a lock; reads
/// ([`SpanGroup::is_enabled`]) stay lock-free.
///
/// ```
/// use lens_runtime::groups::{base, set_enabled_span_groups, SpanGroupSet};
/// set_enabled_span_groups(&SpanGroupSet::resolve("step", &[]).unwrap());
/// assert!(base::STEP.is_enabled() && !base::JOB.is_enabled());
/// set_enabled_span_groups(&SpanGroupSet::none());
/// assert!(!base::STEP.is_enabled());
/// ```
pub fn set_enabled_span_groups(set: &SpanGroupSet) {
    let _lock = WRITE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    register_locked(&base::FAMILY);
    for (f, _) in &set.entries {
        register_locked(f);
    }
    for fam in registered() {
        let mask = set
            .entries
            .iter()
            .filter(|(f, _)| std::ptr::eq(f.word, fam.word))
            .fold(0, |acc, (_, m)| acc | m);
        fam.word.store(mask, Ordering::Relaxed);
    }
}

/// In a forked child: switches every group of every known family off with
/// plain atomic stores (no lock: a parent thread may have held it at the
/// fork).
#[cfg(feature = "sdk")]
pub(crate) fn disable_all_after_fork() {
    base::FAMILY.word.store(0, Ordering::Relaxed);
    for fam in registered() {
        fam.word.store(0, Ordering::Relaxed);
    }
}

/// Whether the group called `name` (case-insensitive, in any known family)
/// is enabled. Accepts `family.group` to pick one family. Lock-free.
///
/// ```
/// use lens_runtime::groups::{is_span_group_enabled, set_enabled_span_groups, SpanGroupSet};
/// set_enabled_span_groups(&SpanGroupSet::resolve("optimizer", &[]).unwrap());
/// assert!(is_span_group_enabled("OPTIMIZER"));
/// assert!(is_span_group_enabled("base.optimizer"));
/// assert!(!is_span_group_enabled("job"));
/// # set_enabled_span_groups(&SpanGroupSet::none());
/// ```
pub fn is_span_group_enabled(name: &str) -> bool {
    let (family, group) = match name.split_once('.') {
        Some((f, g)) => (Some(f), g),
        None => (None, name),
    };
    std::iter::once(&base::FAMILY)
        .chain(registered())
        .filter(|f| family.is_none_or(|n| f.name.eq_ignore_ascii_case(n)))
        .flat_map(|f| f.groups.iter())
        .any(|g| g.name.eq_ignore_ascii_case(group) && g.is_enabled())
}
