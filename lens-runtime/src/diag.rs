//! Lens's own diagnostics on stderr: best-effort and never blocking on, or
//! panicking with, the application's stderr.
//!
//! `eprintln!` panics when stderr is closed or a broken pipe, and
//! `std::io::stderr().lock()` waits while the application holds the lock.
//! Each message here is formatted first, then written to file descriptor 2
//! with one `write(2)` call; an error is ignored.

use std::fmt;
use std::io::Write;

/// Writes `lens: <message>` and a newline to stderr, ignoring any error.
pub(crate) fn warn(message: fmt::Arguments<'_>) {
    let mut line = Vec::with_capacity(128);
    let _ = write!(line, "lens: {message}");
    line.push(b'\n');
    write_stderr(&line);
}

fn write_stderr(bytes: &[u8]) {
    #[cfg(unix)]
    {
        // SAFETY: fd 2 is only written to; a closed or invalid descriptor
        // makes write(2) return an error, which is ignored.
        let _ = unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
    }
    #[cfg(not(unix))]
    {
        let _ = std::io::stderr().write_all(bytes);
    }
}
