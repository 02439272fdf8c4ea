//! The lock of a thread's open-span list.
//!
//! Hand-written rather than taken from a crate: `parking_lot`'s mutex
//! releases with a compare-and-swap (a locked instruction, which is what
//! this lock avoids), and the `spin` crate's releases with a plain store
//! but waits only by spinning or yielding, with no state to move on to
//! naps; a lock that a real-time thread may wait on needs them.

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};

/// A lock that its owner thread takes twice a span and other threads
/// rarely (the collector's drain, shutdown): released with a plain store,
/// not the read-modify-write `std::sync::Mutex` releases with (a locked
/// instruction, which waits for every store before it).
#[derive(Debug, Default)]
pub(crate) struct SpinLock<T> {
    held: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and one guard at a
// time exists (`held`).
unsafe impl<T: Send> Sync for SpinLock<T> {}

/// The lock held; released on drop (also while unwinding). Neither `Send`
/// nor `Sync`, as `std`'s `MutexGuard` is not `Send`: it is released on
/// the thread that took it, and never shares the value between threads.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
    _not_send: PhantomData<*const ()>,
}

impl<T> SpinLock<T> {
    /// Takes the lock, spinning, then yielding, then sleeping while
    /// another thread holds it (only ever for a short, non-blocking
    /// section). The naps let a holder of lower real-time priority run on
    /// a CPU where `yield` would hand the CPU straight back.
    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        if self
            .held
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        SpinGuard {
            lock: self,
            _not_send: PhantomData,
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        let mut spins = 0u32;
        loop {
            while self.held.load(Ordering::Relaxed) {
                spins = spins.saturating_add(1);
                match spins {
                    0..=64 => std::hint::spin_loop(),
                    65..=1_064 => std::thread::yield_now(),
                    _ => std::thread::sleep(std::time::Duration::from_micros(50)),
                }
            }
            if self
                .held
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }
}

impl<T> std::ops::Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> std::ops::DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.held.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two threads adding under the lock lose no update, and a panic
    /// while it is held releases it.
    #[test]
    fn excludes_and_is_released_by_a_panic() {
        let lock: &'static SpinLock<u64> = Box::leak(Box::default());
        let add = move || {
            for _ in 0..100_000 {
                *lock.lock() += 1;
            }
        };
        let t = std::thread::spawn(add);
        add();
        t.join().unwrap();
        assert_eq!(*lock.lock(), 200_000);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _g = lock.lock();
            panic!("inside");
        }));
        assert!(r.is_err());
        *lock.lock() += 1;
        assert_eq!(*lock.lock(), 200_001);
    }
}
