//! `fork()`: a child forked while a lens pipeline is live keeps recording,
//! on a pipeline of its own.
//!
//! Only the forking thread exists in a child: the exporter threads do not,
//! a lock another thread of the parent held at the moment of the fork
//! stays locked forever, and the parent's exporters (a gRPC connection, a
//! buffered batch) must not be used from two processes. So at the fork, in
//! the child, the fork handler only forgets: the lens tracer and recorder,
//! the open-span registry (without ending the parent's spans: the parent
//! exports them, the child never does) and the batches in flight in the
//! parent's threads; the parent's pipeline objects, which the child still
//! references, see that they belong to an earlier process ([`epoch`]) and
//! drop what reaches them. Every store it makes is a plain atomic one.
//!
//! Then, when the parent's setup left a recipe ([`set_recipe`]: an
//! exporting rank set up without a custom processor or reader), the child's
//! first span start finds no tracer and sets lens up again from that
//! recipe (setup's `respawn_after_fork`, through [`take_pending_recipe`]): the parent's configuration, rank and
//! run id, a resource of its own (its `process.pid`), new exporter threads
//! and connections, fresh span ids (the id generator is fork-safe). The
//! child's spans are exported by the child; its copy of the parent's
//! handle shuts the child's pipeline down (on `shutdown` or drop), so a
//! child that ends with `_exit` without it loses what it recorded, as a
//! Python child ending with `os._exit` does. Without a recipe (a custom
//! processor or reader, or a respawn that failed) the child is inert as
//! before: its span groups are off and the spans that still reach a lens
//! processor are dropped and counted, and it may set lens up itself.
//! A child forked while no pipeline is live is an ordinary process.

use crate::config::LensConfig;
use opentelemetry::KeyValue;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::Once;

/// What a forked child needs to set lens up again as its parent did.
#[derive(Debug, Clone)]
pub(crate) struct Recipe {
    /// The parent's configuration, its run id fixed (the child's run is
    /// the parent's) and quiet (no setup line per child).
    pub(crate) config: LensConfig,
    pub(crate) rank: u32,
    pub(crate) world_size: u32,
    pub(crate) resource_attributes: Vec<KeyValue>,
    pub(crate) k8s_dir: Option<PathBuf>,
}

/// The recipe of the live exporting pipeline, or null. Each set leaks the
/// previous one (sets are rare: setups), so a child reads it with one load.
static RECIPE: AtomicPtr<Recipe> = AtomicPtr::new(std::ptr::null_mut());
/// A child forked from a pipeline with a recipe that has not set up again.
static PENDING: AtomicBool = AtomicBool::new(false);
/// The pipeline a child set up from the recipe (setup's handle, which this
/// layer does not name), owned here (leaked box).
static CHILD: AtomicPtr<ChildPipeline> = AtomicPtr::new(std::ptr::null_mut());

/// The pipeline a forked child set up: setup's handle, type-erased.
pub(crate) type ChildPipeline = Box<dyn std::any::Any>;
/// Forks this process descends from (since it armed the handler): a
/// pipeline built in an earlier epoch belongs to an ancestor process.
static EPOCH: AtomicU64 = AtomicU64::new(0);

static IN_CHILD: AtomicBool = AtomicBool::new(false);
/// Whether a pipeline is live (a fork now makes an inert child).
static ARMED: AtomicBool = AtomicBool::new(false);
/// Spans ended in an inert child (never exported).
static DROPPED_IN_CHILD: AtomicU64 = AtomicU64::new(0);

/// Whether this process is a child forked while a lens pipeline was live
/// (and has not set lens up again since).
#[inline]
pub(crate) fn in_child() -> bool {
    IN_CHILD.load(Ordering::Relaxed)
}

/// Setup arms the handler while a pipeline is live, and disarms it at the
/// pipeline's teardown (which forgets the recipe too).
pub(crate) fn set_armed(on: bool) {
    ARMED.store(on, Ordering::Release);
    if !on {
        set_recipe(None);
    }
}

/// The fork epoch of this process: pipeline objects remember theirs, and
/// one that differs was built by an ancestor (its threads are not here).
#[inline]
pub(crate) fn epoch() -> u64 {
    EPOCH.load(Ordering::Relaxed)
}

/// Sets (or clears) the recipe a forked child sets lens up again from.
pub(crate) fn set_recipe(recipe: Option<Recipe>) {
    let ptr = recipe.map_or(std::ptr::null_mut(), |r| Box::into_raw(Box::new(r)));
    // the previous recipe is leaked: a child forked meanwhile may read it
    RECIPE.store(ptr, Ordering::Release);
}

/// In a forked child whose parent left a recipe, on the first span start:
/// the recipe, once (later calls get `None`). Setup sets lens up again
/// from it and hands the pipeline to [`keep_child_pipeline`].
pub(crate) fn take_pending_recipe() -> Option<&'static Recipe> {
    if !PENDING.load(Ordering::Acquire) || !PENDING.swap(false, Ordering::AcqRel) {
        return None;
    }
    // SAFETY: null or a leaked, never freed `Box<Recipe>`.
    unsafe { RECIPE.load(Ordering::Acquire).as_ref() }
}

/// Keeps the pipeline this forked child set up (replacing one kept before).
pub(crate) fn keep_child_pipeline(pipeline: ChildPipeline) {
    let old = CHILD.swap(Box::into_raw(Box::new(pipeline)), Ordering::AcqRel);
    if !old.is_null() {
        // SAFETY: a box this function leaked, taken once by the swap
        drop(unsafe { Box::from_raw(old) });
    }
}

/// The pipeline this forked child set up from its parent's recipe, taken
/// (its copy of the parent's handle shuts it down).
pub(crate) fn take_child_pipeline() -> Option<ChildPipeline> {
    let ptr = CHILD.swap(std::ptr::null_mut(), Ordering::AcqRel);
    // SAFETY: null or a box `keep_child_pipeline` leaked, taken once by the swap
    (!ptr.is_null()).then(|| *unsafe { Box::from_raw(ptr) })
}

/// `f` on the pipeline this forked child set up, if any.
pub(crate) fn with_child_pipeline<R>(f: impl FnOnce(Option<&ChildPipeline>) -> R) -> R {
    // SAFETY: null or a leaked box; only `take_child_pipeline` frees it,
    // from the handle's shutdown, which a flush does not race in a child
    // that follows the handle's contract (one owner)
    f(unsafe { CHILD.load(Ordering::Acquire).as_ref() })
}

/// A child that sets lens up again leaves the inert state: its new
/// pipeline (threads, queues) is its own.
pub(crate) fn leave_child() {
    IN_CHILD.store(false, Ordering::Release);
    DROPPED_IN_CHILD.store(0, Ordering::Relaxed);
}

/// Counts a span dropped because this is an inert child.
pub(crate) fn note_dropped() {
    DROPPED_IN_CHILD.fetch_add(1, Ordering::Relaxed);
}

/// Spans dropped in this inert child so far.
pub(crate) fn dropped_in_child() -> u64 {
    DROPPED_IN_CHILD.load(Ordering::Relaxed) + crate::engine::recorder::dropped_in_child()
}

/// Registers the fork handler, once per process.
pub(crate) fn install_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `child` runs in the child, which has one thread, after
        // the C library has made its allocator usable there (glibc resets
        // malloc's locks before it calls the atfork child handlers). It
        // does atomic stores, and may allocate and free: a fresh span
        // registry when the old one's lock was held at the fork
        // (`ForkFresh::replace` boxes it), and the old registry's list of
        // lists cleared. It takes no lock that another thread of the
        // parent may have held (a registry lock held at fork is left,
        // never waited for). Not async-signal-safe in POSIX's strict sense;
        // sound with glibc, the C library lens supports.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(child)) };
        if rc != 0 {
            crate::diag::warn(format_args!(
                "cannot register the fork handler (error {rc}); a forked child may export its parent's spans"
            ));
        }
    });
}

extern "C" fn child() {
    if !ARMED.load(Ordering::Acquire) {
        return;
    }
    DROPPED_IN_CHILD.store(0, Ordering::Relaxed);
    IN_CHILD.store(true, Ordering::Relaxed);
    EPOCH.fetch_add(1, Ordering::Relaxed);
    // the grandparent's pipeline (if this parent was a respawned child)
    // is the parent's to shut down, never the child's
    CHILD.store(std::ptr::null_mut(), Ordering::Relaxed);
    if RECIPE.load(Ordering::Acquire).is_null() {
        crate::api::groups::disable_all_after_fork();
    } else {
        // groups stay as they were: the first span start sets up again
        PENDING.store(true, Ordering::Release);
    }
    crate::api::span::forget_tracer_after_fork();
    crate::engine::open::reset_after_fork();
    // batches in flight in the parent's threads do not exist here
    crate::engine::open::record_slots::reset_after_fork();
}
