//! The per-thread source of trace and span ids: unique across threads,
//! across ranks whose code seeds its RNGs identically, and across
//! `fork()`ed children. Lens's span recorder draws from it directly, the
//! SDK's tracer through [`ForkSafeIdGenerator`](crate::ForkSafeIdGenerator).
//!
//! Each thread keeps a small fast RNG seeded from the operating system (never
//! from anything the user seeds). A `pthread_atfork` child handler marks
//! the forking thread's state unseeded (it is the only thread a child
//! has), so the first id drawn in a forked child reseeds from the OS
//! instead of repeating the parent's sequence.

use opentelemetry::trace::{SpanId, TraceId};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};
use std::cell::Cell;
use std::sync::Once;

/// In the child of a `fork()`, on the thread that forked (the child's only
/// thread): its state is to be seeded again. Async-signal-safe, as a fork
/// handler must be: one store to a thread local that has no destructor
/// (plain thread-local memory, made before the fork by
/// [`before_fork`], so that reaching it allocates nothing even where
/// lens is in a library loaded with `dlopen`).
extern "C" fn after_fork_in_child() {
    FAST.with(|f| f.seeded.set(false));
}

/// In the parent, on the thread about to fork: makes its thread local
/// exist (a no-op once it does), for [`after_fork_in_child`].
extern "C" fn before_fork() {
    FAST.with(|_| ());
}

/// Registers the fork handler that makes a forked child reseed (once per
/// process; later calls do nothing).
pub(crate) fn install_fork_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers handlers that only touch a thread local with
        // no destructor (the child's: one store, async-signal-safe).
        unsafe {
            libc::pthread_atfork(Some(before_fork), None, Some(after_fork_in_child));
        }
    });
}

/// A thread's wyrand state, and whether it was seeded (in this process).
struct Fast {
    seeded: Cell<bool>,
    state: Cell<u64>,
}

thread_local! {
    /// Seeded from the OS on a thread's first id and again after a
    /// `fork()`. Both the SDK's tracer (through `IdGenerator`) and lens's
    /// span recorder draw from it. No destructor: readable at any time,
    /// from the fork handler too, and one test a draw.
    static FAST: Fast = const {
        Fast {
            seeded: Cell::new(false),
            state: Cell::new(0),
        }
    };
}

/// wyrand: one 64-bit output, the state advanced.
#[inline(always)]
fn wyrand(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0xa076_1d64_78bd_642f);
    let t = u128::from(*state) * u128::from(*state ^ 0xe703_7ed1_a0b4_28db);
    ((t >> 64) as u64) ^ (t as u64)
}

/// The first id of a thread, or the first after a fork: a fresh OS seed.
#[cold]
#[inline(never)]
fn fast_seed() -> u64 {
    SmallRng::from_os_rng().next_u64()
}

/// Runs `f` on this thread's state, seeded first if it was not (the
/// thread's first id, or its first in a forked child).
#[inline(always)]
fn with_state<R>(f: impl Fn(&mut u64) -> R) -> R {
    FAST.with(|fast| {
        let mut state = match fast.seeded.get() {
            true => fast.state.get(),
            // marked seeded once it is (a seed that panics leaves it
            // unseeded, to be seeded by the next draw)
            false => {
                let seed = fast_seed();
                fast.seeded.set(true);
                seed
            }
        };
        let r = f(&mut state);
        fast.state.set(state);
        r
    })
}

/// A span id, and a trace id too when `root` (lens's span recorder):
/// wyrand over the per-thread state in one visit, a few instructions per
/// id.
#[inline(always)]
pub(crate) fn draw(root: bool) -> (SpanId, Option<TraceId>) {
    let (span, trace) = with_state(|state| {
        let span = wyrand(state);
        let trace = root.then(|| (u128::from(wyrand(state)) << 64) | u128::from(wyrand(state)));
        (span, trace)
    });
    // zero is invalid (about once in 2^64 draws)
    let span = match span {
        0 => span_id(),
        s => SpanId::from(s),
    };
    let trace = trace.map(|t| match t {
        0 => trace_id(),
        t => TraceId::from(t),
    });
    (span, trace)
}

/// A trace id (never the invalid one).
pub(crate) fn trace_id() -> TraceId {
    loop {
        let id = with_state(|s| (u128::from(wyrand(s)) << 64) | u128::from(wyrand(s)));
        if id != 0 {
            return TraceId::from(id);
        }
    }
}

/// A span id (never the invalid one).
pub(crate) fn span_id() -> SpanId {
    loop {
        let id = with_state(wyrand);
        if id != 0 {
            return SpanId::from(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn ids(n: usize) -> Vec<u128> {
        (0..n)
            .flat_map(|_| {
                let (s, t) = draw(true);
                let t = u128::from_be_bytes(t.unwrap().to_bytes());
                [u128::from(u64::from_be_bytes(s.to_bytes())), t]
            })
            .collect()
    }

    /// The recorder's entry point: unique across threads, and not a copy
    /// of the SDK entry point's sequence (both draw from one per-thread
    /// state; `tests/ids.rs` forks children and checks that state is
    /// reseeded in each).
    #[test]
    fn recorder_ids_are_unique_across_threads_and_beside_the_sdk_s() {
        let mut all: Vec<u128> = ids(64);
        let threads: Vec<_> = (0..4).map(|_| std::thread::spawn(|| ids(1000))).collect();
        for t in threads {
            all.extend(t.join().unwrap());
        }
        all.extend((0..64).map(|_| u128::from_be_bytes(trace_id().to_bytes())));
        all.extend(ids(64));
        let n = all.len();
        assert_eq!(
            all.into_iter().collect::<HashSet<_>>().len(),
            n,
            "a duplicate id"
        );
    }
}
