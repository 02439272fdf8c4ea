//! One sweep's readings of one GPU, converted from NVML's units (percent,
//! bytes, mW, mJ, °C) to the metrics' (fraction, bytes, W, mJ, °C).

use crate::host::gpus::{GpuError, GpuLib};

/// One device's readings from one sweep, converted: `None` where the
/// device does not support a query or it failed.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Sample {
    /// 0..1
    pub utilization: Option<f64>,
    /// (used, total) bytes
    pub memory: Option<(u64, u64)>,
    /// watts
    pub power_w: Option<f64>,
    /// degrees Celsius
    pub temperature_c: Option<f64>,
}

/// One NVML call through the worker's wrapper (timing, warnings): `None`
/// when unsupported or failed.
pub(crate) type Call<'a> =
    dyn FnMut(&str, &mut dyn FnMut(&mut dyn GpuLib) -> Result<u64, GpuError>) -> Option<u64> + 'a;

/// Reads every query of NVML device `index` through `call`: the sample and
/// the energy counter (mJ since the driver loaded).
pub(crate) fn read_device(index: u32, call: &mut Call<'_>) -> (Sample, Option<u64>) {
    let i = index;
    let mut memory = None;
    let utilization = call("utilization", &mut |l| {
        l.utilization_percent(i).map(u64::from)
    });
    // (used, total) kept whole; the call's own value is not needed
    let _ = call("memory", &mut |l| {
        l.memory_bytes(i).map(|m| {
            memory = Some(m);
            m.0
        })
    });
    let power = call("power", &mut |l| l.power_mw(i).map(u64::from));
    let energy = call("energy", &mut |l| l.energy_mj(i));
    let temperature = call("temperature", &mut |l| l.temperature_c(i).map(u64::from));
    let sample = Sample {
        utilization: utilization.map(|p| p as f64 / 100.0),
        memory,
        power_w: power.map(|mw| mw as f64 / 1000.0),
        temperature_c: temperature.map(|c| c as f64),
    };
    (sample, energy)
}
