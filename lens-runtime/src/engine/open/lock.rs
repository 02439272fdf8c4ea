//! The lock of a thread's open-span list.
//!
//! Hand-written rather than taken from a crate: `parking_lot`'s mutex
//! releases with a compare-and-swap (a locked instruction, which is what
//! this lock avoids), and the `spin` crate's releases with a plain store
//! but waits only by spinning or yielding, with no state to move on to
//! naps; a lock that a real-time thread may wait on needs them.

use crate::engine::sync::{back_off, AtomicBool, UnsafeCell};
use std::marker::PhantomData;
use std::sync::atomic::Ordering;

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
        let mut waits = 0u32;
        loop {
            while self.held.load(Ordering::Relaxed) {
                waits = waits.saturating_add(1);
                back_off(waits);
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
        self.lock.value.with(|v| unsafe { &*v })
    }
}

impl<T> std::ops::DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock.
        self.lock.value.with_mut(|v| unsafe { &mut *v })
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

/// Model tests (`--cfg lens_loom`, CONTRIBUTING.md): every interleaving of the
/// threads, and every value the orderings let a load see.
#[cfg(all(test, lens_loom))]
mod loom_model {
    use super::SpinLock;
    use loom::sync::Arc;
    use loom::thread;

    /// Adds one under the lock, as a read and a write apart: two holders
    /// at once would lose an update (and `loom` finds the unordered
    /// accesses to the value).
    fn add_one(lock: &SpinLock<u64>) {
        let mut held = lock.lock();
        let seen = *held;
        *held = seen + 1;
    }

    /// Two threads adding twice under the lock lose no update. (Three
    /// threads that spin are past what `loom` explores in minutes, even
    /// with preemptions bounded.)
    #[test]
    fn loom_spin_lock_excludes() {
        loom::model(|| {
            let lock = Arc::new(SpinLock::<u64>::default());
            let other = {
                let lock = Arc::clone(&lock);
                thread::spawn(move || (0..2).for_each(|_| add_one(&lock)))
            };
            (0..2).for_each(|_| add_one(&lock));
            other.join().unwrap();
            assert_eq!(*lock.lock(), 4);
        });
    }

    /// What a holder wrote is what the next holder reads (the release
    /// store and the acquiring exchange order the two), whichever of the
    /// two takes the lock first.
    #[test]
    fn loom_spin_lock_publishes_to_the_next_holder() {
        loom::model(|| {
            let lock = Arc::new(SpinLock::<(bool, Vec<u64>)>::default());
            let writer = {
                let lock = Arc::clone(&lock);
                thread::spawn(move || {
                    let mut held = lock.lock();
                    held.1.extend([1, 2, 3]);
                    held.0 = true;
                })
            };
            let seen = {
                let held = lock.lock();
                held.0.then(|| held.1.clone())
            };
            assert!(matches!(seen.as_deref(), None | Some([1, 2, 3])));
            writer.join().unwrap();
            assert_eq!(lock.lock().1, [1, 2, 3]);
        });
    }

    /// A thread that panics while it holds the lock releases it as it
    /// unwinds: the other thread takes it, and sees what was written
    /// before the panic.
    #[test]
    fn loom_spin_lock_is_released_by_a_panic() {
        loom::model(|| {
            let lock = Arc::new(SpinLock::<u64>::default());
            let panicking = {
                let lock = Arc::clone(&lock);
                thread::spawn(move || {
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let mut held = lock.lock();
                        *held += 1;
                        panic!("inside");
                    }));
                    assert!(r.is_err());
                })
            };
            add_one(&lock);
            panicking.join().unwrap();
            assert_eq!(*lock.lock(), 2);
        });
    }
}
