//! Telemetry of the commands that write spans themselves (`exec`,
//! `emit-spans`): lens configured from the same `NEMO_LENS_*` and `OTEL_*`
//! variables as the library, as a process that is not a rank.
//!
//! Such a process always exports when telemetry is on (it is one process
//! outside the ranks, so no export strategy applies), records no metrics or
//! logs, and never flushes on a signal itself. With the `file` exporter it
//! writes its own file next to the ranks' (see [`own_file`]), so the
//! launcher and the rank 0 it starts never share one.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use lens::{ExporterKind, LensConfig, TelemetryBuilder, TelemetryHandle};

/// How long shutdown may take to export what is left.
pub(crate) const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// The variable that hands a run id to the ranks (read by the library).
pub(crate) const RUN_ID_VAR: &str = "NEMO_LENS_RUN_ID";

/// The run id of this process and whether it was made up here (rather than
/// configured or taken from the launcher).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunId {
    /// The id.
    pub(crate) id: String,
    /// Made up here: children should be given it to share it.
    pub(crate) generated: bool,
}

/// The run id by the library's rule ([`lens::shared_run_id`]: the
/// configured one, else the launcher's job id), else 12 random hex digits.
pub(crate) fn resolve_run_id(cfg: &LensConfig, lookup: impl Fn(&str) -> Option<String>) -> RunId {
    if let Some(id) = lens::shared_run_id(cfg, lookup) {
        return RunId {
            id,
            generated: false,
        };
    }
    // the standard library seeds every `RandomState` from the OS
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    RunId {
        id: format!("{:012x}", random & 0xffff_ffff_ffff),
        generated: true,
    }
}

/// The file this process writes with the `file` exporter:
/// `NEMO_LENS_FILE_PATH` with `{rank}` replaced by `tag` (a path without
/// `{rank}` is shared: the exporter appends whole lines), else
/// `lens-telemetry/<run_id>-<tag>.otlp.jsonl`.
///
/// ```text
/// runs/rank{rank}.otlp.jsonl   → runs/rankexec.otlp.jsonl
/// (unset)                      → lens-telemetry/<run_id>-exec.otlp.jsonl
/// ```
pub(crate) fn own_file(configured: Option<&str>, run_id: &str, tag: &str) -> String {
    match configured {
        Some(path) => path.replace("{rank}", tag),
        None => format!("lens-telemetry/{run_id}-{tag}.otlp.jsonl"),
    }
}

/// Settles `cfg` for a non-rank process named `tag` and sets telemetry up:
/// the run id is fixed (returned, to hand on), the file is [`own_file`],
/// `service.instance.id` is `<run_id>-<tag>` (not a rank's), metrics, logs
/// and the signal flush are off, and this process exports.
pub(crate) fn install(mut cfg: LensConfig, tag: &str) -> Result<(TelemetryHandle, RunId), String> {
    let run_id = resolve_run_id(&cfg, |v| std::env::var(v).ok());
    cfg.run_id = Some(run_id.id.clone());
    if cfg.exporter == ExporterKind::File {
        cfg.file_path = Some(own_file(cfg.file_path.as_deref(), &run_id.id, tag));
    }
    cfg.metrics_enabled = false;
    cfg.logs_enabled = false;
    let instance = format!("{}-{tag}", run_id.id);
    let handle = TelemetryBuilder::new(cfg, 0, 1)
        .with_resource_attribute(lens::semconv::SERVICE_INSTANCE_ID, instance)
        .flush_on_signal(false)
        .gpu_metrics(false)
        .with_export_strategy(|_, _, _| true)
        .install()
        .map_err(|e| format!("telemetry setup failed: {e:?}"))?;
    Ok((handle, run_id))
}

/// Shuts telemetry down, exporting what is left within [`SHUTDOWN_TIMEOUT`];
/// the error says what was lost (the library has written it on stderr).
pub(crate) fn shutdown(handle: &TelemetryHandle) -> Result<(), String> {
    handle
        .shutdown(SHUTDOWN_TIMEOUT)
        .into_result()
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_id_comes_from_config_then_slurm_then_random() {
        let mut cfg = LensConfig::default();
        let slurm = |v: &str| (v == "SLURM_JOB_ID").then(|| " 4242 ".to_owned());
        let none = |_: &str| None;
        cfg.run_id = Some(" mine ".into());
        assert_eq!(resolve_run_id(&cfg, slurm).id, "mine");
        cfg.run_id = Some("  ".into());
        let from_slurm = resolve_run_id(&cfg, slurm);
        assert_eq!(
            (from_slurm.id.as_str(), from_slurm.generated),
            ("4242", false)
        );
        let a = resolve_run_id(&cfg, none);
        let b = resolve_run_id(&cfg, none);
        assert!(
            a.generated && a.id.len() == 12 && a.id != b.id,
            "{a:?} {b:?}"
        );
        assert!(a.id.bytes().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn own_file_replaces_rank_or_follows_the_default_layout() {
        assert_eq!(
            own_file(Some("/r/run-rank{rank}.otlp.jsonl"), "x", "exec"),
            "/r/run-rankexec.otlp.jsonl"
        );
        assert_eq!(own_file(Some("/r/all.jsonl"), "x", "exec"), "/r/all.jsonl");
        assert_eq!(
            own_file(None, "abc", "emit-spans"),
            "lens-telemetry/abc-emit-spans.otlp.jsonl"
        );
    }
}
