//! The route of each `tracing` callsite, looked up by its metadata's
//! address without a lock: the per-span cost of a gated-off span is this
//! lookup plus the group's bit test.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Slots of the table (a power of two). A program with more span and event
/// callsites than three quarters of this still works: the callsites past
/// that are resolved from their target on every span (slower, same result).
const SLOTS: usize = 1 << 12;

/// An insert-only, open-addressed map from a callsite's metadata address to
/// a route index (0: not recorded). Readers never lock; writers (callsite
/// registration, rare) take a mutex.
pub(crate) struct Callsites {
    keys: Box<[AtomicUsize]>,
    values: Box<[AtomicU32]>,
    len: Mutex<usize>,
}

impl std::fmt::Debug for Callsites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let len = *self.len.lock().unwrap_or_else(|e| e.into_inner());
        f.debug_struct("Callsites").field("len", &len).finish()
    }
}

#[inline(always)]
fn home(addr: usize) -> usize {
    // Fibonacci hashing of the address (metadata is at least 8-aligned)
    ((addr as u64 >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOTS.trailing_zeros()))
        as usize
}

impl Callsites {
    pub(crate) fn new() -> Self {
        Callsites {
            keys: (0..SLOTS).map(|_| AtomicUsize::new(0)).collect(),
            values: (0..SLOTS).map(|_| AtomicU32::new(0)).collect(),
            len: Mutex::new(0),
        }
    }

    /// The route index stored for `addr`, or `None` if it was never stored.
    #[inline]
    pub(crate) fn get(&self, addr: usize) -> Option<u32> {
        let mut i = home(addr);
        for _ in 0..SLOTS {
            let k = self.keys[i].load(Ordering::Acquire);
            if k == addr {
                return Some(self.values[i].load(Ordering::Relaxed));
            }
            if k == 0 {
                return None;
            }
            i = (i + 1) & (SLOTS - 1);
        }
        None
    }

    /// Stores `value` for `addr` (a no-op once the table is three quarters
    /// full).
    pub(crate) fn insert(&self, addr: usize, value: u32) {
        let mut len = self.len.lock().unwrap_or_else(|e| e.into_inner());
        let mut i = home(addr);
        for _ in 0..SLOTS {
            let k = self.keys[i].load(Ordering::Relaxed);
            if k == addr {
                self.values[i].store(value, Ordering::Relaxed);
                return;
            }
            if k == 0 {
                if *len >= SLOTS / 4 * 3 {
                    return;
                }
                // the value first: a reader that sees the key sees it too
                self.values[i].store(value, Ordering::Relaxed);
                self.keys[i].store(addr, Ordering::Release);
                *len += 1;
                return;
            }
            i = (i + 1) & (SLOTS - 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_finds_and_stops_when_full() {
        let t = Callsites::new();
        assert_eq!(t.get(8), None);
        t.insert(8, 3);
        t.insert(16, 0);
        assert_eq!(t.get(8), Some(3));
        assert_eq!(t.get(16), Some(0));
        t.insert(8, 4);
        assert_eq!(t.get(8), Some(4));
        // colliding addresses probe on
        let addrs: Vec<usize> = (1..=SLOTS).map(|i| i * 4096).collect();
        for (n, a) in addrs.iter().enumerate() {
            t.insert(*a, n as u32 + 1);
        }
        let stored = addrs.iter().filter(|a| t.get(**a).is_some()).count();
        assert_eq!(
            stored,
            SLOTS / 4 * 3 - 2,
            "three quarters full, then no more"
        );
        for (n, a) in addrs.iter().enumerate().take(100) {
            assert_eq!(t.get(*a), Some(n as u32 + 1));
        }
    }
}
