//! Opt-in SIGTERM / SIGINT hook: end open spans, flush every signal, then
//! let the process die as it would have (SLURM sends SIGTERM at a time
//! limit; without this, run-wide spans such as `job` are lost).

use crate::setup::Shared;
use crate::span::open;
use signal_hook::consts::{SIGINT, SIGTERM};
use std::sync::Weak;

/// The reason recorded on spans ended by a signal.
pub(crate) const SIGNAL_REASON: &str = "process received a termination signal";

pub(crate) fn install(weak: Weak<std::sync::Mutex<Option<crate::setup::Installed>>>) {
    let mut signals = match signal_hook::iterator::Signals::new([SIGTERM, SIGINT]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lens: cannot install the flush-on-signal hook: {e}");
            return;
        }
    };
    let spawned = std::thread::Builder::new()
        .name("lens-signal".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                if let Some(inner) = Weak::upgrade(&weak) {
                    flush(&inner);
                }
                // die as the process would have without us
                let _ = signal_hook::low_level::emulate_default_handler(sig);
            }
        });
    if let Err(e) = spawned {
        eprintln!("lens: cannot start the flush-on-signal thread: {e}");
    }
}

fn flush(inner: &Shared) {
    let guard = inner.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(installed) = guard.as_ref() {
        open::truncate_all(SIGNAL_REASON);
        for e in installed.flush() {
            eprintln!("lens: flush on signal: {e}");
        }
    }
}
