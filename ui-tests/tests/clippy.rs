//! Lints the code the macros generate. trybuild only compiles the pass cases
//! with rustc; this target includes the `clippy-clean` pass case as a module,
//! so `cargo clippy -p ui-tests --all-targets -- -D warnings` checks every
//! macro form against the workspace lints, and `cargo test` runs it once more.

#[path = "ui/pass/clippy-clean.rs"]
mod clippy_clean;

#[test]
fn clippy_clean_runs() {
    clippy_clean::main();
}
