//! Finished spans of lens's span path: one bounded buffer per thread,
//! registered with one collector thread.
//!
//! A span that ends goes into the ending thread's buffer (an uncontended
//! lock: only that thread and a drain take it). When the buffer holds
//! [`THRESHOLD`] spans the thread hands them to the sink in one batch (one
//! lock of the export queue per batch instead of one per span; waking the
//! collector for it instead measured slower: the two threads then contend
//! for the buffer and for malloc). The collector thread drains every
//! buffer on an interval, so a thread that records a few spans and sleeps
//! still exports them within the batch delay. The sink (lens's batch span
//! processor) never blocks: a full queue drops the excess and counts it. A
//! buffer outlives its thread until the next drain, and never holds more
//! than [`THRESHOLD`] spans.

use opentelemetry_sdk::trace::SpanData;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Where finished spans go.
pub(crate) trait SpanSink: Send + Sync + 'static {
    /// Takes a batch of finished spans; never blocks.
    fn submit(&self, spans: Vec<SpanData>);
}

/// Spans a thread buffers at most before it hands them over itself.
pub(crate) const THRESHOLD: usize = 512;

struct Buffer {
    /// The buffer generation ([`EPOCH`]) it belongs to.
    epoch: u64,
    spans: Mutex<Vec<SpanData>>,
}

impl Buffer {
    fn lock(&self) -> MutexGuard<'_, Vec<SpanData>> {
        self.spans.lock().unwrap_or_else(|e| e.into_inner())
    }
}

type Registry = Mutex<Vec<Arc<Buffer>>>;

/// Bumped in a forked child: buffers of an earlier epoch belong to the
/// parent (a thread that does not exist here may hold their lock).
static EPOCH: AtomicU64 = AtomicU64::new(0);
/// Set in a child forked while lens's path was on, until it sets up again.
static IN_CHILD: AtomicBool = AtomicBool::new(false);
/// Sampled spans that ended in such a child (never exported).
static DROPPED_IN_CHILD: AtomicU64 = AtomicU64::new(0);
static FIRST: Registry = Mutex::new(Vec::new());
/// Null for [`FIRST`], else a registry leaked by a set-up in a child.
static REPLACED: AtomicPtr<Registry> = AtomicPtr::new(std::ptr::null_mut());
/// The sink in use: null, or a leaked box never freed.
static SINK: AtomicPtr<Arc<dyn SpanSink>> = AtomicPtr::new(std::ptr::null_mut());
static INTERVAL_MS: AtomicU64 = AtomicU64::new(100);
/// The process whose collector thread runs (0: none yet).
static COLLECTOR_PID: AtomicU32 = AtomicU32::new(0);

/// Wakes the collector before its interval (its pipeline shut down).
static WAKE: Mutex<bool> = Mutex::new(false);
static WAKE_CV: Condvar = Condvar::new();

thread_local! {
    static LOCAL: RefCell<Option<Arc<Buffer>>> = const { RefCell::new(None) };
}

fn registry() -> MutexGuard<'static, Vec<Arc<Buffer>>> {
    // SAFETY: null or a leaked `Box<Registry>`, never freed.
    let reg = unsafe { REPLACED.load(Ordering::Acquire).as_ref() }.unwrap_or(&FIRST);
    reg.lock().unwrap_or_else(|e| e.into_inner())
}

fn sink() -> Option<&'static Arc<dyn SpanSink>> {
    // SAFETY: null or a leaked `Box<Arc<dyn SpanSink>>`, never freed.
    unsafe { SINK.load(Ordering::Acquire).as_ref() }
}

fn submit(spans: Vec<SpanData>) {
    if let Some(s) = sink() {
        if !spans.is_empty() {
            s.submit(spans);
        }
    }
}

/// Sets the sink finished spans go to and the collector's interval;
/// starts the collector thread if this process has none.
pub(super) fn set_sink(sink: Arc<dyn SpanSink>, interval: Duration) {
    if IN_CHILD.swap(false, Ordering::AcqRel) {
        DROPPED_IN_CHILD.store(0, Ordering::Relaxed);
        // a child that sets up again: a registry of its own
        let fresh: &'static Registry = Box::leak(Box::new(Mutex::new(Vec::new())));
        REPLACED.store(fresh as *const Registry as *mut Registry, Ordering::Release);
    }
    let ms = interval.as_millis().clamp(1, 1000) as u64;
    INTERVAL_MS.store(ms, Ordering::Relaxed);
    SINK.store(Box::into_raw(Box::new(sink)), Ordering::Release);
    start_collector();
}

/// Forgets `sink` if it is still the one in use.
pub(super) fn release_sink(sink: &Arc<dyn SpanSink>) {
    let current = SINK.load(Ordering::Acquire);
    // SAFETY: as in `sink()`.
    if let Some(c) = unsafe { current.as_ref() } {
        if Arc::ptr_eq(c, sink) {
            let _ = SINK.compare_exchange(
                current,
                std::ptr::null_mut(),
                Ordering::AcqRel,
                Ordering::Acquire,
            );
            wake_collector();
        }
    }
}

/// Spans that ended in this forked child since the fork (parent spans
/// still open at the fork), never exported.
pub(super) fn dropped_in_child() -> u64 {
    DROPPED_IN_CHILD.load(Ordering::Relaxed)
}

/// In a forked child (fork handler: atomic stores only).
pub(super) fn reset_after_fork() {
    DROPPED_IN_CHILD.store(0, Ordering::Relaxed);
    IN_CHILD.store(true, Ordering::Relaxed);
    EPOCH.fetch_add(1, Ordering::Relaxed);
    SINK.store(std::ptr::null_mut(), Ordering::Release);
}

fn start_collector() {
    let pid = std::process::id();
    if COLLECTOR_PID.swap(pid, Ordering::AcqRel) == pid {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("lens-span-collect".into())
        .spawn(move || collector(pid));
    if let Err(e) = spawned {
        COLLECTOR_PID.store(0, Ordering::Release);
        crate::diag::warn(format_args!(
            "cannot start the span collector thread ({e}); spans are handed over every {THRESHOLD} per thread and at flush"
        ));
    }
}

/// The collector thread: drains on a wake-up or the interval; exits once
/// no sink is set (the pipeline shut down), so no thread outlives it.
fn collector(pid: u32) {
    loop {
        let interval = Duration::from_millis(INTERVAL_MS.load(Ordering::Relaxed));
        let woken = WAKE.lock().unwrap_or_else(|e| e.into_inner());
        let (mut woken, _) = WAKE_CV
            .wait_timeout_while(woken, interval, |w| !*w)
            .unwrap_or_else(|e| e.into_inner());
        *woken = false;
        drop(woken);
        if sink().is_none() {
            let _ = COLLECTOR_PID.compare_exchange(pid, 0, Ordering::AcqRel, Ordering::Acquire);
            // a set-up that came in meanwhile found this thread still
            // running: keep serving it
            if sink().is_none()
                || COLLECTOR_PID
                    .compare_exchange(0, pid, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
            {
                return;
            }
        }
        drain();
    }
}

/// Puts a finished span into this thread's buffer; hands the buffer to the
/// sink when it is full.
pub(super) fn push(span: SpanData) {
    if IN_CHILD.load(Ordering::Relaxed) {
        if span.span_context.is_sampled() {
            DROPPED_IN_CHILD.fetch_add(1, Ordering::Relaxed);
        }
        return;
    }
    let mut span = Some(span);
    let full = LOCAL
        .try_with(|cell| {
            let mut slot = cell.try_borrow_mut().ok()?;
            let epoch = EPOCH.load(Ordering::Relaxed);
            if !matches!(&*slot, Some(b) if b.epoch == epoch) {
                *slot = Some(register(epoch));
            }
            let buf = slot.as_ref()?;
            let mut spans = buf.lock();
            spans.push(span.take()?);
            (spans.len() >= THRESHOLD)
                .then(|| std::mem::replace(&mut *spans, Vec::with_capacity(THRESHOLD)))
        })
        .ok()
        .flatten();
    if let Some(batch) = full {
        submit(batch);
    }
    // no buffer (the thread is exiting): hand it over alone
    if let Some(span) = span {
        submit(vec![span]);
    }
}

#[cold]
#[inline(never)]
fn wake_collector() {
    // never waits: if the collector holds the lock it is about to drain
    if let Ok(mut woken) = WAKE.try_lock() {
        *woken = true;
        WAKE_CV.notify_one();
    }
}

#[cold]
#[inline(never)]
fn register(epoch: u64) -> Arc<Buffer> {
    let buf = Arc::new(Buffer {
        epoch,
        spans: Mutex::new(Vec::with_capacity(THRESHOLD)),
    });
    registry().push(buf.clone());
    buf
}

/// Hands every thread's buffered spans to the sink; forgets the buffers of
/// threads that have exited.
pub(super) fn drain() {
    if IN_CHILD.load(Ordering::Relaxed) || sink().is_none() {
        return;
    }
    let epoch = EPOCH.load(Ordering::Relaxed);
    let mut batches = Vec::new();
    {
        let mut reg = registry();
        for buf in reg.iter().filter(|b| b.epoch == epoch) {
            let mut spans = buf.lock();
            if !spans.is_empty() {
                // the owner keeps a full-size buffer: no regrowth per batch
                let fresh = Vec::with_capacity(THRESHOLD.max(spans.len()));
                batches.push(std::mem::replace(&mut *spans, fresh));
            }
        }
        // the registry's reference is the last one once the thread exited
        // (kept while a span that arrived since is still in it)
        reg.retain(|b| b.epoch == epoch && (Arc::strong_count(b) > 1 || !b.lock().is_empty()));
    }
    for batch in batches {
        submit(batch);
    }
}
