//! Process-wide values a forked child can swap for fresh ones.

use std::sync::atomic::{AtomicPtr, Ordering};

/// A value that lives for the whole process and that a forked child can
/// replace: a lock some parent thread held at the `fork()` stays locked
/// forever in the child (that thread does not exist there), so the child
/// leaks the old value, never touching it again, and uses a new one.
pub(crate) struct ForkFresh<T: 'static> {
    first: T,
    /// Null while `first` is in use, else a leaked `Box<T>`, never freed.
    replaced: AtomicPtr<T>,
}

impl<T> ForkFresh<T> {
    pub(crate) const fn new(first: T) -> Self {
        ForkFresh {
            first,
            replaced: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The value in use.
    #[inline]
    pub(crate) fn get(&'static self) -> &'static T {
        // SAFETY: null or a leaked `Box<T>`, never freed.
        unsafe { self.replaced.load(Ordering::Acquire).as_ref() }.unwrap_or(&self.first)
    }

    /// Puts `fresh` in use from now on; the value in use before is leaked.
    pub(crate) fn replace(&'static self, fresh: T) {
        self.replaced
            .store(Box::into_raw(Box::new(fresh)), Ordering::Release);
    }
}
