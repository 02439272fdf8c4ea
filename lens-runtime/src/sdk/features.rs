//! What this build can do: a configuration that needs a Cargo feature the
//! build lacks is a setup error naming the setting and the feature, before
//! anything is installed.

#[cfg(not(feature = "file"))]
use crate::config::ExporterKind;
use crate::config::LensConfig;

/// The message for `setting`, which needs `feature`.
pub(crate) fn needs(setting: &str, feature: &str) -> String {
    format!(
        "{setting} needs the `{feature}` feature of nemo-lens, which this build lacks \
         (features = [\"{feature}\"] on the nemo-lens dependency)"
    )
}

/// Checks that this build has the features `cfg` needs.
pub(crate) fn check(cfg: &LensConfig) -> Result<(), String> {
    #[cfg(not(feature = "file"))]
    if matches!(cfg.exporter, ExporterKind::File | ExporterKind::Perfetto) {
        return Err(needs(
            &format!("NEMO_LENS_EXPORTER={}", cfg.exporter.as_str()),
            "file",
        ));
    }
    #[cfg(not(feature = "gpu"))]
    if cfg.gpu_metrics {
        return Err(needs("NEMO_LENS_GPU_METRICS=1", "gpu"));
    }
    #[cfg(not(feature = "signal"))]
    if cfg.flush_on_signal {
        return Err(needs("NEMO_LENS_FLUSH_ON_SIGNAL=1", "signal"));
    }
    let _ = cfg;
    Ok(())
}
