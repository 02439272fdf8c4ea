//! The real [`GpuLib`]: NVML (`libnvidia-ml.so.1`) through `nvml-wrapper`,
//! loaded at run time. The only code of lens that touches `nvml-wrapper`;
//! only the sampling thread of [`crate::host::gpu_worker`] calls it.

use crate::host::gpus::{GpuError, GpuLib};
use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

/// NVML's "MIG mode enabled" value of `MigMode::current`.
const MIG_ENABLED: u32 = 1;

/// Loads NVML (called once per process, by the process's worker).
pub(crate) fn load() -> Result<Box<dyn GpuLib>, String> {
    let nvml = Nvml::init().map_err(|e| e.to_string())?;
    Ok(Box::new(Real { nvml }))
}

struct Real {
    nvml: Nvml,
}

fn err(e: NvmlError) -> GpuError {
    match e {
        NvmlError::NotSupported => GpuError::NotSupported,
        e => GpuError::Failed(e.to_string()),
    }
}

impl Real {
    fn device(&self, index: u32) -> Result<Device<'_>, GpuError> {
        self.nvml.device_by_index(index).map_err(err)
    }
}

impl GpuLib for Real {
    fn device_count(&mut self) -> Result<u32, GpuError> {
        self.nvml.device_count().map_err(err)
    }
    fn uuid(&mut self, index: u32) -> Result<String, GpuError> {
        self.device(index)?.uuid().map_err(err)
    }
    fn name(&mut self, index: u32) -> Result<String, GpuError> {
        self.device(index)?.name().map_err(err)
    }
    fn mig_uuids(&mut self, index: u32) -> Result<Vec<String>, GpuError> {
        let dev = self.device(index)?;
        if dev.mig_mode().map_err(err)?.current != MIG_ENABLED {
            return Ok(Vec::new());
        }
        let slots = dev.mig_device_count().map_err(err)?;
        // empty slots fail (NotFound); instances this process cannot open
        // too
        Ok((0..slots)
            .filter_map(|s| dev.mig_device_by_index(s).ok()?.uuid().ok())
            .collect())
    }
    fn driver_version(&mut self) -> Result<String, GpuError> {
        self.nvml.sys_driver_version().map_err(err)
    }
    fn utilization_percent(&mut self, index: u32) -> Result<u32, GpuError> {
        Ok(self.device(index)?.utilization_rates().map_err(err)?.gpu)
    }
    fn memory_bytes(&mut self, index: u32) -> Result<(u64, u64), GpuError> {
        let m = self.device(index)?.memory_info().map_err(err)?;
        Ok((m.used, m.total))
    }
    fn power_mw(&mut self, index: u32) -> Result<u32, GpuError> {
        self.device(index)?.power_usage().map_err(err)
    }
    fn energy_mj(&mut self, index: u32) -> Result<u64, GpuError> {
        self.device(index)?.total_energy_consumption().map_err(err)
    }
    fn temperature_c(&mut self, index: u32) -> Result<u32, GpuError> {
        self.device(index)?
            .temperature(TemperatureSensor::Gpu)
            .map_err(err)
    }
}
