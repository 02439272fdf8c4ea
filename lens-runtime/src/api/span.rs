//! Span guards: creation, context attachment, panic marking, end on drop.

use crate::api::attr::AttributeValue;
use opentelemetry::trace::{SpanBuilder, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, ContextGuard, Key, KeyValue};
use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt::{self, Display};
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

/// Instrumentation scope name of every lens span.
pub const SCOPE_NAME: &str = "lens";

#[cfg(feature = "sdk")]
mod slot {
    use opentelemetry_sdk::trace::SdkTracer;
    use std::sync::atomic::{AtomicPtr, Ordering};

    // The tracer lens spans are created with once a provider is installed.
    // Each install leaks one small tracer (installs are rare: setup, tests);
    // in exchange the hot path is one acquire load, no lock, no refcount.
    static TRACER: AtomicPtr<SdkTracer> = AtomicPtr::new(std::ptr::null_mut());

    #[inline]
    pub(super) fn get() -> Option<&'static SdkTracer> {
        // SAFETY: the pointer is null or a leaked `Box<SdkTracer>`, never freed.
        unsafe { TRACER.load(Ordering::Acquire).as_ref() }
    }

    pub(super) fn set(tracer: Option<SdkTracer>) {
        let ptr = tracer.map_or(std::ptr::null_mut(), |t| Box::into_raw(Box::new(t)));
        TRACER.store(ptr, Ordering::Release);
    }
}

/// Installs `provider` as the provider of lens spans and as the global
/// OpenTelemetry tracer provider. `setup_telemetry` does this for you; tests
/// use it with an in-memory exporter.
///
/// ```
/// use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
/// let exporter = InMemorySpanExporter::default();
/// let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
/// lens_runtime::span::set_tracer_provider(&provider);
/// drop(lens_runtime::span::start_span("doc.span", Vec::new()));
/// assert_eq!(exporter.get_finished_spans().unwrap()[0].name, "doc.span");
/// # lens_runtime::span::clear_tracer_provider();
/// ```
#[cfg(feature = "sdk")]
pub fn set_tracer_provider(provider: &opentelemetry_sdk::trace::SdkTracerProvider) {
    use opentelemetry::trace::TracerProvider as _;
    let scope = opentelemetry::InstrumentationScope::builder(SCOPE_NAME)
        .with_version(env!("CARGO_PKG_VERSION"))
        .build();
    install_panic_hook();
    slot::set(Some(provider.tracer_with_scope(scope)));
    opentelemetry::global::set_tracer_provider(provider.clone());
}

/// Forgets the provider installed by [`set_tracer_provider`]; lens spans go to
/// the global OpenTelemetry provider again.
///
/// ```
/// lens_runtime::span::clear_tracer_provider();
/// ```
#[cfg(feature = "sdk")]
pub fn clear_tracer_provider() {
    slot::set(None);
}

/// In a forked child: forget the parent's tracer (one atomic store).
#[cfg(feature = "sdk")]
pub(crate) fn forget_tracer_after_fork() {
    slot::set(None);
}

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Set once any panic message was recorded, so that span ends can forget a
/// stale message cheaply (one relaxed load while no panic ever happened).
static PANIC_RECORDED: AtomicBool = AtomicBool::new(false);

/// Installs (once) a panic hook that remembers the panic message for the
/// guards the panic unwinds through, then calls the previous hook. Called by
/// setup and [`set_tracer_provider`], never on the span path, and never from
/// a panicking thread (taking the hook there aborts the process).
#[cfg_attr(not(feature = "sdk"), allow(dead_code))] // setup and set_tracer_provider
pub(crate) fn install_panic_hook() {
    static HOOK: Once = Once::new();
    if std::thread::panicking() {
        return;
    }
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "Box<dyn Any>".to_owned());
            let _ = LAST_PANIC.try_with(|p| {
                if let Ok(mut p) = p.try_borrow_mut() {
                    *p = Some(msg);
                }
            });
            PANIC_RECORDED.store(true, Ordering::Relaxed);
            previous(info);
        }));
    });
}

/// The message of the panic unwinding through a span: the one the hook
/// recorded on this thread. A panic re-raised with `resume_unwind` does not
/// run the hook; a message left from an earlier, caught panic is forgotten
/// at the first span start or end outside a panic, so it is not reused for
/// it (the span is labelled "panicked").
fn panic_message() -> String {
    LAST_PANIC
        .try_with(|p| p.try_borrow().ok().and_then(|p| p.clone()))
        .ok()
        .flatten()
        .unwrap_or_else(|| "panicked".to_owned())
}

#[cold]
#[inline(never)]
fn forget_panic_message() {
    let _ = LAST_PANIC.try_with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            *p = None;
        }
    });
}

// Both inline into the `#[inline(never)]` entry points, so the 120-byte
// `SpanBuilder` is not passed through an extra out-of-line call.
#[inline(always)]
fn start_context(name: Cow<'static, str>, attributes: Vec<KeyValue>) -> Context {
    start_builder(SpanBuilder::from_name(name).with_attributes(attributes))
}

#[inline(always)]
fn start_builder(builder: SpanBuilder) -> Context {
    #[cfg(feature = "sdk")]
    if let Some(tracer) = slot::get() {
        return Context::map_current(|parent| {
            let span = tracer.build_with_context(builder, parent);
            parent.with_span(span)
        });
    }
    let tracer = opentelemetry::global::tracer(SCOPE_NAME);
    Context::map_current(|parent| {
        let span = tracer.build_with_context(builder, parent);
        parent.with_span(span)
    })
}

/// The status of a span, as set by [`SpanGuard::set_status`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpanStatus {
    /// The default: no status was set.
    Unset,
    /// The operation completed successfully.
    Ok,
    /// The operation failed, with a description.
    Error(Cow<'static, str>),
}

/// A started span that is not attached to the current context: it can move
/// between threads (e.g. inside a future) and ends when dropped. Attach it for
/// a scope with [`LensSpan::enter`]. A panic unwinding through its drop marks
/// it ERROR with the panic message.
///
/// ```
/// let span = lens_runtime::span::start_detached("work", Vec::new());
/// std::thread::spawn(move || {
///     let _g = span.enter(); // current on this thread until `_g` drops
/// }).join().unwrap();
/// ```
pub struct LensSpan {
    // Dropped by hand in `drop_span` / `drop_guard`, so that the drop glue of
    // a `LensSpan`, a `SpanGuard` or an `Option` of either is one inlined
    // call (and, for `None`, one test) at the instrumented site.
    inner: ManuallyDrop<SpanInner>,
}

struct SpanInner {
    cx: Context,
    open: Option<open::Registration>,
}

impl SpanInner {
    /// Marks a panic unwinding through the span, ends it and forgets its
    /// open-span registration; the context itself is dropped by the caller.
    #[inline(always)]
    fn finish(&mut self) {
        if std::thread::panicking() {
            record_exception(&self.cx, "panic", panic_message());
        } else if PANIC_RECORDED.load(Ordering::Relaxed) {
            forget_panic_message();
        }
        self.cx.span().end();
        if let Some(reg) = self.open.take() {
            reg.unregister();
        }
    }
}

impl fmt::Debug for LensSpan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LensSpan")
            .field("span_context", self.cx().span().span_context())
            .finish()
    }
}

/// Starts a span, child of the current context, without attaching it.
#[doc(hidden)]
#[inline(never)]
pub fn start_detached(name: impl Into<Cow<'static, str>>, attributes: Vec<KeyValue>) -> LensSpan {
    LensSpan::new(start_context(name.into(), attributes))
}

/// Starts a span from a full builder (links, kind, …), child of the current
/// context, without attaching it.
#[doc(hidden)]
pub fn start_detached_builder(builder: SpanBuilder) -> LensSpan {
    LensSpan::new(start_builder(builder))
}

/// Starts a span, child of the current context, and makes it current until
/// the returned guard drops. This is what the macros expand to.
#[doc(hidden)]
#[inline(never)]
pub fn start_span(name: impl Into<Cow<'static, str>>, attributes: Vec<KeyValue>) -> SpanGuard {
    LensSpan::new(start_context(name.into(), attributes)).enter()
}

impl LensSpan {
    #[inline]
    fn new(cx: Context) -> Self {
        if PANIC_RECORDED.load(Ordering::Relaxed) && !std::thread::panicking() {
            forget_panic_message();
        }
        let open = open::register(&cx);
        LensSpan {
            inner: ManuallyDrop::new(SpanInner { cx, open }),
        }
    }

    #[inline(always)]
    fn cx(&self) -> &Context {
        &self.inner.cx
    }

    /// Makes this span the current one on this thread until the guard drops;
    /// the span ends when the guard drops.
    ///
    /// ```
    /// let g = lens_runtime::span::start_detached("x", Vec::new()).enter();
    /// g.set_attribute("n", 1);
    /// ```
    pub fn enter(self) -> SpanGuard {
        let attached = self.cx().clone().attach();
        SpanGuard {
            span: ManuallyDrop::new(self),
            attached: ManuallyDrop::new(attached),
        }
    }

    /// The OpenTelemetry context holding this span (for propagation).
    ///
    /// ```
    /// use lens_runtime::otel::trace::TraceContextExt;
    /// let s = lens_runtime::span::start_detached("x", Vec::new());
    /// let _sc = s.context().span().span_context().clone();
    /// ```
    pub fn context(&self) -> &Context {
        self.cx()
    }

    /// Sets `key = value` (skipped for `None`; string values under a
    /// redacted key become `[REDACTED]`).
    ///
    /// ```
    /// let s = lens_runtime::span::start_detached("x", Vec::new());
    /// s.set_attribute("loss", 0.25);
    /// s.set_attribute("token", "abc"); // recorded as "[REDACTED]"
    /// ```
    pub fn set_attribute<V: AttributeValue>(&self, key: impl Into<Key>, value: V) {
        let key = key.into();
        if let Some(value) = crate::api::attr::value_for_key(key.as_str(), &value) {
            self.cx().span().set_attribute(KeyValue::new(key, value));
        }
    }

    /// Adds an event with attributes under the same scalar and redaction
    /// rules as [`set_attribute`](Self::set_attribute).
    ///
    /// ```
    /// let s = lens_runtime::span::start_detached("x", Vec::new());
    /// s.add_event("grad.clipped", &[("norm", &3.5), ("layer", &"attn")]);
    /// ```
    pub fn add_event(
        &self,
        name: impl Into<Cow<'static, str>>,
        attributes: &[(&str, &dyn AttributeValue)],
    ) {
        self.cx()
            .span()
            .add_event(name, crate::api::attr::collect(attributes));
    }

    /// Marks the span ERROR with the error's `Display` text and adds an
    /// `exception` event (`exception.type`, `exception.message`).
    ///
    /// ```
    /// let s = lens_runtime::span::start_detached("x", Vec::new());
    /// s.record_error(&"disk full");
    /// ```
    pub fn record_error<E: Display + ?Sized>(&self, err: &E) {
        record_exception(self.cx(), std::any::type_name::<E>(), err.to_string());
    }

    /// Sets the span status.
    ///
    /// ```
    /// use lens_runtime::span::SpanStatus;
    /// let s = lens_runtime::span::start_detached("x", Vec::new());
    /// s.set_status(SpanStatus::Ok);
    /// ```
    pub fn set_status(&self, status: SpanStatus) {
        self.cx().span().set_status(match status {
            SpanStatus::Unset => Status::Unset,
            SpanStatus::Ok => Status::Ok,
            SpanStatus::Error(description) => Status::Error { description },
        });
    }
}

impl crate::api::attr::SpanAttributeTarget for LensSpan {
    fn is_recording(&self) -> bool {
        self.cx().span().is_recording()
    }
    fn set_checked_attribute(&self, attribute: KeyValue) {
        self.cx().span().set_attribute(attribute);
    }
}

impl crate::api::attr::SpanAttributeTarget for SpanGuard {
    fn is_recording(&self) -> bool {
        self.cx().span().is_recording()
    }
    fn set_checked_attribute(&self, attribute: KeyValue) {
        self.cx().span().set_attribute(attribute);
    }
}

fn record_exception(cx: &Context, ty: &str, message: String) {
    let span = cx.span();
    span.set_status(Status::error(message.clone()));
    span.add_event(
        "exception",
        vec![
            KeyValue::new("exception.type", ty.to_owned()),
            KeyValue::new("exception.message", message),
        ],
    );
}

impl Drop for LensSpan {
    #[inline]
    fn drop(&mut self) {
        drop_span(&mut self.inner);
    }
}

/// The whole end of a detached span, out of line.
#[inline(never)]
fn drop_span(inner: &mut ManuallyDrop<SpanInner>) {
    inner.finish();
    // SAFETY: called once, from `LensSpan::drop`; `inner` is not used again.
    unsafe { ManuallyDrop::drop(inner) }
}

/// A span that is the current one on this thread until the guard drops; it
/// ends then. Returned by `managed_span!` (as `Option<SpanGuard>`) and
/// `span_cm!`. Not `Send`: a guard must drop on the thread that made it (use
/// [`LensSpan`] and the future combinator to cross threads or `.await`s).
///
/// ```
/// let g = lens_runtime::span::start_span("train.step", Vec::new());
/// g.set_attribute("loss", 1.5);
/// drop(g); // ends the span and restores the previous context
/// ```
#[must_use = "the span ends when the guard is dropped; bind it with `let _guard = ...`"]
pub struct SpanGuard {
    // Both dropped by hand in `drop_guard`: the span ends while it is still
    // the current one, then the previous context is restored. The span's own
    // `Drop` never runs (its fields are dropped there instead).
    span: ManuallyDrop<LensSpan>,
    attached: ManuallyDrop<ContextGuard>,
}

impl Drop for SpanGuard {
    #[inline]
    fn drop(&mut self) {
        drop_guard(self);
    }
}

/// The whole end of a guard, out of line: the site's drop glue for a
/// `SpanGuard` or an `Option<SpanGuard>` is then one call.
#[inline(never)]
fn drop_guard(guard: &mut SpanGuard) {
    guard.span.inner.finish();
    // SAFETY: called once, from `SpanGuard::drop`; neither field is used
    // again, and `LensSpan::drop` is never run for `span` (ManuallyDrop).
    unsafe {
        ManuallyDrop::drop(&mut guard.span.inner);
        ManuallyDrop::drop(&mut guard.attached);
    }
}

impl fmt::Debug for SpanGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SpanGuard").field(&self.span).finish()
    }
}

impl std::ops::Deref for SpanGuard {
    type Target = LensSpan;
    fn deref(&self) -> &LensSpan {
        &self.span
    }
}

impl SpanGuard {
    /// Detaches the span from the current context, keeping it open, e.g. to
    /// hand it to a future.
    ///
    /// ```
    /// let span = lens_runtime::span::start_span("x", Vec::new()).into_span();
    /// drop(span); // ends it
    /// ```
    pub fn into_span(self) -> LensSpan {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped; each field is taken or dropped
        // exactly once here.
        unsafe {
            ManuallyDrop::drop(&mut this.attached);
            ManuallyDrop::take(&mut this.span)
        }
    }
}

/// Records `Err` of a `#[trace_fn(err)]` function on its span.
#[doc(hidden)]
#[inline]
pub fn record_result<T, E: Display>(guard: &Option<SpanGuard>, result: &Result<T, E>) {
    if let (Some(g), Err(e)) = (guard, result) {
        g.record_error(e);
    }
}

/// Spans that are still open, per thread, so that telemetry shutdown (or a
/// SIGTERM flush) can end them: run-wide spans are not lost when a job is
/// stopped. Tracking is on only while a lens pipeline exports.
pub(crate) mod open {
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

    #[cfg_attr(not(feature = "sdk"), allow(dead_code))] // only setup turns it on
    pub(crate) fn set_tracking(on: bool) {
        TRACKING.store(on, Ordering::Relaxed);
    }

    /// Ends every span still open, innermost (most recently started) first
    /// within each thread's list, marking each `nemo.span.truncated = true`
    /// with an event of the same name. Returns how many were ended.
    #[cfg_attr(not(feature = "sdk"), allow(dead_code))] // only setup and the signal hook
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
    #[cfg_attr(not(feature = "sdk"), allow(dead_code))] // called by the fork handler
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
                if open.len() < 64 && (open.is_empty() || x % 2 == 0) {
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
}
