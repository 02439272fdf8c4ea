//! Compile-fail and compile-pass tests of the lens macros.
//!
//! Fail cases live in `ui/fail/`, one kebab-case file per case, named
//! `<kind>-<case>.rs` so the files of one error kind sit together; each has a
//! checked `.stderr`. Pass cases live in `ui/pass/` and are also run.
//!
//! The `.stderr` files depend on the compiler's wording: regenerate them with
//! `TRYBUILD=overwrite cargo test -p ui-tests` on the pinned toolchain and
//! read every diff before committing.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
