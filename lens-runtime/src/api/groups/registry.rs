//! The families a process knows and the words that switch their groups.

use super::family::*;
use super::set::*;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Mutex;

// Families that have ever been enabled or looked up: an append-only,
// lock-free-to-read list so `is_span_group_enabled` never takes a lock.
const MAX_FAMILIES: usize = 64;
static FAMILIES: [AtomicPtr<SpanGroupFamily>; MAX_FAMILIES] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_FAMILIES];
static FAMILY_COUNT: AtomicUsize = AtomicUsize::new(0);
static WRITE_LOCK: Mutex<()> = Mutex::new(());

fn registered() -> impl Iterator<Item = &'static SpanGroupFamily> {
    let n = FAMILY_COUNT.load(Ordering::Acquire);
    FAMILIES[..n].iter().filter_map(|p| {
        // SAFETY: only `&'static SpanGroupFamily` pointers are ever stored.
        unsafe { p.load(Ordering::Acquire).as_ref() }
    })
}

/// The base family, then every family registered so far.
#[cfg(feature = "tracing")]
pub(crate) fn known_families() -> Vec<&'static SpanGroupFamily> {
    let mut all = vec![&base::FAMILY];
    all.extend(registered().filter(|f| !std::ptr::eq(*f, &base::FAMILY)));
    all
}

/// Makes `family` known to [`is_span_group_enabled`]. Enabling groups does
/// this for every family of the set; calling it twice is harmless.
///
/// ```
/// lens::register_family(&lens::groups::FAMILY);
/// ```
pub fn register_family(family: &'static SpanGroupFamily) {
    let _lock = WRITE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    register_locked(family);
}

fn register_locked(family: &'static SpanGroupFamily) {
    if registered().any(|f| std::ptr::eq(f, family)) {
        return;
    }
    let n = FAMILY_COUNT.load(Ordering::Relaxed);
    if n < MAX_FAMILIES {
        FAMILIES[n].store(family as *const _ as *mut _, Ordering::Release);
        FAMILY_COUNT.store(n + 1, Ordering::Release);
    }
}

/// Enables exactly the groups of `set` process-wide (every other group of
/// every known family is switched off). Writes happen under a lock; reads
/// ([`SpanGroup::is_enabled`]) stay lock-free.
///
/// ```
/// use lens::{groups, set_enabled_span_groups, SpanGroupSet};
/// set_enabled_span_groups(&SpanGroupSet::resolve("step", &[]).unwrap());
/// assert!(groups::STEP.is_enabled() && !groups::JOB.is_enabled());
/// set_enabled_span_groups(&SpanGroupSet::none());
/// assert!(!groups::STEP.is_enabled());
/// ```
pub fn set_enabled_span_groups(set: &SpanGroupSet) {
    let _lock = WRITE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    register_locked(&base::FAMILY);
    for (f, _) in &set.entries {
        register_locked(f);
    }
    for fam in registered() {
        let mask = set
            .entries
            .iter()
            .filter(|(f, _)| std::ptr::eq(f.word, fam.word))
            .fold(0, |acc, (_, m)| acc | m);
        fam.word.store(mask, Ordering::Relaxed);
    }
}

/// In a forked child: switches every group of every known family off with
/// plain atomic stores (no lock: a parent thread may have held it at the
/// fork).
#[cfg(feature = "sdk-core")]
pub(crate) fn disable_all_after_fork() {
    base::FAMILY.word.store(0, Ordering::Relaxed);
    for fam in registered() {
        fam.word.store(0, Ordering::Relaxed);
    }
}

/// Whether the group called `name` (case-insensitive, in any known family)
/// is enabled. Accepts `family.group` to pick one family. Lock-free.
///
/// ```
/// use lens::{is_span_group_enabled, set_enabled_span_groups, SpanGroupSet};
/// set_enabled_span_groups(&SpanGroupSet::resolve("optimizer", &[]).unwrap());
/// assert!(is_span_group_enabled("OPTIMIZER"));
/// assert!(is_span_group_enabled("base.optimizer"));
/// assert!(!is_span_group_enabled("job"));
/// # set_enabled_span_groups(&SpanGroupSet::none());
/// ```
pub fn is_span_group_enabled(name: &str) -> bool {
    let (family, group) = match name.split_once('.') {
        Some((f, g)) => (Some(f), g),
        None => (None, name),
    };
    std::iter::once(&base::FAMILY)
        .chain(registered())
        .filter(|f| family.is_none_or(|n| f.name.eq_ignore_ascii_case(n)))
        .flat_map(|f| f.groups.iter())
        .any(|g| g.name.eq_ignore_ascii_case(group) && g.is_enabled())
}
