//! Turning command-line paths into the list of files to read.

use std::path::{Path, PathBuf};

/// Why the inputs could not be listed.
#[derive(Debug)]
pub(crate) enum InputError {
    /// A path does not exist or cannot be read.
    Missing(PathBuf, std::io::Error),
    /// No input file was found under the given paths.
    NoFiles(Vec<PathBuf>),
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InputError::Missing(p, e) => write!(f, "{}: {e}", p.display()),
            InputError::NoFiles(ps) => {
                write!(
                    f,
                    "no OTLP/JSON-lines files (*.jsonl, *.json, optionally .gz) in"
                )?;
                for p in ps {
                    write!(f, " {}", p.display())?;
                }
                Ok(())
            }
        }
    }
}

fn is_input_name(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let name = name.strip_suffix(".gz").unwrap_or(name);
    name.ends_with(".jsonl") || name.ends_with(".json")
}

/// Files named directly are taken as they are; directories are searched
/// (recursively) for `*.jsonl`/`*.json` files, plain or `.gz`. The result
/// is sorted so runs are read in a stable order.
pub(crate) fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>, InputError> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| InputError::Missing(p.clone(), e))?;
        if meta.is_dir() {
            walk(p, &is_input_name, &mut out).map_err(|e| InputError::Missing(p.clone(), e))?;
        } else {
            out.push(p.clone());
        }
    }
    if out.is_empty() {
        return Err(InputError::NoFiles(paths.to_vec()));
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Appends the files below `dir` (recursively) that `keep` accepts.
pub(crate) fn walk(
    dir: &Path,
    keep: &dyn Fn(&Path) -> bool,
    out: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, keep, out)?;
        } else if keep(&path) {
            out.push(path);
        }
    }
    Ok(())
}
