//! Opt-in GPU telemetry through NVML, named as the OpenTelemetry hardware
//! semantic conventions say (`hw.gpu.*` and the common `hw.*` metrics,
//! semantic conventions [`SEMCONV_VERSION`](crate::api::semconv::SEMCONV_VERSION)).
//!
//! Turned on by `NEMO_LENS_GPU_METRICS=1` or
//! `TelemetryBuilder::gpu_metrics(true)`; setup then calls
//! [`register_gpu_metrics`] on lens's meter. NVML is only ever called by
//! the process's one sampling thread ([`crate::host::gpu_worker`]), which
//! reads every device once a second; every instrument is observable and its
//! callback reads the last sample, so an export never waits on NVML.
//!
//! | metric | instrument | unit | NVML source |
//! |---|---|---|---|
//! | `hw.gpu.utilization` (`hw.gpu.task=general`) | gauge | `1` | `nvmlDeviceGetUtilizationRates().gpu` / 100 |
//! | `hw.gpu.memory.utilization` | gauge | `1` | used / total of `nvmlDeviceGetMemoryInfo` |
//! | `hw.gpu.memory.usage` | up-down counter | `By` | used |
//! | `hw.gpu.memory.limit` | up-down counter | `By` | total |
//! | `hw.power` | gauge | `W` | `nvmlDeviceGetPowerUsage` (mW) / 1000 |
//! | `hw.energy` | counter | `J` | `nvmlDeviceGetTotalEnergyConsumption` (mJ) / 1000, counted from registration (Volta and newer) |
//! | `hw.temperature` | gauge | `Cel` | `nvmlDeviceGetTemperature(GPU die)` |
//!
//! Every point carries `hw.id` (the GPU UUID), `hw.name` (`gpu<N>`, the
//! NVML / `nvidia-smi` index), `hw.type=gpu`, `hw.vendor=NVIDIA`, and
//! `hw.model` (e.g. `NVIDIA H200`) and `hw.driver_version` when NVML reports
//! them. A reading a device does not support is skipped for that device.
//!
//! Devices: the one discovery of [`crate::host::gpus`] (CUDA's reading of
//! `CUDA_VISIBLE_DEVICES`; a MIG instance is reported as its parent GPU),
//! the same that `host.gpu.count` counts.
//!
//! `hw.energy` starts from a baseline read when the instruments are
//! registered, so a delta exporter's first point is the energy since then,
//! not since the driver loaded. A device whose sample is stale (an NVML call
//! past its deadline, see [`crate::host::gpu_worker`]) has no gauge or
//! memory points; its energy keeps its last value (a delta of 0), so energy
//! is never counted twice.
//!
//! No driver, no library or no visible GPU: nothing is registered and one
//! warning says why, once per cause.

#[cfg(test)]
mod tests;

use crate::api::semconv as sc;
use crate::host::gpu_sample::Sample;
use crate::host::gpu_worker::{self, Readings, Worker};
use crate::host::gpus::GpuDevice;
use opentelemetry::metrics::{AsyncInstrument, Meter};
use opentelemetry::KeyValue;
use std::sync::{Arc, Mutex};

/// The GPUs this process sees (the one discovery that `host.gpu.count` and
/// the GPU metrics use); empty when NVML does not load (a warning says why,
/// once). Loads NVML and starts its sampling thread on first call.
///
/// ```
/// let gpus = lens::gpu::visible_gpus();
/// assert!(gpus.iter().all(|g| !g.id.is_empty()));
/// ```
pub fn visible_gpus() -> Vec<GpuDevice> {
    match gpu_worker::process().devices(gpu_worker::DISCOVERY_DEADLINE) {
        Some(Ok(devices)) => devices,
        _ => Vec::new(),
    }
}

/// Registers GPU instruments on `meter` when NVML and a GPU are present;
/// returns whether any were registered. No driver or no GPU: nothing, and
/// one warning per cause. See the module docs for the instruments and
/// their attributes.
///
/// ```
/// let meter = lens::otel::global::meter("doc");
/// let _registered = lens::gpu::register_gpu_metrics(&meter);
/// ```
pub fn register_gpu_metrics(meter: &Meter) -> bool {
    register_on(meter, gpu_worker::process())
}

/// Registers the instruments reading `worker`'s samples.
pub(crate) fn register_on(meter: &Meter, worker: &Worker) -> bool {
    let devices = match worker.devices(gpu_worker::DISCOVERY_DEADLINE) {
        Some(Ok(d)) if !d.is_empty() => d,
        // why was warned (NVML did not load or did not answer)
        Some(Err(_)) | None => return false,
        Some(Ok(_)) => {
            // not a failure (a CPU rank, or CUDA_VISIBLE_DEVICES selects
            // none): a debug record where `tracing` is in the build
            #[cfg(any(feature = "logs", feature = "tracing"))]
            tracing::debug!(target: "lens::gpu", "GPU metrics not registered: no visible GPU");
            return false;
        }
    };
    // the first sweep normally ends in milliseconds; on a wedged GPU the
    // baseline is taken from the first energy reading seen instead
    let t = worker.timing();
    let baseline = Arc::new(Mutex::new(worker.start_sampling(t.period + t.deadline)));
    register(meter, worker, baseline, &devices);
    true
}

fn point_attributes(d: &GpuDevice) -> Vec<KeyValue> {
    let mut v = vec![
        KeyValue::new(sc::HW_ID, d.id.clone()),
        KeyValue::new(sc::HW_NAME, d.name.clone()),
        KeyValue::new(sc::HW_TYPE, sc::HW_TYPE_GPU),
        KeyValue::new(sc::HW_VENDOR, sc::HW_VENDOR_NVIDIA),
    ];
    if let Some(m) = &d.model {
        v.push(KeyValue::new(sc::HW_MODEL, m.clone()));
    }
    if let Some(dv) = &d.driver_version {
        v.push(KeyValue::new(sc::HW_DRIVER_VERSION, dv.clone()));
    }
    v
}

type Attrs = Arc<[Box<[KeyValue]>]>;

/// Energy in joules since the baseline of device `d`; the first reading
/// seen becomes the baseline when none was read at registration.
fn energy_j(baseline: &Mutex<Vec<Option<u64>>>, r: &Readings, d: usize) -> Option<f64> {
    let now = (*r.energy_mj.get(d)?)?;
    let mut base = baseline.lock().unwrap_or_else(|e| e.into_inner());
    if base.len() <= d {
        base.resize(d + 1, None);
    }
    let start = *base.get_mut(d)?.get_or_insert(now);
    Some(now.saturating_sub(start) as f64 / 1000.0)
}

fn register(
    meter: &Meter,
    worker: &Worker,
    baseline: Arc<Mutex<Vec<Option<u64>>>>,
    devices: &[GpuDevice],
) {
    let base: Attrs = devices
        .iter()
        .map(|d| point_attributes(d).into_boxed_slice())
        .collect();
    let task: Attrs = devices
        .iter()
        .map(|d| {
            let mut v = point_attributes(d);
            v.push(KeyValue::new(sc::HW_GPU_TASK, sc::HW_GPU_TASK_GENERAL));
            v.into_boxed_slice()
        })
        .collect();

    for spec in INSTRUMENTS {
        let w = worker.clone();
        let a = if spec.task {
            task.clone()
        } else {
            base.clone()
        };
        // one observable instrument of kind `$build`, observing `$read`
        // for each device with a fresh sample
        macro_rules! observe {
            ($build:ident, $t:ty, $read:expr) => {{
                let read = $read;
                meter
                    .$build(spec.name)
                    .with_unit(spec.unit)
                    .with_description(spec.description)
                    .with_callback(move |o: &dyn AsyncInstrument<$t>| {
                        let r = w.readings();
                        for (d, at) in a.iter().enumerate() {
                            if let Some(v) = read(&r, d) {
                                o.observe(v, at);
                            }
                        }
                    })
                    .build();
            }};
        }
        match spec.read {
            Read::Gauge(read) => observe!(f64_observable_gauge, f64, fresh(read)),
            Read::UpDown(read) => {
                observe!(i64_observable_up_down_counter, i64, fresh(read))
            }
            Read::Energy => {
                let baseline = baseline.clone();
                observe!(f64_observable_counter, f64, move |r: &Readings, d| {
                    energy_j(&baseline, r, d)
                })
            }
        }
    }
}

/// `read` applied to device `d`'s fresh sample; `None` when it is stale.
fn fresh<T>(read: fn(&Sample) -> Option<T>) -> impl Fn(&Readings, usize) -> Option<T> {
    move |r, d| read(r.fresh.get(d)?.as_ref()?)
}

/// How an instrument reads a device's sample; `None`: not supported or
/// failed, no point.
#[derive(Clone, Copy)]
enum Read {
    /// An `f64` observable gauge.
    Gauge(fn(&Sample) -> Option<f64>),
    /// An `i64` observable up-down counter.
    UpDown(fn(&Sample) -> Option<i64>),
    /// `hw.energy`: an `f64` observable (monotonic) counter from the
    /// baseline.
    Energy,
}

/// One GPU instrument: its semantic-convention name, unit and description,
/// whether its points carry `hw.gpu.task`, and how it reads a device.
struct Instrument {
    name: &'static str,
    unit: &'static str,
    description: &'static str,
    task: bool,
    read: Read,
}

fn bytes(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The instruments, in the order of the module documentation's table.
const INSTRUMENTS: [Instrument; 7] = [
    Instrument {
        name: sc::METRIC_HW_GPU_UTILIZATION,
        unit: "1",
        description: "Fraction of time spent in a specific task.",
        task: true,
        read: Read::Gauge(|s| s.utilization),
    },
    Instrument {
        name: sc::METRIC_HW_GPU_MEMORY_UTILIZATION,
        unit: "1",
        description: "Fraction of GPU memory used.",
        task: false,
        read: Read::Gauge(|s| {
            let (used, total) = s.memory.filter(|m| m.1 > 0)?;
            Some(used as f64 / total as f64)
        }),
    },
    Instrument {
        name: sc::METRIC_HW_GPU_MEMORY_USAGE,
        unit: "By",
        description: "GPU memory used.",
        task: false,
        read: Read::UpDown(|s| s.memory.map(|(used, _)| bytes(used))),
    },
    Instrument {
        name: sc::METRIC_HW_GPU_MEMORY_LIMIT,
        unit: "By",
        description: "Size of the GPU memory.",
        task: false,
        read: Read::UpDown(|s| s.memory.map(|(_, total)| bytes(total))),
    },
    Instrument {
        name: sc::METRIC_HW_POWER,
        unit: "W",
        description: "Instantaneous power consumed by the component.",
        task: false,
        read: Read::Gauge(|s| s.power_w),
    },
    Instrument {
        name: sc::METRIC_HW_ENERGY,
        unit: "J",
        description: "Energy consumed by the component.",
        task: false,
        read: Read::Energy,
    },
    Instrument {
        name: sc::METRIC_HW_TEMPERATURE,
        unit: "Cel",
        description: "Temperature in degrees Celsius.",
        task: false,
        read: Read::Gauge(|s| s.temperature_c),
    },
];
