//! Re-exports lens as `my_reexport::lens` (see `tests/reexport.rs`).

pub use inner_lens as lens;
