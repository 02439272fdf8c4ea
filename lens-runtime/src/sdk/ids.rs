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
use std::cell::{Cell, RefCell};
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

thread_local! {
    /// lens's span recorder: `(fork generation, wyrand state)`, seeded from
    /// the OS on a thread's first id and again after a `fork()`.
    static FAST: Cell<(u64, u64)> = const { Cell::new((u64::MAX, 0)) };
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

impl ForkSafeIdGenerator {
    /// A span id, and a trace id too when `root` (lens's span recorder):
    /// wyrand over a per-thread state, seeded from the OS per thread and
    /// per fork like the generator's own RNG, a few instructions per id.
    #[inline]
    pub(crate) fn draw_ids(root: bool) -> (SpanId, Option<TraceId>) {
        let draw = |state: &mut u64| {
            let span = wyrand(state);
            let trace = root.then(|| (u128::from(wyrand(state)) << 64) | u128::from(wyrand(state)));
            (span, trace)
        };
        let (span, trace) = FAST
            .try_with(|cell| {
                let generation = FORK_GENERATION.load(Ordering::Relaxed);
                let (g, mut state) = cell.get();
                if g != generation {
                    state = fast_seed();
                }
                let ids = draw(&mut state);
                cell.set((generation, state));
                ids
            })
            // a thread that is exiting: a seed of its own
            .unwrap_or_else(|_| draw(&mut fast_seed()));
        // zero is invalid (about once in 2^64 draws)
        let this = ForkSafeIdGenerator(());
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::io::{Read, Write};
    use std::os::fd::FromRawFd;

    fn ids(n: usize) -> Vec<u128> {
        (0..n)
            .flat_map(|_| {
                let (s, t) = ForkSafeIdGenerator::draw_ids(true);
                let t = u128::from_be_bytes(t.unwrap().to_bytes());
                [u128::from(u64::from_be_bytes(s.to_bytes())), t]
            })
            .collect()
    }

    #[test]
    fn recorder_ids_are_unique_across_threads_and_forked_children() {
        let _ = ForkSafeIdGenerator::new(); // the fork handler
        let mut all: Vec<u128> = ids(64);
        let threads: Vec<_> = (0..4).map(|_| std::thread::spawn(|| ids(1000))).collect();
        for t in threads {
            all.extend(t.join().unwrap());
        }
        for _ in 0..2 {
            let mut fds = [0; 2];
            // SAFETY: pipe + fork; the child only draws ids, writes them to
            // the pipe and leaves with `_exit`.
            unsafe {
                assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
                let pid = libc::fork();
                assert!(pid >= 0);
                if pid == 0 {
                    let mut w = std::fs::File::from_raw_fd(fds[1]);
                    for id in ids(64) {
                        let _ = w.write_all(&id.to_be_bytes());
                    }
                    drop(w);
                    libc::_exit(0);
                }
                libc::close(fds[1]);
                let mut buf = Vec::new();
                std::fs::File::from_raw_fd(fds[0])
                    .read_to_end(&mut buf)
                    .unwrap();
                libc::waitpid(pid, &mut 0, 0);
                assert_eq!(buf.len(), 128 * 16, "the child wrote its ids");
                all.extend(
                    buf.chunks(16)
                        .map(|c| u128::from_be_bytes(c.try_into().unwrap())),
                );
            }
        }
        all.extend(ids(64)); // the parent goes on with its own sequence
        let n = all.len();
        assert_eq!(
            all.into_iter().collect::<HashSet<_>>().len(),
            n,
            "a duplicate id"
        );
    }
}
