//! Compile-fail and compile-pass tests of the lens macros.
//!
//! Fail cases live in `ui/fail/`, one kebab-case file per case, named
//! `<kind>-<case>.rs` so the files of one error kind sit together (`group-`,
//! `option-`, `syntax-`, `item-`, `args-`, `err-`, `key-`, `value-`,
//! `family-`, `body-`); each has a checked `.stderr`. Pass cases live in
//! `ui/pass/`; trybuild also runs them.
//!
//! The `.stderr` files are tied to the compiler's wording, so they are
//! checked on the pinned toolchain only ([`PINNED_RUSTC`]); on another one
//! the fail cases are skipped with a note, unless `LENS_UI_ANY_TOOLCHAIN=1`.
//! Regenerate them with `TRYBUILD=overwrite cargo test -p ui-tests` and read
//! every diff before committing.

/// The toolchain the `.stderr` files are written with (a `rustc -V` prefix).
const PINNED_RUSTC: &str = "rustc 1.95.";

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    let rustc = env!("LENS_UI_RUSTC_VERSION");
    if rustc.starts_with(PINNED_RUSTC) || std::env::var_os("LENS_UI_ANY_TOOLCHAIN").is_some() {
        t.compile_fail("tests/ui/fail/*.rs");
    } else {
        // straight to stderr (not captured by the test harness), so the
        // skip shows in CI logs
        let note = format!(
            "note: skipping the compile-fail cases: their .stderr files are written with \
             {PINNED_RUSTC}x and this is `{rustc}` (set LENS_UI_ANY_TOOLCHAIN=1 to run them)\n"
        );
        let _ = std::io::Write::write_all(&mut std::io::stderr(), note.as_bytes());
    }
    t.pass("tests/ui/pass/*.rs");
}
