//! Flush and shutdown work that takes no deadline of its own (the SDK's
//! metric and log providers), run on helper threads and waited for until one
//! deadline; a task still running then is reported by name, not waited for.

use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What went wrong with one signal's flush or shutdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Trouble {
    /// It had not finished at the deadline.
    TimedOut,
    /// It answered with an error (the SDK's words).
    Failed(String),
}

/// The troubles of one flush or shutdown, by signal name.
pub(crate) type Troubles = Vec<(&'static str, Trouble)>;

pub(crate) fn trouble_of(e: OTelSdkError) -> Trouble {
    match e {
        OTelSdkError::Timeout(_) => Trouble::TimedOut,
        e => Trouble::Failed(e.to_string()),
    }
}

pub(crate) type Task = (
    &'static str,
    Arc<AtomicBool>,
    Box<dyn FnOnce() -> OTelSdkResult + Send>,
);

pub(crate) struct Waiting {
    /// Started now, answering on `rx`.
    started: Vec<&'static str>,
    /// Still running from an earlier call.
    earlier: Vec<(&'static str, Arc<AtomicBool>)>,
    errors: Troubles,
    rx: std::sync::mpsc::Receiver<(&'static str, OTelSdkResult)>,
}

/// Starts each task on a thread of its own, unless the previous one of the
/// same signal is still running (then that is reported instead).
pub(crate) fn spawn_all(tasks: Vec<Task>, what: &str) -> Waiting {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut waiting = Vec::new();
    let mut earlier = Vec::new();
    let mut errors = Vec::new();
    for (name, busy, task) in tasks {
        if busy.swap(true, Ordering::AcqRel) {
            // an earlier call's thread still runs: wait for it instead
            earlier.push((name, busy));
            continue;
        }
        let tx = tx.clone();
        let flag = busy.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("lens-{what}"))
            .spawn(move || {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(task))
                    .unwrap_or_else(|_| Err(OTelSdkError::InternalFailure("panicked".into())));
                flag.store(false, Ordering::Release);
                let _ = tx.send((name, r));
            });
        match spawned {
            Ok(_) => waiting.push(name),
            Err(e) => {
                busy.store(false, Ordering::Release);
                errors.push((
                    name,
                    Trouble::Failed(format!("cannot start the {what} thread: {e}")),
                ));
            }
        }
    }
    Waiting {
        started: waiting,
        earlier,
        errors,
        rx,
    }
}

/// Waits for the started tasks until `deadline`; a task still running then
/// is reported by name and left to finish on its own.
pub(crate) fn wait_all(w: Waiting, deadline: Instant) -> Troubles {
    let Waiting {
        mut started,
        mut earlier,
        mut errors,
        rx,
    } = w;
    while !started.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((name, r)) => {
                started.retain(|n| *n != name);
                match r {
                    // a flush racing a shutdown of the same pipeline
                    Ok(()) | Err(OTelSdkError::AlreadyShutdown) => {}
                    Err(e) => errors.push((name, trouble_of(e))),
                }
            }
            Err(_) => break,
        }
    }
    while !earlier.is_empty() && Instant::now() < deadline {
        earlier.retain(|(_, busy)| busy.load(Ordering::Acquire));
        if !earlier.is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    for name in started
        .into_iter()
        .chain(earlier.into_iter().map(|(n, _)| n))
    {
        errors.push((name, Trouble::TimedOut));
    }
    errors
}
