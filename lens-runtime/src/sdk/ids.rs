//! Trace and span ids that are unique across threads, across ranks whose
//! code seeds its RNGs identically, and across `fork()`ed children.
//!
//! Each thread keeps a small fast RNG seeded from the operating system (never
//! from anything the user seeds). A `pthread_atfork` child handler bumps a
//! generation counter, so the first id drawn in a forked child reseeds from
//! the OS instead of repeating the parent's sequence.

use opentelemetry::trace::{SpanId, TraceId};
use opentelemetry_sdk::trace::IdGenerator;
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);

extern "C" fn after_fork_in_child() {
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
}

fn install_fork_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers an async-signal-safe handler (one atomic add).
        unsafe {
            libc::pthread_atfork(None, None, Some(after_fork_in_child));
        }
    });
}

thread_local! {
    static RNG: RefCell<Option<(u64, SmallRng)>> = const { RefCell::new(None) };
}

#[inline]
fn with_rng<R>(f: impl FnOnce(&mut SmallRng) -> R) -> R {
    RNG.with(|cell| {
        let mut slot = cell.borrow_mut();
        let generation = FORK_GENERATION.load(Ordering::Relaxed);
        let rng = match &mut *slot {
            Some((g, rng)) if *g == generation => rng,
            other => reseed(other, generation),
        };
        f(rng)
    })
}

/// First id on this thread, or first after a `fork()`: a fresh OS seed.
#[cold]
#[inline(never)]
fn reseed(slot: &mut Option<(u64, SmallRng)>, generation: u64) -> &mut SmallRng {
    &mut slot.insert((generation, SmallRng::from_os_rng())).1
}

/// The id generator every lens tracer provider uses.
///
/// ```
/// use lens::ForkSafeIdGenerator;
/// use opentelemetry_sdk::trace::IdGenerator;
/// let g = ForkSafeIdGenerator::new();
/// assert_ne!(g.new_trace_id(), g.new_trace_id());
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ForkSafeIdGenerator(());

impl ForkSafeIdGenerator {
    /// Creates the generator (and registers the fork handler once).
    pub fn new() -> Self {
        install_fork_handler();
        ForkSafeIdGenerator(())
    }
}

impl Default for ForkSafeIdGenerator {
    fn default() -> Self {
        Self::new()
    }
}

impl ForkSafeIdGenerator {
    /// A span id, and a trace id too when `root`: one visit to the
    /// thread's generator (lens's span recorder).
    #[inline]
    pub(crate) fn draw_ids(root: bool) -> (SpanId, Option<TraceId>) {
        let this = ForkSafeIdGenerator(());
        let (span, trace) = with_rng(|r| {
            let span = r.next_u64();
            let trace = root.then(|| (u128::from(r.next_u64()) << 64) | u128::from(r.next_u64()));
            (span, trace)
        });
        // zero is invalid: about once in 2^64 draws
        let span = match span {
            0 => this.new_span_id(),
            s => SpanId::from(s),
        };
        let trace = trace.map(|t| match t {
            0 => this.new_trace_id(),
            t => TraceId::from(t),
        });
        (span, trace)
    }
}

impl IdGenerator for ForkSafeIdGenerator {
    fn new_trace_id(&self) -> TraceId {
        loop {
            let id = with_rng(|r| (u128::from(r.next_u64()) << 64) | u128::from(r.next_u64()));
            if id != 0 {
                return TraceId::from(id);
            }
        }
    }

    fn new_span_id(&self) -> SpanId {
        loop {
            let id = with_rng(|r| r.next_u64());
            if id != 0 {
                return SpanId::from(id);
            }
        }
    }
}
