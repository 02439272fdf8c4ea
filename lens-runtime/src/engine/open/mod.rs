//! Spans that are still open, per thread, so that telemetry shutdown (or a
//! SIGTERM flush) can end them: run-wide spans are not lost when a job is
//! stopped. Tracking is on only while a lens pipeline exports.
//!
//! On lens's own span path (`NEMO_LENS_SPAN_PATH=lens`) the list is also
//! where a span's record lives while it is open, and where it waits, in
//! the same slot, once finished, until its batch is handed over
//! ([`recorder`](crate::engine::recorder)): one uncontended lock to start a span, one
//! to end it, and no copy of the record on the span's thread.

mod lock;
#[cfg(feature = "sdk-core")]
pub(crate) mod record_slots;
pub(crate) mod slab;
#[cfg(test)]
mod tests;

use crate::engine::fork_fresh::ForkFresh;
use crate::engine::names;
#[cfg(feature = "sdk-core")]
use crate::engine::record::Record;
use lock::SpinLock;
use opentelemetry::trace::TraceContextExt;
use opentelemetry::{Context, KeyValue};
use slab::Slab;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

static TRACKING: AtomicBool = AtomicBool::new(false);

/// The epoch of the registry in use. [`reset_after_fork`] starts a new
/// one: lists of an earlier epoch belong to the parent process and are
/// never locked again (a thread that no longer exists may hold them).
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// The registry in use: the one a process starts with, else one that
/// [`reset_after_fork`] made because the previous one was locked.
static REGISTRY: ForkFresh<Mutex<Registry>> = ForkFresh::new(Mutex::new(Registry::new(0)));

/// Every list of the current epoch, and those of threads that have
/// exited (reused by the next new thread, so thread churn does not grow
/// the registry). Lists live for the whole process: a registration is a
/// plain `&'static` reference, no reference count per span.
struct Registry {
    epoch: u64,
    all: Vec<&'static OpenList>,
    free: Vec<&'static OpenList>,
}

impl Registry {
    const fn new(epoch: u64) -> Self {
        Registry {
            epoch,
            all: Vec::new(),
            free: Vec::new(),
        }
    }
}

fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.get().lock().unwrap_or_else(|e| e.into_inner())
}

/// A list of the registry in use (a free one if any).
fn take_list() -> &'static OpenList {
    let mut reg = registry();
    if let Some(list) = reg.free.pop() {
        return list;
    }
    let list: &'static OpenList = Box::leak(Box::new(OpenList {
        epoch: reg.epoch,
        spans: SpinLock::default(),
    }));
    reg.all.push(list);
    list
}

/// The spans one thread started that have not ended yet. Only that
/// thread (and the rare shutdown) takes the lock, so it is uncontended.
///
/// Aligned to two cache lines, so that no other allocation shares its
/// lines: its thread writes them twice a span (lock, slots, list), and a
/// neighbour read by another thread (the collector reading its sink, say)
/// would miss every time.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct OpenList {
    /// The registry epoch the list belongs to.
    epoch: u64,
    spans: SpinLock<Spans>,
}

/// One thread's open spans: those the OpenTelemetry SDK built (their
/// contexts) and those of lens's own path (their records), in two slabs
/// so that neither pays for the other's size.
#[derive(Debug, Default)]
struct Spans {
    /// The id of the last span registered: ids increase from 1 and are
    /// never reused, so they order spans by start and tell a slot's
    /// current span from an earlier one.
    last_id: u64,
    contexts: Slab<Context>,
    #[cfg(feature = "sdk-core")]
    records: Slab<Record>,
    /// Records of lens's span path ended by truncation (and those that
    /// had ended in `records` before), oldest first, until the collector
    /// takes them (ahead of the finished ones of `records`, which ended after);
    /// a span that ends stays in `records`, marked finished.
    #[cfg(feature = "sdk-core")]
    set_aside: Vec<Record>,
}

/// An open span taken out for truncation: built by the OpenTelemetry SDK
/// (its context), or by lens's own recorder (its record).
#[allow(clippy::large_enum_variant)] // only at truncation
enum Entry {
    Context(Context),
    #[cfg(feature = "sdk-core")]
    Record(Record),
}

impl Spans {
    fn next_id(&mut self) -> u64 {
        self.last_id += 1;
        self.last_id
    }

    /// Takes every open span out, most recently started first (the
    /// records that have ended are set aside).
    fn take_all(&mut self) -> Vec<(u64, Entry)> {
        #[cfg(feature = "sdk-core")]
        if self.records.finished() > 0 {
            let set_aside = std::mem::take(&mut self.set_aside);
            self.set_aside = self.records.take_finished().into_vec_in(set_aside);
        }
        let mut spans: Vec<(u64, Entry)> = self
            .contexts
            .take_all()
            .map(|(id, c)| (id, Entry::Context(c)))
            .collect();
        #[cfg(feature = "sdk-core")]
        spans.extend(
            self.records
                .take_all()
                .map(|(id, r)| (id, Entry::Record(r))),
        );
        spans.sort_unstable_by_key(|s| std::cmp::Reverse(s.0));
        spans
    }
}

impl OpenList {
    #[inline(always)]
    fn lock(&self) -> lock::SpinGuard<'_, Spans> {
        self.spans.lock()
    }

    /// Whether the list belongs to the registry in use (not to the
    /// parent of a forked process).
    #[inline(always)]
    fn is_current(&self) -> bool {
        self.epoch == EPOCH.load(Ordering::Relaxed)
    }
}

thread_local! {
    /// This thread's list, taken when the thread first registers a span
    /// and handed back to the free pool when the thread exits (spans still
    /// open in it stay registered until they end). A thread local with no
    /// destructor, so that reading it checks no state of its own (a
    /// thread local with a destructor checks its registration on every
    /// read); [`HandBack`] hands the list back.
    static MINE: Cell<Option<&'static OpenList>> = const { Cell::new(None) };
    static HAND_BACK: HandBack = const { HandBack };
}

/// Hands this thread's list back when the thread exits: touched (and its
/// destructor registered) when the thread takes a list.
struct HandBack;

impl Drop for HandBack {
    fn drop(&mut self) {
        if let Some(list) = MINE.take().filter(|l| l.is_current()) {
            registry().free.push(list);
        }
    }
}

/// This thread's list (`None` while the thread is exiting).
#[inline(always)]
fn mine() -> Option<&'static OpenList> {
    match MINE.get() {
        Some(list) if list.is_current() => Some(list),
        _ => new_list(),
    }
}

/// Takes a list for this thread: its first span, or its first after a
/// fork (the list it had is the parent's). `None` once the thread is
/// exiting and its list was handed back.
#[cold]
#[inline(never)]
fn new_list() -> Option<&'static OpenList> {
    HAND_BACK.try_with(|_| ()).ok()?;
    let list = take_list();
    MINE.set(Some(list));
    Some(list)
}

/// An open span's place in the registry (the span may move to another
/// thread; it unregisters from the list it was registered in).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Registration {
    list: &'static OpenList,
    slot: usize,
    id: u64,
}

impl Registration {
    /// Forgets the span: O(1), in whatever order spans end. A no-op if
    /// [`truncate_all`] or [`reset_after_fork`] already forgot it.
    pub(crate) fn unregister(self) {
        if !self.list.is_current() {
            return; // registered in the parent process
        }
        let removed = self.list.lock().contexts.remove(self.slot, self.id);
        drop(removed); // a context: outside the lock
    }
}

#[inline]
pub(crate) fn register(cx: &Context) -> Option<Registration> {
    if !TRACKING.load(Ordering::Relaxed) {
        return None;
    }
    register_slow(cx)
}

#[inline(never)]
fn register_slow(cx: &Context) -> Option<Registration> {
    let cx = cx.clone();
    register_with(|spans, id| spans.contexts.insert(id, cx))
}

/// Registers a span in this thread's list: `put` stores it under the new
/// id and returns its slot (`None` while the thread is exiting).
fn register_with(put: impl FnOnce(&mut Spans, u64) -> usize) -> Option<Registration> {
    let list = mine()?;
    let mut spans = list.lock();
    let id = spans.next_id();
    let slot = put(&mut spans, id);
    Some(Registration { list, slot, id })
}

#[cfg_attr(not(feature = "sdk-core"), allow(dead_code))] // only setup turns it on
pub(crate) fn set_tracking(on: bool) {
    TRACKING.store(on, Ordering::Relaxed);
}

/// Ends every span still open, innermost (most recently started) first
/// within each thread's list, marking each `nemo.span.truncated = true`
/// with an event of the same name. Returns how many were ended.
#[cfg_attr(not(feature = "sdk-core"), allow(dead_code))] // only setup and the signal hook
pub(crate) fn truncate_all(reason: &str) -> usize {
    let lists: Vec<&'static OpenList> = registry().all.clone();
    let mut n = 0;
    for list in lists {
        let spans = list.lock().take_all();
        for (_, entry) in spans {
            #[allow(clippy::infallible_destructuring_match)] // one variant without sdk-core
            let cx = match entry {
                Entry::Context(cx) => cx,
                #[cfg(feature = "sdk-core")]
                Entry::Record(mut rec) => {
                    rec.truncate(reason);
                    list.lock().set_aside.push(rec);
                    n += 1;
                    continue;
                }
            };
            let span = cx.span();
            if !span.is_recording() {
                continue;
            }
            span.set_attribute(KeyValue::new(names::SPAN_TRUNCATED, true));
            span.add_event(
                names::SPAN_TRUNCATED,
                vec![KeyValue::new(
                    names::SPAN_TRUNCATED_REASON,
                    reason.to_owned(),
                )],
            );
            span.end();
            n += 1;
        }
    }
    n
}

/// For the child of a `fork` (a `pthread_atfork` child handler): turns
/// tracking off and forgets every span registered in any list, without
/// ending them, so that the child never exports the parent's open spans
/// through [`truncate_all`]. Their registrations become no-ops.
///
/// It never blocks: in the child, a lock held at fork time by another
/// parent thread stays locked forever, so it only tries the registry's
/// lock — if that is held, it leaks a new, empty registry instead — and
/// never locks a list. The forgotten lists and their spans are leaked,
/// never dropped (dropping the last reference to an SDK span ends it).
/// The thread of the child gets a new list when tracking is turned on
/// again. Calling it in a process with other threads is safe, but spans
/// they have open are forgotten too.
#[cfg_attr(not(feature = "sdk-core"), allow(dead_code))] // called by the fork handler
pub(crate) fn reset_after_fork() {
    TRACKING.store(false, Ordering::Relaxed);
    match REGISTRY.get().try_lock() {
        Ok(mut reg) => forget_lists(&mut reg),
        Err(TryLockError::Poisoned(e)) => forget_lists(&mut e.into_inner()),
        Err(TryLockError::WouldBlock) => {
            let epoch = EPOCH.load(Ordering::Relaxed).wrapping_add(1);
            REGISTRY.replace(Mutex::new(Registry::new(epoch)));
            EPOCH.store(epoch, Ordering::Relaxed);
        }
    }
}

/// Starts a new epoch in `reg`, forgetting its lists.
fn forget_lists(reg: &mut Registry) {
    reg.epoch = reg.epoch.wrapping_add(1);
    reg.all.clear();
    reg.free.clear();
    EPOCH.store(reg.epoch, Ordering::Relaxed);
}
