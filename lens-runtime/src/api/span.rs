//! Span guards: creation, context attachment, panic marking, end on drop.

pub(crate) mod exception;
pub(crate) mod handle;
#[cfg(feature = "sdk-core")]
mod in_place;
pub(crate) mod live;
pub(crate) mod opts;
pub(crate) mod panic;
pub(crate) mod start;
mod status;
pub(crate) mod tracer;

use crate::api::attr::AttributeValue;
use crate::api::engine_socket::{self as engine, Registration};
use opentelemetry::trace::{Status, TraceContextExt};
use opentelemetry::{Context, ContextGuard, Key, KeyValue};
use std::borrow::Cow;
use std::fmt::{self, Display};
use std::mem::ManuallyDrop;
use std::sync::atomic::Ordering;

pub(crate) use crate::api::scope::SCOPE_NAME;
use exception::record_exception;
pub(crate) use handle::{span_of, SpanHandle};
#[cfg(feature = "sdk-core")]
pub(crate) use panic::install_panic_hook;
use panic::{forget_panic_message, panic_message, PANIC_RECORDED};
pub use status::SpanStatus;
#[cfg(feature = "sdk-core")]
pub use tracer::{clear_tracer_provider, set_tracer_provider};
#[cfg(feature = "sdk-core")]
pub(crate) use tracer::{forget_tracer_after_fork, set_fork_respawn};

/// A started span that is not attached to the current context: it can move
/// between threads (e.g. inside a future) and ends when dropped. Attach it for
/// a scope with [`LensSpan::enter`]. A panic unwinding through its drop marks
/// it ERROR with the panic message.
///
/// ```
/// let span = lens::detached_span("work");
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

/// Each field is written in place by `in_place::write_from_recorder` too: a
/// field added here must be written there.
struct SpanInner {
    cx: Context,
    open: Option<Registration>,
    /// Whether `open` is the record of a span of lens's own path.
    #[cfg(feature = "sdk-core")]
    has_record: bool,
}

impl SpanInner {
    /// Where the span's operations go: the record of a span of lens's own
    /// path, else the span in the context.
    #[inline]
    fn handle(&self) -> SpanHandle<'_> {
        #[cfg(feature = "sdk-core")]
        if let (true, Some(reg)) = (self.has_record, self.open) {
            return SpanHandle::Record(reg);
        }
        SpanHandle::Otel(self.cx.span())
    }

    /// Marks a panic unwinding through the span, ends it and forgets its
    /// open-span registration; the context itself is dropped by the caller.
    #[inline(always)]
    fn finish(&mut self) {
        if std::thread::panicking() {
            record_panic(&self.handle());
        } else if PANIC_RECORDED.load(Ordering::Relaxed) {
            forget_panic_message();
        }
        #[cfg(feature = "sdk-core")]
        if self.has_record {
            // read, not taken: `finish` runs once, and the span is dropped
            // right after it
            if let Some(reg) = self.open {
                let sampled = || self.cx.span().span_context().is_sampled();
                engine::recorder::end_record(&reg, sampled, engine::clock::now());
            }
            return;
        }
        self.cx.span().end();
        if let Some(reg) = self.open.take() {
            reg.unregister();
        }
    }
}

/// Records the panic unwinding through the span `h` (the message and stack
/// the hook recorded) as its exception and error status.
#[inline(always)]
fn record_panic(h: &SpanHandle<'_>) {
    let (message, stack) = panic_message();
    record_exception(h, "panic", message, stack);
}

impl fmt::Debug for LensSpan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LensSpan")
            .field("span_context", self.cx().span().span_context())
            .finish()
    }
}

/// A panic message recorded by the hook for a panic that was caught
/// without unwinding through a span is stale once a new span starts.
#[inline]
fn forget_stale_panic() {
    if PANIC_RECORDED.load(Ordering::Relaxed) && !std::thread::panicking() {
        forget_panic_message();
    }
}

impl LensSpan {
    #[inline]
    fn new(cx: Context) -> Self {
        forget_stale_panic();
        let open = engine::register(&cx);
        LensSpan {
            inner: ManuallyDrop::new(SpanInner {
                cx,
                open,
                #[cfg(feature = "sdk-core")]
                has_record: false,
            }),
        }
    }

    /// A span that is nothing: not recorded, its context empty (made
    /// without reaching OpenTelemetry's context, where that is gone).
    #[inline(never)]
    #[cold]
    fn inert() -> Self {
        LensSpan {
            inner: ManuallyDrop::new(SpanInner {
                cx: Context::new(),
                open: None,
                #[cfg(feature = "sdk-core")]
                has_record: false,
            }),
        }
    }

    #[inline(always)]
    fn cx(&self) -> &Context {
        &self.inner.cx
    }

    /// Where the span's operations go.
    #[inline]
    pub(crate) fn handle(&self) -> SpanHandle<'_> {
        self.inner.handle()
    }

    /// Makes this span the current one on this thread until the guard drops;
    /// the span ends when the guard drops.
    ///
    /// ```
    /// let g = lens::detached_span("x").enter();
    /// g.set_attribute("n", 1);
    /// ```
    #[inline]
    pub fn enter(self) -> SpanGuard {
        // not attached where OpenTelemetry's context is gone (a span
        // entered in a thread-local destructor at thread exit)
        let attached = live::attach_if_live(self.cx());
        SpanGuard::from_active(self.guard(attached))
    }

    /// [`enter`](Self::enter) where OpenTelemetry's context is known to be
    /// there (checked as the span started, on this thread).
    #[inline]
    pub(crate) fn enter_live(self) -> ActiveGuard {
        let attached = self.cx().clone().attach();
        self.guard(Some(attached))
    }

    #[inline(always)]
    fn guard(self, attached: Option<ContextGuard>) -> ActiveGuard {
        ActiveGuard {
            span: ManuallyDrop::new(self),
            attached: ManuallyDrop::new(attached),
        }
    }

    /// The OpenTelemetry context holding this span (for propagation).
    ///
    /// ```
    /// use lens::otel::trace::TraceContextExt;
    /// let s = lens::detached_span("x");
    /// let _sc = s.context().span().span_context().clone();
    /// ```
    pub fn context(&self) -> &Context {
        self.cx()
    }

    /// Sets `key = value` (skipped for `None`; string values under a
    /// redacted key become `[REDACTED]`).
    ///
    /// ```
    /// let s = lens::detached_span("x");
    /// s.set_attribute("loss", 0.25);
    /// s.set_attribute("token", "abc"); // recorded as "[REDACTED]"
    /// ```
    pub fn set_attribute<V: AttributeValue>(&self, key: impl Into<Key>, value: V) {
        let key = key.into();
        if let Some(value) = crate::api::attr::value_for_key(key.as_str(), &value) {
            self.handle().set_attribute(KeyValue::new(key, value));
        }
    }

    /// Adds an event with attributes under the same scalar and redaction
    /// rules as [`set_attribute`](Self::set_attribute).
    ///
    /// ```
    /// let s = lens::detached_span("x");
    /// s.add_event("grad.clipped", &[("norm", &3.5), ("layer", &"attn")]);
    /// ```
    pub fn add_event(
        &self,
        name: impl Into<Cow<'static, str>>,
        attributes: &[(&str, &dyn AttributeValue)],
    ) {
        self.handle()
            .add_event(name, crate::api::attr::collect(attributes));
    }

    /// Marks the span ERROR and adds an `exception` event, as the Python
    /// library does for an exception: the status description is
    /// `TypeName: message` (the last path segment of `E`'s type name and
    /// the error's `Display` text); the event carries `exception.type` (the
    /// full type name), `exception.message` and, when a backtrace is
    /// captured (`RUST_BACKTRACE=1`), `exception.stacktrace`.
    ///
    /// ```
    /// let s = lens::detached_span("x");
    /// s.record_error("disk full"); // status "str: disk full" when recorded
    /// let e = "x".parse::<u32>().unwrap_err();
    /// s.record_error(&e); // "ParseIntError: invalid digit found in string"
    /// ```
    pub fn record_error<E: Display + ?Sized>(&self, err: &E) {
        record_exception(
            &self.handle(),
            std::any::type_name::<E>(),
            err.to_string(),
            exception::captured_backtrace(),
        );
    }

    /// [`record_error`](Self::record_error) with the error's `Debug` text
    /// (`#[trace_fn(err(Debug))]`).
    pub(crate) fn record_error_debug<E: fmt::Debug + ?Sized>(&self, err: &E) {
        record_exception(
            &self.handle(),
            std::any::type_name::<E>(),
            format!("{err:?}"),
            exception::captured_backtrace(),
        );
    }

    /// Sets the span status.
    ///
    /// ```
    /// use lens::SpanStatus;
    /// let s = lens::detached_span("x");
    /// s.set_status(SpanStatus::Ok);
    /// ```
    pub fn set_status(&self, status: SpanStatus) {
        self.handle().set_status(match status {
            SpanStatus::Unset => Status::Unset,
            SpanStatus::Ok => Status::Ok,
            SpanStatus::Error(description) => Status::Error { description },
        });
    }
}

impl crate::api::attr::SpanAttributeTarget for LensSpan {
    fn is_recording(&self) -> bool {
        self.handle().is_recording()
    }
    fn set_checked_attribute(&self, attribute: KeyValue) {
        self.handle().set_attribute(attribute);
    }
}

impl crate::api::attr::SpanAttributeTarget for SpanGuard {
    fn is_recording(&self) -> bool {
        SpanGuard::is_recording(self)
    }
    fn set_checked_attribute(&self, attribute: KeyValue) {
        if let Some(h) = self.handle() {
            h.set_attribute(attribute);
        }
    }
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
/// ends then, and the previous context is restored. Returned by
/// `managed_span!`, `span_cm!` and [`LensSpan::enter`].
///
/// A guard can be *inert*: `managed_span!` returns one when its group is
/// off (and [`SpanGuard::none`] makes one). An inert guard holds no span:
/// its methods do nothing, [`is_recording`](Self::is_recording) is false,
/// and dropping it is one test. So a site sets attributes with no
/// `if let`, whether its group is on or not.
///
/// Not `Send`: a guard must drop on the thread that made it (use
/// [`LensSpan`] and [`InSpan::in_span`](crate::InSpan::in_span) to cross
/// threads or `.await`s).
///
/// ```
/// let g = lens::span_cm!("train.step");
/// g.set_attribute("loss", 1.5);
/// drop(g); // ends the span and restores the previous context
///
/// let off = lens::managed_span!("checkpoint", "ckpt.save"); // group off
/// off.set_attribute("bytes", 1024_i64); // does nothing
/// assert!(!off.is_recording());
/// ```
#[must_use = "the span ends when the guard is dropped; bind it with `let _guard = ...`"]
pub struct SpanGuard {
    // `None`: inert. The drop glue is `Option<ActiveGuard>`'s: one test,
    // then (for a span) one out-of-line call.
    active: Option<ActiveGuard>,
}

/// The guard of a started span (a [`SpanGuard`] that is not inert).
pub(crate) struct ActiveGuard {
    // Both dropped by hand in `drop_guard`: the span ends while it is still
    // the current one, then the previous context is restored. The span's own
    // `Drop` never runs (its fields are dropped there instead).
    span: ManuallyDrop<LensSpan>,
    attached: ManuallyDrop<Option<ContextGuard>>,
}

impl Drop for ActiveGuard {
    #[inline]
    fn drop(&mut self) {
        drop_guard(self);
    }
}

/// The whole end of a guard, out of line: the site's drop glue for a
/// `SpanGuard` is then one test and one call.
#[inline(never)]
fn drop_guard(guard: &mut ActiveGuard) {
    guard.span.inner.finish();
    // SAFETY: called once, from `ActiveGuard::drop`; neither field is used
    // again, and `LensSpan::drop` is never run for `span` (ManuallyDrop).
    unsafe {
        ManuallyDrop::drop(&mut guard.span.inner);
        live::detach_in_place(&mut guard.attached);
    }
}

impl std::ops::Deref for ActiveGuard {
    type Target = LensSpan;
    #[inline(always)]
    fn deref(&self) -> &LensSpan {
        &self.span
    }
}

impl ActiveGuard {
    /// Detaches the span from the current context, keeping it open.
    fn into_span(self) -> LensSpan {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped; each field is taken or dropped
        // exactly once here.
        unsafe {
            live::detach_in_place(&mut this.attached);
            ManuallyDrop::take(&mut this.span)
        }
    }
}

impl fmt::Debug for SpanGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.active {
            Some(g) => f.debug_tuple("SpanGuard").field(&*g.span).finish(),
            None => f.write_str("SpanGuard(inert)"),
        }
    }
}

impl Default for SpanGuard {
    /// [`SpanGuard::none`].
    fn default() -> Self {
        Self::none()
    }
}

impl SpanGuard {
    /// An inert guard: no span, every method a no-op (what `managed_span!`
    /// returns when its group is off; `tracing::Span::none()` plays the
    /// same part).
    ///
    /// ```
    /// let g = lens::SpanGuard::none();
    /// g.set_attribute("ignored", 1);
    /// assert!(!g.is_recording());
    /// assert!(g.into_span().is_none());
    /// ```
    #[inline(always)]
    pub const fn none() -> Self {
        SpanGuard { active: None }
    }

    #[inline(always)]
    pub(crate) fn from_active(active: ActiveGuard) -> Self {
        SpanGuard {
            active: Some(active),
        }
    }

    /// Whether the guard is inert: made by [`none`](Self::none) or by a
    /// `managed_span!` whose group is off. A guard that is not inert holds
    /// a span, recording or not (see [`is_recording`](Self::is_recording)).
    ///
    /// ```
    /// assert!(lens::SpanGuard::none().is_none());
    /// assert!(!lens::span_cm!("x").is_none());
    /// ```
    #[inline(always)]
    pub fn is_none(&self) -> bool {
        self.active.is_none()
    }

    /// Whether the guard holds a span that records: false for an inert
    /// guard (its group off) and for a span that is not sampled. Use it to
    /// skip work done only to be recorded.
    ///
    /// ```
    /// let g = lens::managed_span!("step", "train.step");
    /// if g.is_recording() {
    ///     let summary = format!("{:?}", [1, 2, 3]); // only when recorded
    ///     g.set_attribute("summary", summary);
    /// }
    /// ```
    #[inline]
    pub fn is_recording(&self) -> bool {
        self.active
            .as_ref()
            .is_some_and(|g| g.handle().is_recording())
    }

    /// Sets `key = value` on the span (nothing for an inert guard). See
    /// [`LensSpan::set_attribute`].
    ///
    /// ```
    /// let g = lens::span_cm!("x");
    /// g.set_attribute("loss", 0.25);
    /// ```
    #[inline]
    pub fn set_attribute<V: AttributeValue>(&self, key: impl Into<Key>, value: V) {
        if let Some(g) = &self.active {
            g.set_attribute(key, value);
        }
    }

    /// Adds an event to the span (nothing for an inert guard). See
    /// [`LensSpan::add_event`].
    ///
    /// ```
    /// let g = lens::span_cm!("x");
    /// g.add_event("grad.clipped", &[("norm", &3.5)]);
    /// ```
    #[inline]
    pub fn add_event(
        &self,
        name: impl Into<Cow<'static, str>>,
        attributes: &[(&str, &dyn AttributeValue)],
    ) {
        if let Some(g) = &self.active {
            g.add_event(name, attributes);
        }
    }

    /// Records `err` on the span: ERROR status and an `exception` event
    /// (nothing for an inert guard). See [`LensSpan::record_error`].
    ///
    /// ```
    /// let g = lens::span_cm!("x");
    /// g.record_error("disk full");
    /// ```
    #[inline]
    pub fn record_error<E: Display + ?Sized>(&self, err: &E) {
        if let Some(g) = &self.active {
            g.record_error(err);
        }
    }

    /// Sets the span status (nothing for an inert guard).
    ///
    /// ```
    /// let g = lens::span_cm!("x");
    /// g.set_status(lens::SpanStatus::Ok);
    /// ```
    #[inline]
    pub fn set_status(&self, status: SpanStatus) {
        if let Some(g) = &self.active {
            g.set_status(status);
        }
    }

    /// The OpenTelemetry context holding the span; for an inert guard, an
    /// empty context (no span: what is propagated from it starts a new
    /// trace; propagate `lens::otel::Context::current()` to continue the
    /// enclosing span whatever the guard).
    ///
    /// ```
    /// use lens::otel::trace::TraceContextExt;
    /// let g = lens::span_cm!("x");
    /// let _sc = g.context().span().span_context().clone(); // e.g. to link to
    /// assert!(!lens::SpanGuard::none().context().has_active_span());
    /// ```
    pub fn context(&self) -> &Context {
        match &self.active {
            Some(g) => g.context(),
            None => empty_context(),
        }
    }

    /// Detaches the span from the current context, keeping it open, e.g. to
    /// hand it to a future; `None` for an inert guard.
    ///
    /// ```
    /// let span = lens::span_cm!("x").into_span();
    /// drop(span); // ends it
    /// ```
    pub fn into_span(self) -> Option<LensSpan> {
        self.active.map(ActiveGuard::into_span)
    }

    /// Where the span's operations go, if there is a span.
    #[inline]
    pub(crate) fn handle(&self) -> Option<SpanHandle<'_>> {
        self.active.as_ref().map(|g| g.handle())
    }
}

/// The context of an inert guard.
#[cold]
fn empty_context() -> &'static Context {
    static EMPTY: std::sync::OnceLock<Context> = std::sync::OnceLock::new();
    EMPTY.get_or_init(Context::new)
}

/// Records `Err` of a `#[trace_fn(err)]` function on its span.
#[doc(hidden)]
#[inline]
pub fn record_result<T, E: Display>(guard: &SpanGuard, result: &Result<T, E>) {
    if let Err(e) = result {
        guard.record_error(e);
    }
}

/// Records `Err` of a `#[trace_fn(err(Debug))]` function on its span, as
/// its `Debug` text.
#[doc(hidden)]
#[inline]
pub fn record_result_debug<T, E: fmt::Debug>(guard: &SpanGuard, result: &Result<T, E>) {
    if let (Some(g), Err(e)) = (&guard.active, result) {
        g.record_error_debug(e);
    }
}
