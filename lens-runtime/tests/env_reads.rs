//! One reader of the process environment: in the runtime (`lens-runtime/src`)
//! and the facade (`lens/src`) only `vars.rs` calls `std::env::var`,
//! `var_os`, `vars` or `vars_os`; every other module reads through it, so
//! that every variable is read, checked and documented in one place
//! (`config/`, `host/`, `bridge/spec.rs`, all through `vars.rs`).
//!
//! `lens-cli` is a command, not the library: it may read its own
//! environment (its browser, its fuzz knobs) and hand lens a lookup over
//! the process environment, but each such read is listed in [`CLI_READS`]
//! with its reason, so that a new one (say, a `NEMO_LENS_*` variable read
//! past lens) fails here until it is reviewed.
//!
//! Test code is exempt: inline `#[cfg(test)] mod …` blocks, files named
//! `tests.rs`, and the test-only helpers.

mod common;

use common::files;
use std::path::{Path, PathBuf};

/// The one file of the runtime that reads the environment.
const READER: &str = "lens-runtime/src/vars.rs";
/// Test-only files.
const TEST_ONLY: &[&str] = &[
    "lens-runtime/src/metrics_test_support.rs",
    "lens-runtime/src/test_rng.rs",
];
/// The reads `lens-cli` makes itself: (file, how many, why).
const CLI_READS: &[(&str, usize, &str)] = &[
    (
        "lens-cli/src/exec/mod.rs",
        1,
        "NEMO_LENS_RUN_ID set by the user is passed on, a generated one is set for the child",
    ),
    ("lens-cli/src/fuzz.rs", 1, "the command's own fuzz knobs"),
    (
        "lens-cli/src/record.rs",
        3,
        "a lookup handed to lens's run-id resolver and to the child's settings; BROWSER",
    ),
    (
        "lens-cli/src/slurm_env.rs",
        1,
        "a lookup over SLURM_* handed to lens",
    ),
    (
        "lens-cli/src/telemetry.rs",
        1,
        "a lookup handed to lens's run-id resolver",
    ),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `text` without its inline `#[cfg(test)] mod … { … }` blocks, wherever
/// they are in the file (braces counted; a test module declared with
/// `mod tests;` is a file of its own, `tests.rs`).
fn without_test_modules(text: &str) -> String {
    const MARK: &str = "#[cfg(test)]\nmod ";
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(MARK) {
        out.push_str(&rest[..i]);
        let after = &rest[i..];
        let (open, semi) = (after.find('{'), after.find(';'));
        let Some(open) = open.filter(|o| semi.is_none_or(|s| *o < s)) else {
            // `mod tests;`: nothing inline
            rest = &after[MARK.len()..];
            continue;
        };
        let mut depth = 0usize;
        let mut end = after.len();
        for (j, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + j + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The lines of `text` that read the environment (`env::var`, `var_os`,
/// `vars`, `vars_os`, or an import of them), outside comments and unit
/// test modules.
fn reads(text: &str) -> Vec<String> {
    without_test_modules(text)
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .filter(|l| {
            let l = l.replace(' ', "");
            l.contains("env::var") || (l.contains("std::env::{") && l.contains("var"))
        })
        .map(|l| l.trim().to_owned())
        .collect()
}

/// Every read of the environment under `dirs`, by file relative to the
/// workspace root; test code is left out.
fn reads_under(dirs: &[&str]) -> Vec<(String, Vec<String>)> {
    let root = root();
    let mut all = Vec::new();
    for d in dirs {
        files(&root.join(d), &mut all);
    }
    all.sort();
    all.iter()
        .filter_map(|f| {
            let rel = f
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let test_file = rel.ends_with("/tests.rs") || TEST_ONLY.contains(&rel.as_str());
            let found = reads(&std::fs::read_to_string(f).unwrap());
            (!test_file && !found.is_empty()).then_some((rel, found))
        })
        .collect()
}

#[test]
fn only_vars_rs_reads_the_environment_in_the_runtime_and_the_facade() {
    let bad: Vec<String> = reads_under(&["lens-runtime/src", "lens/src"])
        .into_iter()
        .filter(|(f, _)| f != READER)
        .map(|(f, lines)| format!("{f}: {}", lines.join(" | ")))
        .collect();
    assert!(
        bad.is_empty(),
        "read the environment through crate::vars (vars::var or vars::raw), not std::env:\n{}",
        bad.join("\n")
    );
    // the reader itself is found: the check sees what it looks for
    assert!(reads_under(&["lens-runtime/src"])
        .iter()
        .any(|(f, _)| f == READER));
}

#[test]
fn the_command_s_own_reads_are_the_listed_ones() {
    let found: Vec<(String, usize)> = reads_under(&["lens-cli/src"])
        .into_iter()
        .map(|(f, lines)| (f, lines.len()))
        .collect();
    let listed: Vec<(String, usize)> = CLI_READS
        .iter()
        .map(|(f, n, _)| ((*f).to_owned(), *n))
        .collect();
    assert_eq!(
        found, listed,
        "lens-cli reads the environment in new places: read lens's variables through lens \
         (LensConfig::from_env, a lookup handed to lens), or list the command's own read in \
         CLI_READS with its reason"
    );
}

#[test]
fn the_check_sees_every_form_of_a_read() {
    let planted = "use std::env;\n\
                   fn a() { let _ = std::env::var(\"NEMO_LENS_X\"); }\n\
                   fn b() { let _ = env::var_os(\"OTEL_X\"); }\n\
                   fn c() { for _ in std::env::vars() {} }\n\
                   use std::env::{self, var};\n\
                   // std::env::var in a comment is not a read\n\
                   fn d() { let _ = std::env::temp_dir(); } // env::var\n\
                   #[cfg(test)]\nmod tests { fn e() { if true { std::env::var(\"T\"); } } }\n\
                   fn f() { let _ = std::env::var_os(\"AFTER_THE_TESTS\"); }\n";
    assert_eq!(reads(planted).len(), 5, "{:?}", reads(planted));
}
