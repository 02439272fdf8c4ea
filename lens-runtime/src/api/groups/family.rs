//! Groups, presets and families, and the eight base groups.

use std::sync::atomic::{AtomicU64, Ordering};

/// A named switch for a set of instrumented sites.
///
/// A group is a reference to its family's word plus a bit mask fixed at
/// compile time. [`SpanGroup::is_enabled`] is `word.load(Relaxed) & mask != 0`.
/// Groups are declared with [`define_span_group!`](../lens/macro.define_span_group.html)
/// (consumer families) or are one of the eight base groups in [`base`].
///
/// ```
/// use lens::groups;
/// assert_eq!(groups::STEP.name(), "step");
/// assert!(!groups::STEP.is_enabled());
/// ```
#[derive(Debug)]
pub struct SpanGroup {
    pub(super) name: &'static str,
    pub(super) family: &'static str,
    pub(super) word: &'static AtomicU64,
    pub(super) mask: u64,
}

impl SpanGroup {
    /// Whether `other` is the same group: the same family word and bit. A
    /// group may be a `const`, whose every use can have its own address,
    /// so groups are never compared by address.
    #[cfg_attr(not(feature = "sdk-core"), allow(dead_code))] // setup's and the bridge's
    pub(crate) fn same(&self, other: &SpanGroup) -> bool {
        std::ptr::eq(self.word, other.word) && self.mask == other.mask
    }

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
    /// use lens::groups;
    /// if groups::CHECKPOINT.is_enabled() { /* build expensive attributes */ }
    /// ```
    #[inline(always)]
    pub fn is_enabled(&self) -> bool {
        self.word.load(Ordering::Relaxed) & self.mask != 0
    }

    /// The group's name, e.g. `"step"`.
    ///
    /// ```
    /// assert_eq!(lens::groups::JOB.name(), "job");
    /// ```
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The name of the family that declared this group, e.g. `"base"`.
    ///
    /// ```
    /// assert_eq!(lens::groups::JOB.family(), "base");
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
    pub(super) name: &'static str,
    pub(super) base: u64,
    pub(super) own: u64,
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
    /// assert_eq!(lens::groups::FAMILY.presets()[0].name(), "default");
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
/// use lens::groups;
/// let names: Vec<_> = groups::FAMILY.groups().iter().map(|g| g.name()).collect();
/// assert_eq!(names[..3], ["job", "checkpoint", "evaluate"]);
/// ```
#[derive(Debug)]
pub struct SpanGroupFamily {
    pub(super) name: &'static str,
    pub(super) word: &'static AtomicU64,
    pub(super) groups: &'static [&'static SpanGroup],
    pub(super) presets: &'static [Preset],
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
    /// assert_eq!(lens::groups::FAMILY.name(), "base");
    /// ```
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The groups declared by this family (not the base groups it extends).
    ///
    /// ```
    /// assert_eq!(lens::groups::FAMILY.groups().len(), 8);
    /// ```
    pub const fn groups(&self) -> &'static [&'static SpanGroup] {
        self.groups
    }

    /// The presets declared by this family.
    ///
    /// ```
    /// let p: Vec<_> = lens::groups::FAMILY.presets().iter().map(|p| p.name()).collect();
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
    use crate::api::groups::family::{Preset, SpanGroup, SpanGroupFamily};
    use std::sync::atomic::AtomicU64;

    /// Word 0: the bits of the base groups.
    #[doc(hidden)]
    pub static WORD: AtomicU64 = AtomicU64::new(0);

    use lens_names::{BASE_GROUPS, BASE_PRESETS};

    // Names, bits and preset masks come from `lens-names`, the table the
    // proc macros check `group = "…"` literals against.
    macro_rules! base_groups {
        ($($(#[$doc:meta])* $id:ident = $bit:literal;)*) => {
            $( $(#[$doc])* pub const $id: SpanGroup = SpanGroup::__new(BASE_GROUPS[$bit], "base", &WORD, $bit); )*
            /// The base family.
            pub static FAMILY: SpanGroupFamily = SpanGroupFamily::__new(
                "base",
                &WORD,
                &[$(&$id),*],
                &[
                    Preset::__new(BASE_PRESETS[0].0, BASE_PRESETS[0].1, 0),
                    Preset::__new(BASE_PRESETS[1].0, BASE_PRESETS[1].1, 0),
                    Preset::__new(BASE_PRESETS[2].0, BASE_PRESETS[2].1, 0),
                ],
            );
            const _: () = assert!([$($bit),*].len() == BASE_GROUPS.len());
        };
    }

    base_groups! {
        /// The whole job / run.
        JOB = 0;
        /// Saving a checkpoint.
        CHECKPOINT = 1;
        /// An evaluation pass.
        EVALUATE = 2;
        /// Building / initialising the model.
        MODEL_INIT = 3;
        /// Loading a checkpoint.
        LOAD_CHECKPOINT = 4;
        /// One training step (iteration).
        STEP = 5;
        /// Forward and backward pass of a step.
        FORWARD_BACKWARD = 6;
        /// Optimizer update of a step.
        OPTIMIZER = 7;
    }
}
