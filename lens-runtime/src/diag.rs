//! Lens's own diagnostics on stderr: best-effort and never blocking on, or
//! panicking with, the application's stderr.
//!
//! `eprintln!` panics when stderr is closed or a broken pipe, and
//! `std::io::stderr().lock()` waits while the application holds the lock.
//! Each message here is formatted first, then written to file descriptor 2
//! with one `write(2)` call; an error is ignored.

use std::fmt;
use std::io::{self, Write};

/// Standard output's file descriptor.
pub(crate) const STDOUT: libc::c_int = 1;
/// Standard error's file descriptor.
pub(crate) const STDERR: libc::c_int = 2;

/// Writes `lens: <message>` and a newline to stderr, ignoring any error.
pub(crate) fn warn(message: fmt::Arguments<'_>) {
    let mut line = Vec::with_capacity(128);
    let _ = write!(line, "lens: {message}");
    line.push(b'\n');
    without_signal(libc::SIGPIPE, || {
        let _ = write_all_with(&line, |b| write_fd(STDERR, b));
    });
}

/// One `write(2)` of `buf` to the file descriptor `fd`.
///
/// The console exporter writes to fd 1 directly rather than through
/// `std::io::stdout()`: the latter takes the process-wide stdout lock, which
/// the application may hold for as long as it likes (a `StdoutLock` kept by a
/// progress printer), and the export thread would wait on it forever. A
/// direct write bypasses the application's buffer; since each batch is
/// written whole and the application's `Stdout` only ever holds an
/// unfinished line, telemetry lines stay whole (an unfinished application
/// line is completed after them). A closed fd 1 fails with `EBADF`, which is
/// counted like any other failed write.
pub(crate) fn write_fd(fd: libc::c_int, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes; `write` touches
    // nothing else and does not take ownership of `fd`.
    let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
    // a negative count (-1) is an error, reported in errno
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Writes all of `buf` through `write`, retrying on `EINTR`. On failure the
/// error comes with the number of bytes already written.
pub(crate) fn write_all_counted(
    buf: &[u8],
    mut write: impl FnMut(&[u8]) -> io::Result<usize>,
) -> Result<(), (usize, io::Error)> {
    let mut done = 0;
    while let Some(rest) = buf.get(done..).filter(|r| !r.is_empty()) {
        match write(rest) {
            Ok(0) => return Err((done, io::ErrorKind::WriteZero.into())),
            Ok(n) => done += n.min(rest.len()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err((done, e)),
        }
    }
    Ok(())
}

/// [`write_all_counted`] without the count.
pub(crate) fn write_all_with(
    buf: &[u8],
    write: impl FnMut(&[u8]) -> io::Result<usize>,
) -> io::Result<()> {
    write_all_counted(buf, write).map_err(|(_, e)| e)
}

/// Runs `f` with `sig` blocked on this thread, then consumes a `sig` that
/// `f` raised before restoring the thread's mask, so that lens's own writes
/// fail with an error instead of killing the process: SIGXFSZ (a write past
/// `RLIMIT_FSIZE`) and SIGPIPE (a write to a closed pipe, in a program that
/// restored SIGPIPE's default). The application's own signal handling is
/// untouched.
pub(crate) fn without_signal<T>(sig: libc::c_int, f: impl FnOnce() -> T) -> T {
    // SAFETY: plain signal-mask calls on this thread with sets built here.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        let mut old: libc::sigset_t = std::mem::zeroed();
        let blocked = libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) == 0;
        let r = f();
        if blocked {
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            let mut pending: libc::sigset_t = std::mem::zeroed();
            if libc::sigpending(&mut pending) == 0
                && libc::sigismember(&pending, sig) == 1
                && libc::sigismember(&old, sig) == 0
            {
                libc::sigtimedwait(&set, std::ptr::null_mut(), &zero);
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        }
        r
    }
}
