//! Records the version of the compiler building this crate, so that
//! `tests/ui.rs` knows whether the checked `.stderr` files (written with the
//! pinned toolchain) apply. trybuild builds its cases with the same cargo and
//! compiler.

use std::process::Command;

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let version = Command::new(rustc)
        .arg("-V")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .unwrap_or_default();
    println!("cargo:rustc-env=LENS_UI_RUSTC_VERSION={}", version.trim());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RUSTC");
}
