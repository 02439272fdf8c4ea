//! What the source-reading tests (`layers.rs`, `env_reads.rs`) share.

use std::path::{Path, PathBuf};

/// Every `.rs` file below `dir`, into `out`.
pub(crate) fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}
