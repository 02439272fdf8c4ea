//! Spans that are still open, per thread, so that telemetry shutdown (or a
//! SIGTERM flush) can end them: run-wide spans are not lost when a job is
//! stopped. Tracking is on only while a lens pipeline exports.
//!
//! On lens's own span path (`NEMO_LENS_SPAN_PATH=lens`) the list is also
//! where a span's record lives while it is open, and where it waits once
//! finished until the collector takes it ([`record`](super::record)): one
//! uncontended lock to start a span, one to end it.

use crate::api::semconv;
#[cfg(feature = "sdk-core")]
use crate::api::span::record::data::Record;
use opentelemetry::trace::TraceContextExt;
use opentelemetry::{Context, KeyValue};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

static TRACKING: AtomicBool = AtomicBool::new(false);

/// The epoch of the registry in use. [`reset_after_fork`] starts a new
/// one: lists of an earlier epoch belong to the parent process and are
/// never locked again (a thread that no longer exists may hold them).
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// The registry a process starts with.
static FIRST: Mutex<Registry> = Mutex::new(Registry::new(0));

/// The registry in use: null for [`FIRST`], else one that
/// [`reset_after_fork`] leaked because the previous one was locked.
static REPLACED: AtomicPtr<Mutex<Registry>> = AtomicPtr::new(std::ptr::null_mut());

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

fn registry_mutex() -> &'static Mutex<Registry> {
    // SAFETY: the pointer is null or a leaked `Box<Mutex<Registry>>`,
    // never freed.
    unsafe { REPLACED.load(Ordering::Acquire).as_ref() }.unwrap_or(&FIRST)
}

fn registry() -> MutexGuard<'static, Registry> {
    registry_mutex().lock().unwrap_or_else(|e| e.into_inner())
}

/// A list of the registry in use (a free one if any).
fn take_list() -> &'static OpenList {
    let mut reg = registry();
    if let Some(list) = reg.free.pop() {
        return list;
    }
    let list: &'static OpenList = Box::leak(Box::new(OpenList {
        epoch: reg.epoch,
        spans: Mutex::default(),
    }));
    reg.all.push(list);
    list
}

/// The spans one thread started that have not ended yet. Only that
/// thread (and the rare shutdown) takes the lock, so it is uncontended.
#[derive(Debug)]
pub(crate) struct OpenList {
    /// The registry epoch the list belongs to.
    epoch: u64,
    spans: Mutex<Spans>,
}

/// A slab of open spans: a span keeps its slot until it ends, so ending
/// one is O(1) whatever the order spans end in. A freed slot is reused
/// by the next span, and the top slot is popped, so spans that end
/// innermost first use the slab as a stack; no allocation once the slab
/// has grown to the most spans open at once.
#[derive(Debug, Default)]
struct Spans {
    /// The id of the last span registered: ids increase from 1 and are
    /// never reused, so they order spans by start and tell a slot's
    /// current span from an earlier one.
    last_id: u64,
    /// `(id, span)` of the span in each slot; `None` for a free slot.
    slots: Vec<Option<(u64, Entry)>>,
    /// The free slots (all below `slots.len()`), most recently freed last.
    free: Vec<usize>,
    /// Finished records of lens's span path, oldest first, until the
    /// collector takes them.
    #[cfg(feature = "sdk-core")]
    done: Vec<Record>,
}

/// An open span: built by the OpenTelemetry SDK (its context), or by lens's
/// own recorder (its record).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // records stay inline: no allocation per span
enum Entry {
    Cx(Context),
    #[cfg(feature = "sdk-core")]
    Rec(Record),
}

impl Spans {
    /// Stores `entry`; returns its slot and id.
    fn insert(&mut self, entry: Entry) -> (usize, u64) {
        self.last_id += 1;
        let id = self.last_id;
        while let Some(slot) = self.free.pop() {
            if let Some(free @ None) = self.slots.get_mut(slot) {
                *free = Some((id, entry));
                return (slot, id);
            }
        }
        self.slots.push(Some((id, entry)));
        (self.slots.len() - 1, id)
    }

    /// The span with `id` in `slot`, if it is still there.
    #[cfg(feature = "sdk-core")]
    fn get_mut(&mut self, slot: usize, id: u64) -> Option<&mut Entry> {
        match self.slots.get_mut(slot) {
            Some(Some((i, entry))) if *i == id => Some(entry),
            _ => None,
        }
    }

    /// Takes the span with `id` in `slot` out, if it is still there (not
    /// taken by [`truncate_all`]). A context is dropped by the caller: the
    /// span's owner still holds it, so this never ends the span.
    fn remove(&mut self, slot: usize, id: u64) -> Option<Entry> {
        let len = self.slots.len();
        let entry = self.slots.get_mut(slot)?;
        if !matches!(entry, Some((i, _)) if *i == id) {
            return None;
        }
        let taken = if slot + 1 == len {
            self.slots.pop().flatten()
        } else {
            self.free.push(slot);
            entry.take()
        };
        if self.free.len() == self.slots.len() {
            // nothing open: start over (keeps the capacity)
            self.slots.clear();
            self.free.clear();
        }
        taken.map(|(_, e)| e)
    }

    /// How many spans are open.
    #[cfg(test)]
    fn live(&self) -> usize {
        self.slots.len().saturating_sub(self.free.len())
    }

    /// Takes every span out, most recently started first.
    fn take_all(&mut self) -> Vec<(u64, Entry)> {
        self.free.clear();
        let mut spans: Vec<(u64, Entry)> = std::mem::take(&mut self.slots)
            .into_iter()
            .flatten()
            .collect();
        spans.sort_unstable_by_key(|s| std::cmp::Reverse(s.0));
        spans
    }
}

impl OpenList {
    fn lock(&self) -> MutexGuard<'_, Spans> {
        self.spans.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the list belongs to the registry in use (not to the
    /// parent of a forked process).
    fn is_current(&self) -> bool {
        self.epoch == EPOCH.load(Ordering::Relaxed)
    }
}

/// This thread's list, taken when the thread first registers a span and
/// handed back to the free pool when the thread exits (spans still open
/// in it stay registered until they end).
struct Mine(Cell<Option<&'static OpenList>>);

impl Mine {
    fn list(&self) -> &'static OpenList {
        match self.0.get() {
            Some(list) if list.is_current() => list,
            _ => {
                let list = take_list();
                self.0.set(Some(list));
                list
            }
        }
    }
}

impl Drop for Mine {
    fn drop(&mut self) {
        if let Some(list) = self.0.get().filter(|l| l.is_current()) {
            registry().free.push(list);
        }
    }
}

thread_local! {
    static MINE: Mine = const { Mine(Cell::new(None)) };
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
        let removed = self.list.lock().remove(self.slot, self.id);
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
    insert(Entry::Cx(cx.clone()))
}

fn insert(entry: Entry) -> Option<Registration> {
    MINE.try_with(|mine| {
        let list = mine.list();
        let (slot, id) = list.lock().insert(entry);
        Registration { list, slot, id }
    })
    .ok()
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
                Entry::Cx(cx) => cx,
                #[cfg(feature = "sdk-core")]
                Entry::Rec(mut rec) => {
                    rec.truncate(reason);
                    list.lock().done.push(rec);
                    n += 1;
                    continue;
                }
            };
            let span = cx.span();
            if !span.is_recording() {
                continue;
            }
            span.set_attribute(KeyValue::new(semconv::NEMO_SPAN_TRUNCATED, true));
            span.add_event(
                semconv::NEMO_SPAN_TRUNCATED,
                vec![KeyValue::new(
                    semconv::NEMO_SPAN_TRUNCATED_REASON,
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
    match registry_mutex().try_lock() {
        Ok(mut reg) => forget_lists(&mut reg),
        Err(TryLockError::Poisoned(e)) => forget_lists(&mut e.into_inner()),
        Err(TryLockError::WouldBlock) => {
            let epoch = EPOCH.load(Ordering::Relaxed).wrapping_add(1);
            let fresh: &'static Mutex<Registry> =
                Box::leak(Box::new(Mutex::new(Registry::new(epoch))));
            REPLACED.store(std::ptr::from_ref(fresh).cast_mut(), Ordering::Release);
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

#[cfg(test)]
mod tests;

/// Lens's own span path: the open records and finished batches of each
/// thread's list.
#[cfg(feature = "sdk-core")]
pub(crate) mod records {
    use super::{registry, Entry, OpenList, Record, Registration};

    /// Stores an open record in this thread's list (`None` while the
    /// thread is exiting).
    pub(crate) fn insert(rec: Record) -> Option<Registration> {
        super::insert(Entry::Rec(rec))
    }

    impl Registration {
        /// Runs `f` on the record, if it is still open (and was made in
        /// this process).
        pub(crate) fn with_record<R>(&self, f: impl FnOnce(&mut Record) -> R) -> Option<R> {
            if !self.list.is_current() {
                return None;
            }
            match self.list.lock().get_mut(self.slot, self.id) {
                Some(Entry::Rec(rec)) => Some(f(rec)),
                _ => None,
            }
        }

        /// Ends the record (`finish` sets its end), if it is still open:
        /// it joins the list's finished records. Returns them all once
        /// there are `threshold`; `Err(sampled)` if the span was made
        /// before a fork (never exported).
        pub(crate) fn end_record(
            &self,
            threshold: usize,
            finish: impl FnOnce(&mut Record),
        ) -> Result<Option<Vec<Record>>, ()> {
            if !self.list.is_current() {
                return Err(());
            }
            let mut spans = self.list.lock();
            let Some(Entry::Rec(mut rec)) = spans.remove(self.slot, self.id) else {
                return Ok(None);
            };
            finish(&mut rec);
            spans.done.push(rec);
            Ok((spans.done.len() >= threshold)
                .then(|| std::mem::replace(&mut spans.done, Vec::with_capacity(threshold))))
        }
    }

    /// The open record of the span `trace_id`/`span_id`: looked for in this
    /// thread's list first, then in every list (a span current as its ids
    /// only, `NEMO_LENS_OTEL_CONTEXT=ids`).
    pub(crate) fn find(
        trace_id: opentelemetry::trace::TraceId,
        span_id: opentelemetry::trace::SpanId,
    ) -> Option<Registration> {
        let in_list = |list: &'static OpenList| {
            if !list.is_current() {
                return None;
            }
            let spans = list.lock();
            spans
                .slots
                .iter()
                .enumerate()
                .find_map(|(slot, e)| match e {
                    Some((id, Entry::Rec(r))) if r.is(trace_id, span_id) => Some(Registration {
                        list,
                        slot,
                        id: *id,
                    }),
                    _ => None,
                })
        };
        let mine = super::MINE.try_with(|m| m.0.get()).ok().flatten();
        if let Some(found) = mine.and_then(in_list) {
            return Some(found);
        }
        let lists: Vec<&'static OpenList> = registry().all.clone();
        lists
            .into_iter()
            .filter(|l| Some(std::ptr::from_ref(*l)) != mine.map(std::ptr::from_ref))
            .find_map(in_list)
    }

    /// Takes every list's finished records (lists of this process only).
    pub(crate) fn take_done() -> Vec<Vec<Record>> {
        let lists: Vec<&'static OpenList> = registry().all.clone();
        lists
            .into_iter()
            .filter(|l| l.is_current())
            .filter_map(|l| {
                let mut spans = l.lock();
                (!spans.done.is_empty()).then(|| std::mem::take(&mut spans.done))
            })
            .collect()
    }
}
