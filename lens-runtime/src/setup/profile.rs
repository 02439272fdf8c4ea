//! The profiling half of setup: a rank that does not export keeps a
//! per-step phase profile (`sdk::profile`): with the `file` or `perfetto`
//! exporter in a small file of its own, with any other exporter in memory
//! until the ranks gather it (`TelemetryHandle::gather_profiles`). One
//! synchronous processor on a plain SDK tracer provider: no batch
//! processor, no exporter thread, no runtime, no connection.

use super::builder::TelemetryBuilder;
use super::handle::TelemetryHandle;
use super::signal;
use crate::api::groups::set_enabled_span_groups;
use crate::api::span;
use crate::config::plan::Plan;
use crate::config::{ExporterKind, LensConfig};
use crate::engine::open;
use crate::sdk::profile::{Meta, Profiling};
use std::sync::Arc;

/// Whether a rank that does not export keeps a profile under `cfg`:
/// `Some(true)` in a file (the file exporters), `Some(false)` in memory
/// (any other exporter), `None` not at all.
fn wanted(cfg: &LensConfig) -> Option<bool> {
    let keeps = cfg.enabled
        && cfg.traces_enabled
        && cfg.profile
        // a build that cannot export (or flush on a signal, when asked)
        // fails on the exporting rank; this one keeps no profile
        && crate::sdk::features::check(cfg).is_ok();
    keeps.then_some(matches!(
        cfg.exporter,
        ExporterKind::File | ExporterKind::Perfetto
    ))
}

impl TelemetryBuilder {
    /// This rank's profile when it keeps one under `cfg` ([`wanted`]):
    /// opens its file and builds its provider; `None` (with one warning)
    /// when the file cannot be opened: the job goes on without a profile of
    /// this rank. Installs nothing.
    pub(super) fn open_profile(&self, cfg: &LensConfig, run_id: &str) -> Option<Profiling> {
        let in_file = wanted(cfg)?;
        let path = in_file.then(|| crate::sdk::profile::path_for(cfg, run_id, self.rank));
        let meta = Meta {
            run: run_id.to_owned(),
            rank: self.rank,
            world: self.world_size,
            host: crate::host::resource::hostname().unwrap_or_default(),
        };
        match Profiling::open(path.as_deref(), meta) {
            Ok(p) => Some(p),
            Err(e) => {
                crate::diag::warn(format_args!(
                    "warning: cannot open the profile file {}: {e}; rank {} keeps no profile \
                     (NEMO_LENS_PROFILE=0 turns the profile off)",
                    path.as_deref()
                        .unwrap_or(std::path::Path::new(""))
                        .display(),
                    self.rank
                ));
                None
            }
        }
    }
}

/// Installs `profiling` as the process's tracer (after `take_over`): the
/// plan's span groups on, open spans tracked (so shutdown and the signal
/// flush end them, truncated), the signal hook when asked. Cannot fail.
impl TelemetryBuilder {
    /// Installs `profiling` (see [`install`]).
    pub(super) fn install_profile(
        &self,
        plan: &Plan,
        generation: u64,
        run_id: String,
        profiling: Profiling,
    ) -> TelemetryHandle {
        install(plan, self.world_size, generation, run_id, profiling)
    }
}

fn install(
    plan: &Plan,
    world_size: u32,
    generation: u64,
    run_id: String,
    profiling: Profiling,
) -> TelemetryHandle {
    crate::sdk::fork::set_armed(true);
    span::set_tracer_provider(&profiling.provider);
    open::set_tracking(true);
    set_enabled_span_groups(&plan.groups);
    if plan.config.flush_on_signal {
        let weak = Arc::downgrade(&profiling.profile);
        signal::set_live(
            generation,
            plan.otel.signal_flush_timeout,
            world_size,
            Box::new(move |truncate, _timeout| match weak.upgrade() {
                Some(p) => {
                    let before = p.tally();
                    if truncate {
                        // each open step and phase ends, marked truncated,
                        // and its line is written as it ends
                        open::truncate_all(signal::SIGNAL_REASON);
                    }
                    crate::sdk::report::ShutdownReport {
                        traces: p.report_since(before),
                        ..Default::default()
                    }
                }
                None => Default::default(),
            }),
        );
    }
    TelemetryHandle::profiling(profiling, generation, run_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_exporters_keep_a_file_others_memory() {
        let mut cfg = LensConfig {
            enabled: true,
            ..Default::default()
        };
        assert_eq!(wanted(&cfg), Some(false), "otlp: in memory");
        cfg.exporter = ExporterKind::Console;
        assert_eq!(wanted(&cfg), Some(false));
        cfg.exporter = ExporterKind::File;
        assert_eq!(wanted(&cfg), Some(true));
        cfg.profile = false;
        assert_eq!(wanted(&cfg), None);
    }
}
