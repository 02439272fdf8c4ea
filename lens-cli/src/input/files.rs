//! Turning command-line paths into the list of files to read.
//!
//! Each file is read once, whatever the number of names it is reached by
//! (symbolic or hard links, `./`, named and also found in a folder): files
//! are told apart by (device, inode). Symlinks to files are followed;
//! symlinked folders are not entered, and no folder is read twice, so a
//! link back up the tree (`self -> .`) cannot make the walk loop. A folder
//! or file that cannot be read is reported by its own path and skipped.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::term;

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
            InputError::Missing(p, e) => write!(f, "{}: {e}", term::path(p)),
            InputError::NoFiles(ps) => {
                write!(
                    f,
                    "no OTLP/JSON-lines files (*.jsonl, *.json, optionally .gz) in"
                )?;
                for p in ps {
                    write!(f, " {}", term::path(p))?;
                }
                Ok(())
            }
        }
    }
}

/// A file's identity: (device, inode).
pub(crate) type FileId = (u64, u64);

/// The identity of the file `m` describes.
pub(crate) fn file_id(m: &std::fs::Metadata) -> FileId {
    (m.dev(), m.ino())
}

/// Whether `p` is named like an OTLP/JSON-lines file (`*.jsonl`, `*.json`,
/// optionally `.gz`).
pub(crate) fn is_input_name(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let name = name.strip_suffix(".gz").unwrap_or(name);
    name.ends_with(".jsonl") || name.ends_with(".json")
}

/// The files to read, and how many paths below the named folders could not
/// be read (each reported on stderr).
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// The files, sorted, each file once.
    pub(crate) files: Vec<PathBuf>,
    /// Folders and entries that could not be read (skipped).
    pub(crate) unreadable: u64,
}

/// Files named directly are taken as they are; directories are searched
/// (recursively, see [`walk`]) for `*.jsonl`/`*.json` files, plain or
/// `.gz`. The result is sorted so runs are read in a stable order.
pub(crate) fn discover(paths: &[PathBuf]) -> Result<Found, InputError> {
    let mut found = Found::default();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| InputError::Missing(p.clone(), e))?;
        if meta.is_dir() {
            found.unreadable += walk(p, &is_input_name, &mut found.files);
        } else {
            found.files.push(p.clone());
        }
    }
    found.files = once_each(std::mem::take(&mut found.files));
    if found.files.is_empty() {
        return Err(InputError::NoFiles(paths.to_vec()));
    }
    Ok(found)
}

/// `files` sorted, with each file once: of the paths that name the same
/// file, the first in order is kept. Paths that cannot be looked at are
/// kept (reading them reports why).
pub(crate) fn once_each(mut files: Vec<PathBuf>) -> Vec<PathBuf> {
    files.sort();
    files.dedup();
    let mut seen: HashSet<FileId> = HashSet::new();
    files.retain(|p| match std::fs::metadata(p) {
        Ok(m) => seen.insert(file_id(&m)),
        Err(_) => true,
    });
    files
}

fn skipped(p: &Path, e: &std::io::Error) {
    eprintln!("lens: {}: {e}; skipped", term::path(p));
}

/// Appends the regular files below `dir` (recursively) that `keep`
/// accepts; returns how many folders or entries could not be read (each
/// reported on stderr by its own path, then skipped).
///
/// Symlinks to regular files are followed; symlinked folders are not
/// entered, and a folder reached again (a bind mount of a parent) is not
/// read twice. FIFOs, sockets and devices are never opened (a FIFO would
/// block the reader).
pub(crate) fn walk(dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) -> u64 {
    let mut seen: HashSet<FileId> = HashSet::new();
    let mut unreadable = 0;
    // a stack, not recursion: a deep tree cannot exhaust the stack
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        match std::fs::metadata(&d) {
            Ok(m) if !seen.insert(file_id(&m)) => continue,
            Ok(_) => {}
            Err(e) => {
                skipped(&d, &e);
                unreadable += 1;
                continue;
            }
        }
        let entries = match std::fs::read_dir(&d) {
            Ok(entries) => entries,
            Err(e) => {
                skipped(&d, &e);
                unreadable += 1;
                continue;
            }
        };
        let mut subdirs = Vec::new();
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    // the rest of this folder cannot be listed
                    skipped(&d, &e);
                    unreadable += 1;
                    break;
                }
            };
            let path = entry.path();
            let kind = match entry.file_type() {
                Ok(kind) => kind,
                Err(e) => {
                    skipped(&path, &e);
                    unreadable += 1;
                    continue;
                }
            };
            if kind.is_dir() {
                subdirs.push(path);
            } else if kind.is_file() {
                if keep(&path) {
                    out.push(path);
                }
            } else if kind.is_symlink() && keep(&path) {
                match std::fs::metadata(&path) {
                    Ok(m) if m.is_file() => out.push(path),
                    Ok(_) => {}
                    Err(e) => {
                        skipped(&path, &e);
                        unreadable += 1;
                    }
                }
            }
        }
        // depth first, in name order
        subdirs.sort();
        stack.extend(subdirs.into_iter().rev());
    }
    unreadable
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_do_not_loop_and_each_file_is_listed_once() {
        let dir = std::env::temp_dir().join(format!("lens-walk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).expect("mkdir");
        std::fs::write(dir.join("sub/a.jsonl"), "").expect("write");
        std::os::unix::fs::symlink(".", dir.join("self")).expect("link");
        std::os::unix::fs::symlink("..", dir.join("sub/up")).expect("link");
        std::os::unix::fs::symlink("sub/a.jsonl", dir.join("b.jsonl")).expect("link");
        std::fs::hard_link(dir.join("sub/a.jsonl"), dir.join("c.jsonl")).expect("link");
        let mut out = Vec::new();
        assert_eq!(walk(&dir, &is_input_name, &mut out), 0);
        assert_eq!(out.len(), 3, "{out:?}");
        let out = once_each(out);
        assert_eq!(out, [dir.join("b.jsonl")]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
