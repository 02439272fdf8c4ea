//! Where JSON lines go: a file (whole lines or nothing, mode 0600, failures
//! counted) or the process's stdout.

use crate::diag::{write_all_counted, write_all_with, write_fd, STDERR, STDOUT};
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use serde::Serialize;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Where JSON lines go, with the count of records that could not be written.
#[derive(Debug)]
pub(crate) struct Sink {
    target: Target,
    /// Records (spans, metrics, log records) dropped because a write failed.
    dropped: AtomicU64,
    /// Set once the one warning about a failed write has been printed.
    pub(crate) warned: AtomicBool,
    /// The first failed write's error, for the shutdown report.
    first_error: std::sync::OnceLock<String>,
}

#[derive(Debug)]
enum Target {
    /// An append-only file; the lock also makes the undo of a failed write
    /// exclusive among this process's exporters.
    File { file: Mutex<File>, path: PathBuf },
    /// File descriptor 1, written directly (see [`write_fd`]).
    Stdout,
}

impl Sink {
    /// Opens `path` for appending (creating parent folders with the default
    /// mode, and the file itself with mode 0600). Safe against a planted
    /// link: a symlink at the file name is refused (`O_NOFOLLOW`), and so is
    /// a final folder that is a symlink owned by another user. A regular
    /// file that already exists with group or other permissions is made
    /// 0600 when this user owns it, and warned about when it does not.
    pub(crate) fn file(path: &Path) -> io::Result<Arc<Sink>> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            refuse_foreign_link(dir)?;
            std::fs::create_dir_all(dir)?;
        }
        // O_NONBLOCK: opening a FIFO nobody reads would block setup for
        // ever; it fails with ENXIO instead. The flag is cleared once open.
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ENXIO) => io::Error::new(
                    e.kind(),
                    "a FIFO with no reader (lens does not wait for one)",
                ),
                Some(libc::ELOOP) => io::Error::new(
                    e.kind(),
                    "it is a symbolic link, and lens does not write through one (name the \
                     real file, or use NEMO_LENS_EXPORTER=console for stdout)",
                ),
                _ => e,
            })?;
        make_private(&file, path);
        // SAFETY: fcntl on a descriptor this function owns.
        unsafe {
            use std::os::fd::AsRawFd;
            let fd = file.as_raw_fd();
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
            }
        }
        let file = above_stdio(file)?;
        Ok(Arc::new(Sink::new(Target::File {
            file: Mutex::new(file),
            path: path.to_owned(),
        })))
    }

    /// The process's standard output.
    pub(crate) fn stdout() -> Arc<Sink> {
        Arc::new(Sink::new(Target::Stdout))
    }

    fn new(target: Target) -> Sink {
        Sink {
            target,
            dropped: AtomicU64::new(0),
            warned: AtomicBool::new(false),
            first_error: std::sync::OnceLock::new(),
        }
    }

    /// Records (spans, metrics, log records) not written because a write
    /// failed, over the life of this sink.
    pub(crate) fn dropped_records(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Writes the batch's lines with one append. On failure the batch's
    /// records are counted as dropped, the first failure of this sink is
    /// reported on stderr, and an error is returned (the caller counts it).
    pub(crate) fn write(&self, batch: &EncodedBatch) -> OTelSdkResult {
        if batch.buf.is_empty() {
            return Ok(());
        }
        let result = match &self.target {
            Target::File { file, .. } => {
                let file = file.lock().unwrap_or_else(|e| e.into_inner());
                append_whole(&file, &batch.buf, |f, b| (&*f).write(b))
            }
            Target::Stdout => crate::diag::without_signal(libc::SIGPIPE, || {
                write_all_with(&batch.buf, |b| write_fd(STDOUT, b))
            }),
        };
        result.map_err(|e| self.drop_batch(batch.records, &e))
    }

    /// Counts `records` as dropped, warns once, and makes the export error.
    pub(crate) fn drop_batch(&self, records: u64, cause: &dyn fmt::Display) -> OTelSdkError {
        self.dropped.fetch_add(records, Ordering::Relaxed);
        if self.first_error.get().is_none() {
            let _ = self.first_error.set(cause.to_string());
        }
        let msg = format!("cannot write telemetry to {}: {cause}", self.destination());
        if !self.warned.swap(true, Ordering::Relaxed) {
            // Best effort, straight to fd 2: never a panic (as `eprintln!`
            // when stderr is closed) and never a wait on the application's
            // stderr lock.
            let line = format!(
                "lens: warning: {msg}; records that cannot be written are dropped \
                 and counted (this warning is shown once)\n"
            );
            let _ = write_all_with(line.as_bytes(), |b| write_fd(STDERR, b));
        }
        OTelSdkError::InternalFailure(msg)
    }

    /// The first failed write's error, if a write failed.
    pub(crate) fn first_error(&self) -> Option<&str> {
        self.first_error.get().map(String::as_str)
    }

    pub(crate) fn destination(&self) -> String {
        match &self.target {
            Target::File { path, .. } => path.display().to_string(),
            Target::Stdout => "stdout".to_owned(),
        }
    }
}

/// Appends `buf` to `file` (opened for appending) whole or not at all: when
/// a write fails after part of `buf` went out, the file is truncated back to
/// its length before the write, so it ends with the last complete line.
/// `write` is one `write(2)` (a parameter so tests can make it fail).
///
/// The undo is skipped when the file's length shows that someone else
/// appended meanwhile (several processes sharing one file): truncating then
/// would remove their lines.
pub(crate) fn append_whole(
    file: &File,
    buf: &[u8],
    mut write: impl FnMut(&File, &[u8]) -> io::Result<usize>,
) -> io::Result<()> {
    let start = file.metadata()?.len();
    // Past RLIMIT_FSIZE the kernel sends SIGXFSZ to the writing thread,
    // whose default action kills the job: blocked here, the write fails
    // with EFBIG instead, and a SIGXFSZ the write raised is consumed.
    let written =
        crate::diag::without_signal(libc::SIGXFSZ, || write_all_counted(buf, |b| write(file, b)));
    let Err((written, err)) = written else {
        return Ok(());
    };
    if written == 0 {
        return Err(err);
    }
    let expected = u64::try_from(written)
        .ok()
        .and_then(|w| start.checked_add(w));
    match file.metadata() {
        Ok(m) if Some(m.len()) == expected => match file.set_len(start) {
            Ok(()) => Err(err),
            Err(t) => Err(io::Error::new(
                err.kind(),
                format!("{err} (and the partial line could not be removed: {t})"),
            )),
        },
        _ => Err(err),
    }
}

/// `file` on a descriptor above 2. A process that closed its stdin, stdout
/// or stderr would otherwise get the telemetry file as that descriptor, and
/// whatever it (or lens's own diagnostics) writes to it would land in the
/// file.
/// Refuses a final folder that is a symbolic link owned by another user
/// (planted in a shared folder to send telemetry elsewhere); the user's own
/// link (to scratch storage, say) is followed.
fn refuse_foreign_link(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(dir) {
        // SAFETY: geteuid has no preconditions and cannot fail.
        Ok(m) if m.file_type().is_symlink() && m.uid() != unsafe { libc::geteuid() } => {
            Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "its folder {} is a symbolic link owned by another user (uid {}), and lens \
                     does not write through one",
                    dir.display(),
                    m.uid()
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// Makes a regular file private (0600) when it is not: a file that existed
/// before keeps its mode through `open`. One warning when this user cannot
/// (another user's file).
fn make_private(file: &File, path: &Path) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let Ok(m) = file.metadata() else { return };
    if !m.file_type().is_file() || m.mode() & 0o077 == 0 {
        return;
    }
    if file
        .set_permissions(std::fs::Permissions::from_mode(0o600))
        .is_err()
    {
        crate::diag::warn(format_args!(
            "warning: the telemetry file {} is readable by others (mode {:o}) and cannot be \
             made private (owner uid {})",
            path.display(),
            m.mode() & 0o777,
            m.uid()
        ));
    }
}

fn above_stdio(file: File) -> io::Result<File> {
    use std::os::fd::{AsRawFd, FromRawFd};
    if file.as_raw_fd() > 2 {
        return Ok(file);
    }
    // SAFETY: duplicating a descriptor this function owns; the new one is
    // owned by the returned `File`, the old one is closed when `file` drops.
    let fd = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Encoded lines of one export call, each ending in `\n`, and the number of
/// records they hold.
#[derive(Debug, Default)]
pub(crate) struct EncodedBatch {
    pub(crate) buf: Vec<u8>,
    pub(crate) records: u64,
}

impl EncodedBatch {
    /// Appends `value` as one JSON line (proto3 JSON mapping for doubles).
    pub(crate) fn push<T: Serialize>(&mut self, value: &T) -> Result<(), OTelSdkError> {
        let start = self.buf.len();
        let mut ser = serde_json::Serializer::new(&mut self.buf);
        match value.serialize(super::proto3::Doubles(&mut ser)) {
            Ok(()) => {
                self.buf.push(b'\n');
                Ok(())
            }
            Err(e) => {
                self.buf.truncate(start);
                Err(OTelSdkError::InternalFailure(format!(
                    "cannot encode OTLP JSON: {e}"
                )))
            }
        }
    }
}
