//! The clock of lens's span path: nanoseconds since the Unix epoch, read
//! from the CPU's time-stamp counter where it is invariant.
//!
//! `SystemTime::now()` costs a `clock_gettime` call (through the vDSO, tens
//! of ns on a VM), twice per span. Here a span reads the counter
//! (`quanta`'s raw clock, `rdtsc`) and turns it into wall time from an
//! *anchor*: a counter reading and the wall time taken together. The
//! counter is calibrated off the calling threads (by the collector thread,
//! when it starts; `quanta` takes up to 200 ms), and until then, or where
//! there is no invariant counter (`quanta` then reads the monotonic clock
//! and is no faster), spans read `SystemTime` as the SDK does. The
//! collector takes a new anchor every [`REANCHOR`], so that the counter's
//! drift against the wall clock (NTP, calibration error) never exceeds what
//! builds up in that time: spans timed here and spans timed by the SDK
//! (raw OpenTelemetry children) stay on one time line.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A time on lens's span path: nanoseconds since the Unix epoch.
pub(crate) type Stamp = u64;

/// How often the collector takes a new anchor.
pub(crate) const REANCHOR: Duration = Duration::from_secs(1);

/// The line from counter readings to wall time through an anchor (a
/// counter reading and the wall time at that reading): the counter's rate,
/// and the wall time of a reading of 0 on that line, so that a reading is
/// turned into wall time by one multiplication and one addition.
struct Anchor {
    /// Nanoseconds per 2^32 counter ticks (`quanta`'s calibration).
    ns_per_2_32: AtomicU64,
    /// The wall time at a counter reading of 0 (modulo 2^64: the scaled
    /// reading is added with wrapping).
    offset: AtomicU64,
}

impl Anchor {
    const fn new() -> Anchor {
        Anchor {
            ns_per_2_32: AtomicU64::new(0),
            offset: AtomicU64::new(0),
        }
    }
}

/// `raw` ticks in nanoseconds at `ns_per_2_32` (whole nanoseconds: the
/// product's low 32 bits are dropped).
#[inline(always)]
fn scaled(raw: u64, ns_per_2_32: u64) -> u64 {
    ((u128::from(raw) * u128::from(ns_per_2_32)) >> 32) as u64
}

/// The clock's state, in one static (one address to load a reading, not
/// one per part).
struct Line {
    /// The anchor in use, as its byte offset in `anchors` (0 or
    /// [`SECOND`]), with [`ANCHORED`] set once there is one, and [`RDTSC`]
    /// too if `quanta`'s raw clock is the time-stamp counter itself (seen
    /// between two `rdtsc` readings): spans then read it with `rdtsc`
    /// inline, not through `quanta`'s call. [`NONE`] (0): read
    /// `SystemTime`. One load and one test tell a span that it reads the
    /// counter, and the anchor's offset is the word masked (no shift).
    in_use: AtomicUsize,
    /// Two anchors: the one in use and the one the next anchor is written
    /// to, so a reader never sees half an anchor (unless it stalls for a
    /// whole [`REANCHOR`] between two loads; the time is then off by the
    /// drift of one period, never wrong by more).
    anchors: [Anchor; 2],
}

static LINE: Line = Line {
    in_use: AtomicUsize::new(NONE),
    anchors: [Anchor::new(), Anchor::new()],
};
const NONE: usize = 0;
const ANCHORED: usize = 1;
const RDTSC: usize = 2;
const SECOND: usize = std::mem::size_of::<Anchor>();
const _: () = assert!(SECOND.is_power_of_two() && SECOND > RDTSC | ANCHORED);
static CLOCK: OnceLock<Option<quanta::Clock>> = OnceLock::new();

/// Calibrates the counter if that has not been done, and takes a new
/// anchor (the collector thread: at its start and every [`REANCHOR`]).
pub(crate) fn anchor() {
    // without an invariant counter `quanta` reads the monotonic clock: no
    // faster than `SystemTime`, so keep `SystemTime`
    let Some(clock) = CLOCK.get_or_init(|| invariant_tsc().then(quanta::Clock::new)) else {
        return;
    };
    let ns_per_2_32 = clock.delta_as_nanos(0, 1 << 32);
    // a raw reading between two `rdtsc`s is the counter, unless `quanta`
    // fell back to the monotonic clock (no RDTSCP, say) and its reading
    // landed in that window by chance: its rate is then exactly 1 ns a
    // tick, which rules it out (a counter at exactly 1 GHz is read through
    // `quanta` then: slower, as right)
    let is_rdtsc = ns_per_2_32 != 1 << 32
        && rdtsc().is_some_and(|before| {
            let raw = clock.raw();
            before <= raw && rdtsc().is_some_and(|after| raw <= after)
        });
    // the wall time between two counter readings, at their midpoint
    let before = clock.raw();
    let unix = from_system(SystemTime::now());
    let after = clock.raw();
    let raw = before + after.saturating_sub(before) / 2;
    let in_use = LINE.in_use.load(Ordering::Relaxed);
    // the other anchor (the first, before there is one)
    let next = match in_use {
        NONE => 0,
        i => (i & SECOND) ^ SECOND,
    };
    let a = &LINE.anchors[next / SECOND];
    a.ns_per_2_32.store(ns_per_2_32, Ordering::Relaxed);
    a.offset.store(
        unix.wrapping_sub(scaled(raw, ns_per_2_32)),
        Ordering::Relaxed,
    );
    let flag = if is_rdtsc { RDTSC } else { 0 };
    LINE.in_use.store(next | ANCHORED | flag, Ordering::Release);
}

/// Whether the CPU has an invariant time-stamp counter (the one `quanta`
/// reads).
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[allow(unused_unsafe)] // `__cpuid` is safe from Rust 1.94, unsafe before
fn invariant_tsc() -> bool {
    #[cfg(target_arch = "x86")]
    use std::arch::x86::__cpuid;
    #[cfg(target_arch = "x86_64")]
    use std::arch::x86_64::__cpuid;
    // CPUID 0x8000_0007 EDX bit 8: invariant TSC
    // SAFETY: (unsafe before Rust 1.94) `cpuid` is available on every
    // x86_64 CPU (and every x86 one that runs Rust's std)
    let max = unsafe { __cpuid(0x8000_0000) }.eax;
    // SAFETY: (unsafe before Rust 1.94) as above; leaf 0x8000_0007 is
    // asked for only when the CPU reports it (`max`)
    max >= 0x8000_0007 && unsafe { __cpuid(0x8000_0007) }.edx & (1 << 8) != 0
}

#[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
fn invariant_tsc() -> bool {
    false
}

/// The time-stamp counter (x86-64), `None` elsewhere.
#[inline(always)]
fn rdtsc() -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    #[allow(unused_unsafe)]
    // SAFETY: (unsafe before `_rdtsc` was made safe) `rdtsc` is on every
    // x86-64 CPU
    return Some(unsafe { std::arch::x86_64::_rdtsc() });
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// Now: read from the counter (`rdtsc`, then the anchor's line), without
/// `quanta`'s call and the checks of its clock type.
#[inline(always)]
pub(crate) fn now() -> Stamp {
    let in_use = LINE.in_use.load(Ordering::Acquire);
    let raw = match in_use & RDTSC != 0 {
        true => match rdtsc() {
            Some(raw) => raw,
            None => return not_rdtsc(in_use),
        },
        false => return not_rdtsc(in_use),
    };
    on_line(raw, in_use)
}

/// `raw` on the line of the anchor `in_use` names: on the anchor's line,
/// before the anchor too (a reading a little behind it, on a core whose
/// counter lags, is a little earlier; within a nanosecond of
/// `unix + (raw - anchor) * rate`).
#[inline(always)]
fn on_line(raw: u64, in_use: usize) -> Stamp {
    // SAFETY: `in_use & SECOND` is 0 or the size of one `Anchor`: the
    // offset of one of the two anchors
    let a = unsafe { &*LINE.anchors.as_ptr().byte_add(in_use & SECOND) };
    let ns = scaled(raw, a.ns_per_2_32.load(Ordering::Relaxed));
    ns.wrapping_add(a.offset.load(Ordering::Relaxed))
}

/// Now without `rdtsc` inline: through `quanta` (a counter that is not
/// the time-stamp counter itself), or `SystemTime` (no anchor yet, or no
/// invariant counter).
#[cold]
#[inline(never)]
fn not_rdtsc(in_use: usize) -> Stamp {
    if in_use & ANCHORED != 0 {
        if let Some(Some(clock)) = CLOCK.get() {
            return on_line(clock.raw(), in_use);
        }
    }
    from_system(SystemTime::now())
}

/// `t` as a stamp (0 before the epoch).
pub(crate) fn from_system(t: SystemTime) -> Stamp {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64)
}

/// `s` as a system time.
pub(crate) fn to_system(s: Stamp) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_clock_follows_the_wall_clock() {
        let wall = || from_system(SystemTime::now());
        anchor();
        anchor(); // both slots written
        for _ in 0..3 {
            let (a, b, c) = (wall(), now(), wall());
            assert!(
                a.saturating_sub(1_000_000) <= b && b <= c + 1_000_000,
                "{a} {b} {c}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let t0 = now();
        std::thread::sleep(Duration::from_millis(50));
        let d = now() - t0;
        assert!((50_000_000..1_000_000_000).contains(&d), "{d}");
    }
}
