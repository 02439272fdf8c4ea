//! The families a process knows and the words that switch their groups.
//!
//! # Which families a program knows: a link-time registry
//!
//! Every family declared with `define_span_group!` (the shipped `megatron`,
//! `nemo_rl`, `nemo_gym`, `inference_server`, and a user's own, in any crate
//! of the program) submits itself to a link-time registry (the `inventory`
//! crate: one static node per family, linked into a list before `main`, no
//! lock and no allocation). [`span_group_families`] returns the base family,
//! every family linked into the program and every family registered at run
//! time with [`register_family`]; `setup_telemetry_from_env`,
//! `TelemetryBuilder::from_env`, `LensConfig::from_env` and the `tracing`
//! bridge resolve names against exactly that list, so
//! `NEMO_LENS_SPAN_GROUPS=per_step,layer` works with no code. We chose a
//! well-kept crate over a hand-written declared list because a declared list
//! cannot see a user's family without one more call, and forgetting that call
//! is the silent failure this registry removes; `inventory` over `linkme`
//! because `linkme` names its link section after the slice, so two copies of
//! this crate in one binary (a test of this crate that also links `lens`, two
//! semver-incompatible versions) would collide, while `inventory` keys its
//! list by type. Explicit lists (`LensConfig::from_env_with`,
//! [`SpanGroupSet::resolve`]) still resolve against exactly what they are
//! given.

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

/// A family linked into the program: `define_span_group!` submits one per
/// family to the link-time registry. Not public API.
#[doc(hidden)]
#[derive(Debug)]
pub struct LinkedFamily(pub &'static SpanGroupFamily);

inventory::collect!(LinkedFamily);

fn linked() -> impl Iterator<Item = &'static SpanGroupFamily> {
    inventory::iter::<LinkedFamily>.into_iter().map(|l| l.0)
}

/// Every family this program knows: the base family first, then every
/// family linked into the program (declared with `define_span_group!` in any
/// of its crates, sorted by name), then every family registered at run time
/// with [`register_family`], each once. This is the list
/// `setup_telemetry_from_env`, `LensConfig::from_env` and the `tracing`
/// bridge resolve names against.
///
/// ```
/// let names: Vec<_> = lens::span_group_families().iter().map(|f| f.name()).collect();
/// assert_eq!(names[0], "base");
/// assert!(names.contains(&"megatron") && names.contains(&"nemo_gym"));
/// ```
pub fn span_group_families() -> Vec<&'static SpanGroupFamily> {
    let mut linked: Vec<_> = linked().collect();
    linked.sort_by_key(|f| f.name);
    let mut all: Vec<&'static SpanGroupFamily> = vec![&base::FAMILY];
    for f in linked.into_iter().chain(registered()) {
        if !all.iter().any(|k| std::ptr::eq(*k, f)) {
            all.push(f);
        }
    }
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
    for f in linked() {
        register_locked(f);
    }
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
        .chain(linked())
        .filter(|f| family.is_none_or(|n| f.name.eq_ignore_ascii_case(n)))
        .flat_map(|f| f.groups.iter())
        .any(|g| g.name.eq_ignore_ascii_case(group) && g.is_enabled())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    // a family linked the way `define_span_group!` links one: no call to
    // `register_family` anywhere
    static WORD: AtomicU64 = AtomicU64::new(0);
    const ZLAYER: SpanGroup = SpanGroup::__new("zlayer", "zz_linked", &WORD, 0);
    const ZDATA: SpanGroup = SpanGroup::__new("zdata", "zz_linked", &WORD, 1);
    static LINKED: SpanGroupFamily = SpanGroupFamily::__new(
        "zz_linked",
        &WORD,
        &[&ZLAYER, &ZDATA],
        &[
            Preset::__new("per_step", 0xff, 0b10),
            Preset::__new("all", 0xff, 0b11),
        ],
    );
    inventory::submit! { LinkedFamily(&LINKED) }

    #[test]
    fn a_linked_family_is_known_without_registration_base_first_each_once() {
        let all = span_group_families();
        assert!(std::ptr::eq(all[0], &base::FAMILY));
        assert_eq!(all.iter().filter(|f| std::ptr::eq(**f, &LINKED)).count(), 1);
        register_family(&LINKED);
        let again = span_group_families();
        assert_eq!(
            again.len(),
            all.len(),
            "registering a linked family adds nothing"
        );
    }

    #[test]
    fn a_spec_resolves_against_every_linked_family() {
        let set = SpanGroupSet::resolve("per_step,zlayer", &span_group_families()).unwrap();
        // the family's own per_step (zdata) and the named group
        assert!(set.contains(&ZDATA) && set.contains(&ZLAYER));
        assert!(set.contains(&base::OPTIMIZER));
        let set = SpanGroupSet::resolve("per_step", &span_group_families()).unwrap();
        assert!(set.contains(&ZDATA) && !set.contains(&ZLAYER));
        let off: Vec<_> = set
            .off_in_reached_families()
            .iter()
            .map(|g| g.name)
            .collect();
        assert_eq!(off, ["zlayer"]);
    }

    #[test]
    fn a_linked_family_is_looked_up_by_name_without_registration() {
        // `is_span_group_enabled` sees linked families; the word is off
        assert!(!is_span_group_enabled("zz_linked.zlayer"));
        assert!(!is_span_group_enabled("zlayer"));
    }
}
