//! `.pftrace` files, as the runtime's `perfetto` exporter writes them (one
//! or more per rank, rotated by size). Each is a complete trace whose track
//! uuids derive from its run and rank, so merging is concatenation: the
//! protobuf `Trace` is a repeated field, and concatenated traces are one
//! trace.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::input::files::{self, InputError};
use crate::term;

fn is_trace(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "pftrace")
}

/// The inputs of `lens perfetto`.
#[derive(Debug, Default)]
pub(super) struct Inputs {
    /// `.pftrace` files (named, or found in named folders), sorted.
    pub(super) traces: Vec<PathBuf>,
    /// JSON-lines files: named files that are not traces, and the
    /// `*.jsonl`/`*.json` files (optionally `.gz`) found in named folders.
    pub(super) lines: Vec<PathBuf>,
    /// Folders or entries that could not be read (reported, skipped).
    pub(super) unreadable: u64,
}

/// Lists the inputs among `paths`: one walk of each folder, each file once.
pub(super) fn split(paths: &[PathBuf]) -> Result<Inputs, InputError> {
    let mut inputs = Inputs::default();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| InputError::Missing(p.clone(), e))?;
        if meta.is_dir() {
            let mut found = Vec::new();
            let either = |f: &Path| is_trace(f) || files::is_input_name(f);
            inputs.unreadable += files::walk(p, &either, &mut found);
            for f in found {
                if is_trace(&f) {
                    inputs.traces.push(f);
                } else {
                    inputs.lines.push(f);
                }
            }
        } else if is_trace(p) {
            inputs.traces.push(p.clone());
        } else {
            inputs.lines.push(p.clone());
        }
    }
    inputs.traces = files::once_each(std::mem::take(&mut inputs.traces));
    inputs.lines = files::once_each(std::mem::take(&mut inputs.lines));
    Ok(inputs)
}

/// Appends every file of `traces` to `out`; returns the bytes copied and
/// how many files could not be opened (each reported, then skipped).
pub(super) fn append(traces: &[PathBuf], out: &mut impl Write) -> io::Result<(u64, u64)> {
    let (mut total, mut skipped) = (0, 0);
    for t in traces {
        let mut f = match std::fs::File::open(t) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("lens: {}: {e}; skipped", term::path(t));
                skipped += 1;
                continue;
            }
        };
        total += io::copy(&mut f, out)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", term::path(t))))?;
    }
    Ok((total, skipped))
}
