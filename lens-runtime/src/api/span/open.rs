//! Spans that are still open, per thread, so that telemetry shutdown (or a
//! SIGTERM flush) can end them: run-wide spans are not lost when a job is
//! stopped. Tracking is on only while a lens pipeline exports.

use crate::api::semconv;
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
    /// `(id, context)` of the span in each slot; `None` for a free slot.
    slots: Vec<Option<(u64, Context)>>,
    /// The free slots (all below `slots.len()`), most recently freed last.
    free: Vec<usize>,
}

impl Spans {
    /// Stores a clone of `cx`; returns its slot and id.
    fn insert(&mut self, cx: &Context) -> (usize, u64) {
        self.last_id += 1;
        let id = self.last_id;
        while let Some(slot) = self.free.pop() {
            if let Some(entry @ None) = self.slots.get_mut(slot) {
                *entry = Some((id, cx.clone()));
                return (slot, id);
            }
        }
        self.slots.push(Some((id, cx.clone())));
        (self.slots.len() - 1, id)
    }

    /// Forgets the span with `id` in `slot`, if it is still there (not
    /// taken by [`truncate_all`]). Its context is dropped in place: the
    /// span's owner still holds it, so this never ends the span.
    fn remove(&mut self, slot: usize, id: u64) {
        let len = self.slots.len();
        let Some(entry) = self.slots.get_mut(slot) else {
            return;
        };
        if !matches!(entry, Some((i, _)) if *i == id) {
            return;
        }
        if slot + 1 == len {
            self.slots.pop();
        } else {
            *entry = None;
            self.free.push(slot);
        }
        if self.free.len() == self.slots.len() {
            // nothing open: start over (keeps the capacity)
            self.slots.clear();
            self.free.clear();
        }
    }

    /// How many spans are open.
    #[cfg(test)]
    fn live(&self) -> usize {
        self.slots.len().saturating_sub(self.free.len())
    }

    /// Takes every span out, most recently started first.
    fn take_all(&mut self) -> Vec<(u64, Context)> {
        self.free.clear();
        let mut spans: Vec<(u64, Context)> = std::mem::take(&mut self.slots)
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
#[derive(Debug)]
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
        self.list.lock().remove(self.slot, self.id);
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
    MINE.try_with(|mine| {
        let list = mine.list();
        let (slot, id) = list.lock().insert(cx);
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
        for (_, cx) in spans {
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
mod tests {
    use super::*;
    use opentelemetry::trace::{Tracer as _, TracerProvider as _};
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
    use std::time::Duration;

    /// The tests share the global registry and tracking switch.
    static SERIAL: Mutex<()> = Mutex::new(());

    struct Fixture {
        exporter: InMemorySpanExporter,
        provider: SdkTracerProvider,
        _serial: MutexGuard<'static, ()>,
    }

    impl Fixture {
        fn new() -> Self {
            let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
            let exporter = InMemorySpanExporter::default();
            let provider = SdkTracerProvider::builder()
                .with_simple_exporter(exporter.clone())
                .build();
            truncate_all("earlier test");
            set_tracking(true);
            Fixture {
                exporter,
                provider,
                _serial: serial,
            }
        }

        /// A started span (not ended), as a context.
        fn start(&self, name: &str) -> Context {
            let span = self.provider.tracer("t").start(name.to_owned());
            Context::new().with_span(span)
        }

        fn finished(&self) -> Vec<String> {
            let spans = self.exporter.get_finished_spans().unwrap();
            spans.iter().map(|s| s.name.to_string()).collect()
        }
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            set_tracking(false);
        }
    }

    /// This thread's list and how many slots it has.
    fn my_slots() -> (usize, usize) {
        MINE.with(|m| {
            let g = m.list().lock();
            (g.live(), g.slots.len())
        })
    }

    #[test]
    fn ending_oldest_first_unregisters_everything() {
        let f = Fixture::new();
        let spans: Vec<(Context, Registration)> = (0..20_000)
            .map(|i| {
                let cx = f.start(&format!("s{i}"));
                let reg = register(&cx).expect("tracking is on");
                (cx, reg)
            })
            .collect();
        assert_eq!(my_slots(), (20_000, 20_000));
        for (i, (cx, reg)) in spans.into_iter().enumerate() {
            cx.span().end();
            reg.unregister();
            if i == 9_999 {
                // the freed slots wait for reuse; nothing moved
                assert_eq!(my_slots(), (10_000, 20_000));
            }
        }
        assert_eq!(my_slots(), (0, 0), "all unregistered, slab started over");
        assert_eq!(truncate_all("test"), 0);
        assert_eq!(f.finished().len(), 20_000);
    }

    #[test]
    fn freed_slots_are_reused_and_truncation_is_innermost_first() {
        let f = Fixture::new();
        let a = f.start("a");
        let _ra = register(&a).unwrap();
        let b = f.start("b");
        let rb = register(&b).unwrap();
        let c = f.start("c");
        let _rc = register(&c).unwrap();
        b.span().end();
        rb.unregister();
        let d = f.start("d"); // takes b's slot
        let rd = register(&d).unwrap();
        assert_eq!(rd.slot, 1);
        assert_eq!(my_slots(), (3, 3));
        assert_eq!(truncate_all("test"), 3);
        assert_eq!(f.finished(), ["b", "d", "c", "a"]);
        // a registration whose slot was taken by truncation: a no-op,
        // also once a new span has the slot
        let e = f.start("e");
        let re = register(&e).unwrap();
        assert_eq!(re.slot, 0);
        _ra.unregister();
        assert_eq!(my_slots(), (1, 1), "e is still registered");
        re.unregister();
        assert_eq!(my_slots(), (0, 0));
        e.span().end();
    }

    #[test]
    fn any_end_order_keeps_the_slab_at_the_most_open() {
        let f = Fixture::new();
        let mut open: Vec<Registration> = Vec::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for i in 0..5_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if open.len() < 64 && (open.is_empty() || x.is_multiple_of(2)) {
                let cx = f.start(&format!("s{i}"));
                open.push(register(&cx).unwrap());
            } else {
                let reg = open.swap_remove((x % open.len() as u64) as usize);
                reg.unregister();
            }
            let (live, slots) = my_slots();
            assert_eq!(live, open.len());
            assert!(slots <= 64, "{slots}");
        }
        let n = open.len();
        assert_eq!(truncate_all("test"), n);
    }

    #[test]
    fn reset_after_fork_forgets_without_ending() {
        let f = Fixture::new();
        let cx = f.start("parent.open");
        let reg = register(&cx).unwrap();
        reset_after_fork();
        assert!(register(&cx).is_none(), "tracking is off");
        assert_eq!(truncate_all("child"), 0);
        assert!(cx.span().is_recording(), "not ended");
        reg.unregister(); // a no-op
                          // tracking on again: this thread gets a new list
        set_tracking(true);
        let child = f.start("child.open");
        let _rc = register(&child).unwrap();
        assert_eq!(my_slots(), (1, 1));
        assert_eq!(truncate_all("child"), 1);
        assert_eq!(f.finished(), ["child.open"]);
        cx.span().end();
    }

    #[test]
    fn reset_after_fork_never_blocks_on_held_locks() {
        let f = Fixture::new();
        let cx = f.start("parent.open");
        let reg = register(&cx).unwrap();
        // as in a child forked while other threads held the registry
        // and a list: both stay locked for ever
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let held_registry = registry();
            let held_list = reg.list.lock();
            reset_after_fork();
            reg.unregister(); // must not lock the list
            let _ = tx.send(());
            drop((held_list, held_registry));
        });
        rx.recv_timeout(Duration::from_secs(30))
            .expect("reset_after_fork and unregister do not block");
        // the new registry works
        set_tracking(true);
        let child = f.start("child.open");
        let _rc = register(&child).unwrap();
        assert_eq!(truncate_all("child"), 1);
        assert_eq!(f.finished(), ["child.open"]);
        assert!(cx.span().is_recording(), "the parent's span is not ended");
        cx.span().end();
    }
}
