//! The setup half of a forked child that keeps recording (`sdk::fork`
//! holds the recipe and the fork handler): the child's first span start
//! sets lens up again from its parent's recipe, and the child's copy of
//! the parent's handle flushes and shuts that pipeline down.

use super::builder::TelemetryBuilder;
use super::handle::TelemetryHandle;
use crate::sdk::report::ShutdownReport;
use std::time::Duration;

impl TelemetryBuilder {
    /// In a forked child whose parent left a recipe, on the first span
    /// start: sets lens up again from it, once. True when this call did,
    /// and the span path now has a tracer of the child's own. Registered
    /// with the span path at setup (`api::span::set_fork_respawn`).
    pub(super) fn respawn_after_fork() -> bool {
        let Some(recipe) = crate::sdk::fork::take_pending_recipe() else {
            return false;
        };
        match TelemetryBuilder::for_forked_child(recipe).install() {
            Ok(h) => {
                crate::sdk::fork::keep_child_pipeline(Box::new(h));
                true
            }
            Err(e) => {
                crate::diag::warn(format_args!(
                    "a forked child cannot set lens up again ({e}); it records nothing"
                ));
                crate::api::groups::disable_all_after_fork();
                false
            }
        }
    }
}

impl TelemetryHandle {
    /// The pipeline this forked child set up from its parent's recipe,
    /// taken (the child's copy of the parent's handle shuts it down).
    pub(super) fn take_child_pipeline() -> Option<TelemetryHandle> {
        crate::sdk::fork::take_child_pipeline()
            .and_then(|p| p.downcast::<TelemetryHandle>().ok())
            .map(|h| *h)
    }

    /// Flushes the pipeline this forked child set up, if any.
    pub(super) fn flush_child_pipeline(timeout: Duration) -> ShutdownReport {
        crate::sdk::fork::with_child_pipeline(|p| {
            match p.and_then(|p| p.downcast_ref::<TelemetryHandle>()) {
                Some(h) => h.force_flush_within(timeout),
                None => ShutdownReport::default(),
            }
        })
    }
}
