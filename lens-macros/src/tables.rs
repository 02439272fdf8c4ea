//! Names the macros check at compile time: the same table the runtime uses
//! (`lens-names`), so both agree by construction.

pub(crate) use lens_names::{is_redacted_key, BASE_GROUPS, BASE_PRESETS};

pub(crate) fn base_group_list() -> String {
    BASE_GROUPS.join(", ")
}
