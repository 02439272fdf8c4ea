//! The bridge's shared state: the configuration every front end reads, the
//! minimum level checked first, and the guard against bridging a record
//! produced while emitting one.

use crate::sdk::logs::options::Level;
use crate::sdk::logs::stamp::{StampingLogger, StampingProvider};
use opentelemetry_appender_log::OpenTelemetryLogBridge;
use opentelemetry_appender_tracing::layer::OpenTelemetryTracingBridge;
use std::cell::Cell;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// The configuration every [`LogBridgeLogger`] and [`LogBridgeLayer`] reads.
pub(crate) struct Active {
    pub(crate) targets: Box<[String]>,
    pub(crate) log_on: bool,
    pub(crate) tracing_on: bool,
    pub(crate) log: OpenTelemetryLogBridge<StampingProvider, StampingLogger>,
    pub(crate) tracing: OpenTelemetryTracingBridge<StampingProvider, StampingLogger>,
}

/// The minimum level as a number (`Level as u8`); `LEVEL_OFF` when inactive.
/// Checked before anything else, so a filtered-out record costs one load.
pub(crate) static MIN_LEVEL: AtomicU8 = AtomicU8::new(LEVEL_OFF);
pub(crate) const LEVEL_OFF: u8 = u8::MAX;
pub(crate) static ACTIVE: RwLock<Option<Arc<Active>>> = RwLock::new(None);
/// Serialises setup calls (install + state swap).
pub(crate) static SETUP: Mutex<()> = Mutex::new(());

thread_local! {
    /// Set while this thread emits a bridged record: a record produced while
    /// emitting one (an SDK internal log, say) is not bridged.
    static EMITTING: Cell<bool> = const { Cell::new(false) };
}

#[inline]
pub(crate) fn level_passes(level: Level) -> bool {
    // a forked child bridges nothing (see `crate::sdk::fork`)
    level as u8 >= MIN_LEVEL.load(Ordering::Relaxed) && !crate::sdk::fork::in_child()
}

/// Stops forwarding (telemetry shutdown calls this, so records after
/// shutdown are dropped here instead of inside a shut-down provider).
pub(crate) fn deactivate() {
    let _setup = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    MIN_LEVEL.store(LEVEL_OFF, Ordering::Relaxed);
    *ACTIVE.write().unwrap_or_else(|e| e.into_inner()) = None;
}

pub(crate) fn current() -> Option<Arc<Active>> {
    ACTIVE.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Runs `f` unless this thread is already emitting a bridged record.
pub(crate) fn emit_once(f: impl FnOnce()) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            let _ = EMITTING.try_with(|e| e.set(false));
        }
    }
    let entered = EMITTING.try_with(|e| !e.replace(true)).unwrap_or(false);
    if entered {
        let _reset = Reset;
        f();
    }
}
