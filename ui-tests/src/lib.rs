//! UI tests of the lens macros live in `tests/`: `tests/ui.rs` runs the
//! trybuild compile-fail (`tests/ui/fail/`) and compile-pass
//! (`tests/ui/pass/`) cases, and `tests/clippy.rs` puts the generated code
//! of every macro form under `cargo clippy -- -D warnings`.
