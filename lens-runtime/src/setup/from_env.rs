//! Setup with no configuration beyond the environment: `LensConfig` from
//! `NEMO_LENS_*`, rank and world size from the launcher.

use super::builder::TelemetryBuilder;
use super::error::SetupError;
use super::handle::TelemetryHandle;
use crate::config::LensConfig;
use crate::host::launcher;

impl TelemetryBuilder {
    /// A builder for this process as its launcher started it: the
    /// configuration from `NEMO_LENS_*` ([`LensConfig::from_env`]), rank and
    /// world size from the first launcher that sets both, in this order:
    /// `NEMO_LENS_RANK`/`NEMO_LENS_WORLD_SIZE` (an explicit override),
    /// torchrun (`RANK`/`WORLD_SIZE`), Open MPI
    /// (`OMPI_COMM_WORLD_RANK`/`_SIZE`), MPICH/Hydra (`PMI_RANK`/`PMI_SIZE`),
    /// SLURM (`SLURM_PROCID`/`SLURM_NTASKS`); none: rank 0 of 1. Rank and
    /// world passed to [`TelemetryBuilder::new`] instead always win.
    ///
    /// ```
    /// let handle = lens::TelemetryBuilder::from_env().unwrap().install().unwrap();
    /// # drop(handle);
    /// ```
    pub fn from_env() -> Result<TelemetryBuilder, SetupError> {
        let config = LensConfig::from_env()?;
        let at = launcher::launch(&crate::vars::var)?;
        Ok(TelemetryBuilder::new(config, at.rank, at.world_size))
    }
}

/// [`TelemetryBuilder::from_env`], installed: the one call a job launched
/// by torchrun, `mpirun` or `srun` needs.
///
/// ```
/// let handle = lens::setup_telemetry_from_env().unwrap();
/// println!("run {}", handle.run_id());
/// ```
pub fn setup_telemetry_from_env() -> Result<TelemetryHandle, SetupError> {
    TelemetryBuilder::from_env()?.install()
}
