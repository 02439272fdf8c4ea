//! `.pftrace` files, as the runtime's `perfetto` exporter writes them (one
//! or more per rank, rotated by size). Each is a complete trace whose track
//! uuids derive from its run and rank, so merging is concatenation: the
//! protobuf `Trace` is a repeated field, and concatenated traces are one
//! trace.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

fn is_trace(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "pftrace")
}

/// The `.pftrace` files among `paths` (named, or found in named folders),
/// sorted, and the paths left for the JSON-lines reader (named files that
/// are not traces, and every folder).
pub(super) fn split(paths: &[PathBuf]) -> io::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let (mut traces, mut rest) = (Vec::new(), Vec::new());
    for p in paths {
        if p.is_dir() {
            crate::input::files::walk(p, &is_trace, &mut traces)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))?;
            rest.push(p.clone());
        } else if is_trace(p) {
            traces.push(p.clone());
        } else {
            rest.push(p.clone());
        }
    }
    traces.sort();
    traces.dedup();
    Ok((traces, rest))
}

/// Appends every file of `traces` to `out`; returns the bytes copied.
pub(super) fn append(traces: &[PathBuf], out: &mut impl Write) -> io::Result<u64> {
    let mut total = 0;
    for t in traces {
        let mut f = std::fs::File::open(t)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", t.display())))?;
        total += io::copy(&mut f, out)?;
    }
    Ok(total)
}
