//! Span groups: named switches held as bits of one static `AtomicU64` word per
//! family, so a disabled site costs one relaxed load and a branch.

mod family;
mod registry;
mod set;

pub use family::{base, Preset, SpanGroup, SpanGroupFamily};
#[cfg(feature = "sdk-core")]
pub(crate) use registry::disable_all_after_fork;
pub use registry::{
    is_span_group_enabled, register_family, set_enabled_span_groups, span_group_families,
    LinkedFamily,
};
pub use set::{SpanGroupError, SpanGroupSet};
