//! The synchronization the engine's model-checked code is written with:
//! `std`'s, or under `--cfg lens_loom` (the model tests, CONTRIBUTING.md)
//! `loom`'s, which explores every interleaving of a test's threads and
//! every value the memory orderings allow a load to see.
//!
//! Both builds share one code path: the lock and the hand-over queue name
//! these types, never `std`'s directly. The `std` side adds nothing at run
//! time (re-exports, and an `UnsafeCell` whose `with`/`with_mut` are one
//! inlined call).

#[cfg(not(all(test, lens_loom)))]
pub(crate) use std::sync::atomic::AtomicBool;
// the hand-over queue's, which builds without `sdk-core` leave out
#[cfg(all(not(all(test, lens_loom)), feature = "sdk-core"))]
pub(crate) use std::sync::{Mutex, MutexGuard};

#[cfg(all(test, lens_loom))]
pub(crate) use loom::sync::atomic::AtomicBool;
#[cfg(all(test, lens_loom))]
pub(crate) use model_mutex::{Mutex, MutexGuard};

/// `std`'s `UnsafeCell` with `loom`'s interface: the value is reached
/// through a raw pointer inside a closure, so that `loom` can check each
/// access against the others (an access that no lock orders after the
/// last write is a data race, and fails the model).
#[cfg(not(all(test, lens_loom)))]
#[derive(Debug, Default)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(all(test, lens_loom)))]
impl<T> UnsafeCell<T> {
    /// Runs `f` on a pointer to the value, to read it.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Runs `f` on a pointer to the value, to write it.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(all(test, lens_loom))]
pub(crate) use loom::cell::UnsafeCell;

/// One wait of a lock that another thread holds, the `waits`-th in a
/// row: spinning first, then yielding the CPU, then sleeping 50 µs (a
/// holder of lower real-time priority then runs even on a CPU where a
/// yield hands the CPU straight back).
#[cfg(not(all(test, lens_loom)))]
#[inline]
pub(crate) fn back_off(waits: u32) {
    match waits {
        0..=64 => std::hint::spin_loop(),
        65..=1_064 => std::thread::yield_now(),
        _ => std::thread::sleep(std::time::Duration::from_micros(50)),
    }
}

/// Under `loom` every wait yields: the model runs another thread (it
/// explores a spin loop only through its yields).
#[cfg(all(test, lens_loom))]
pub(crate) fn back_off(_waits: u32) {
    loom::thread::yield_now();
}

/// `std`'s `Mutex` under `loom`: a compare-and-swap lock on `loom`'s
/// atomics, with `std`'s interface and orderings (acquire on taking,
/// release on giving back). Not `loom`'s own `Mutex`: in loom 0.7 a
/// `try_lock` that another thread's `lock` overtakes is blocked as if it
/// waited, and the model reports deadlocks the code cannot have
/// (tokio-rs/loom#376), and the hand-over relies on `try_lock`.
#[cfg(all(test, lens_loom))]
mod model_mutex {
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::AtomicBool;
    use std::sync::atomic::Ordering;
    use std::sync::{LockResult, TryLockError, TryLockResult};

    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T> {
        held: AtomicBool,
        value: UnsafeCell<T>,
    }

    // SAFETY: the value is reached only through a guard, and one guard at
    // a time exists (`held`).
    unsafe impl<T: Send> Sync for Mutex<T> {}

    #[derive(Debug)]
    pub(crate) struct MutexGuard<'a, T> {
        lock: &'a Mutex<T>,
    }

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex {
                held: AtomicBool::new(false),
                value: UnsafeCell::new(value),
            }
        }

        fn take(&self) -> bool {
            let ord = (Ordering::Acquire, Ordering::Relaxed);
            self.held
                .compare_exchange(false, true, ord.0, ord.1)
                .is_ok()
        }

        pub(crate) fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
            while !self.take() {
                loom::thread::yield_now();
            }
            Ok(MutexGuard { lock: self })
        }

        pub(crate) fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T>> {
            match self.take() {
                true => Ok(MutexGuard { lock: self }),
                false => Err(TryLockError::WouldBlock),
            }
        }
    }

    impl<T> std::ops::Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            // SAFETY: the guard holds the lock.
            self.lock.value.with(|v| unsafe { &*v })
        }
    }

    impl<T> std::ops::DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            // SAFETY: the guard holds the lock.
            self.lock.value.with_mut(|v| unsafe { &mut *v })
        }
    }

    impl<T> Drop for MutexGuard<'_, T> {
        fn drop(&mut self) {
            self.lock.held.store(false, Ordering::Release);
        }
    }
}
