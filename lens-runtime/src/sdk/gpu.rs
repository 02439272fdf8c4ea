//! Opt-in GPU telemetry through NVML, named as the OpenTelemetry hardware
//! semantic conventions say (`hw.gpu.*` and the common `hw.*` metrics,
//! semantic conventions [`SEMCONV_VERSION`](crate::api::semconv::SEMCONV_VERSION)).
//!
//! Turned on by `NEMO_LENS_GPU_METRICS=1` or
//! `TelemetryBuilder::gpu_metrics(true)`; setup then calls
//! [`register_gpu_metrics`] on lens's meter. NVML (`libnvidia-ml.so`) is
//! loaded at run time through `nvml-wrapper`, once per process, and kept for
//! the life of the process; every instrument is observable, read by its
//! callback when the metric reader collects (every export interval), so no
//! thread of lens polls the GPU.
//!
//! | metric | instrument | unit | NVML source |
//! |---|---|---|---|
//! | `hw.gpu.utilization` (`hw.gpu.task=general`) | gauge | `1` | `nvmlDeviceGetUtilizationRates().gpu` / 100 |
//! | `hw.gpu.memory.utilization` | gauge | `1` | used / total of `nvmlDeviceGetMemoryInfo_v2` |
//! | `hw.gpu.memory.usage` | up-down counter | `By` | used |
//! | `hw.gpu.memory.limit` | up-down counter | `By` | total |
//! | `hw.power` | gauge | `W` | `nvmlDeviceGetPowerUsage` (mW) / 1000 |
//! | `hw.energy` | counter | `J` | `nvmlDeviceGetTotalEnergyConsumption` (mJ) / 1000 (Volta and newer) |
//! | `hw.temperature` | gauge | `Cel` | `nvmlDeviceGetTemperature(GPU die)` |
//!
//! Every point carries `hw.id` (the GPU UUID), `hw.name` (`gpu<N>`, the
//! NVML / `nvidia-smi` index), `hw.type=gpu`, `hw.vendor=NVIDIA`, and
//! `hw.model` (e.g. `NVIDIA H200`) and `hw.driver_version` when NVML reports
//! them. A reading a device does not support is skipped for that device.
//!
//! Devices: those `CUDA_VISIBLE_DEVICES` names, when set, else every device
//! NVML sees, by the one rule in `host::gpus` that `host.gpu.count` follows
//! too (indices in NVML's PCI-bus order, `GPU-…` UUIDs or unique prefixes;
//! the list ends at the first entry that names no device, as CUDA reads it;
//! `MIG-…` entries are skipped).
//!
//! No driver, no library or no visible GPU: nothing is registered and one
//! debug-level `tracing` message (target `lens::gpu`) is emitted per
//! process.

use crate::api::semconv as sc;
use crate::host::gpus::{nvml, select_devices, VISIBLE_DEVICES};
use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::{Device, Nvml};
use opentelemetry::metrics::{AsyncInstrument, Meter};
use opentelemetry::KeyValue;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Whether the "no GPU telemetry" debug message was emitted.
static REPORTED: AtomicBool = AtomicBool::new(false);

fn debug_once(flag: &AtomicBool, why: &str) {
    if !flag.swap(true, Ordering::Relaxed) {
        tracing::debug!(target: "lens::gpu", "GPU metrics not registered: {why}");
    }
}

/// A GPU this process sees, as [`visible_gpus`] lists it.
///
/// ```
/// for gpu in lens::gpu::visible_gpus() {
///     println!("{} {} {:?}", gpu.name, gpu.id, gpu.model);
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuDevice {
    /// NVML index (as `nvidia-smi` numbers devices).
    pub index: u32,
    /// `hw.id`: the GPU UUID (`GPU-…`), or `gpu<index>` when NVML has none.
    pub id: String,
    /// `hw.name`: `gpu<index>`.
    pub name: String,
    /// `hw.model`: NVML's product name, e.g. `NVIDIA H200`.
    pub model: Option<String>,
    /// `hw.driver_version`: the NVIDIA driver version.
    pub driver_version: Option<String>,
}

/// The GPUs this process sees (NVML devices filtered by
/// `CUDA_VISIBLE_DEVICES`); empty when NVML does not load.
///
/// ```
/// let gpus = lens::gpu::visible_gpus();
/// assert!(gpus.iter().all(|g| !g.id.is_empty()));
/// ```
pub fn visible_gpus() -> Vec<GpuDevice> {
    match nvml() {
        Ok(n) => discover(n).into_iter().map(|(_, d)| d).collect(),
        Err(_) => Vec::new(),
    }
}

fn discover(nvml: &'static Nvml) -> Vec<(Device<'static>, GpuDevice)> {
    let count = nvml.device_count().unwrap_or(0);
    let raw = crate::vars::raw(VISIBLE_DEVICES);
    let indices = select_devices(raw.as_deref(), count, |i| {
        nvml.device_by_index(i).ok()?.uuid().ok()
    });
    let driver_version = nvml.sys_driver_version().ok();
    indices
        .into_iter()
        .filter_map(|index| {
            let dev = nvml.device_by_index(index).ok()?;
            let name = format!("gpu{index}");
            let info = GpuDevice {
                index,
                id: dev.uuid().unwrap_or_else(|_| name.clone()),
                name,
                model: dev.name().ok(),
                driver_version: driver_version.clone(),
            };
            Some((dev, info))
        })
        .collect()
}

/// What one collection reads from device `dev` (position in the registered
/// list); `None`: not supported or failed, no point.
trait Reader: Send + Sync + 'static {
    fn utilization(&self, dev: usize) -> Option<f64>;
    /// (used, total) bytes
    fn memory(&self, dev: usize) -> Option<(u64, u64)>;
    fn power_w(&self, dev: usize) -> Option<f64>;
    fn energy_j(&self, dev: usize) -> Option<f64>;
    fn temperature_c(&self, dev: usize) -> Option<f64>;
}

struct NvmlReader {
    devices: Vec<Device<'static>>,
}

impl Reader for NvmlReader {
    fn utilization(&self, dev: usize) -> Option<f64> {
        let u = self.devices.get(dev)?.utilization_rates().ok()?;
        Some(f64::from(u.gpu) / 100.0)
    }
    fn memory(&self, dev: usize) -> Option<(u64, u64)> {
        let m = self.devices.get(dev)?.memory_info().ok()?;
        Some((m.used, m.total))
    }
    fn power_w(&self, dev: usize) -> Option<f64> {
        let mw = self.devices.get(dev)?.power_usage().ok()?;
        Some(f64::from(mw) / 1000.0)
    }
    fn energy_j(&self, dev: usize) -> Option<f64> {
        let mj = self.devices.get(dev)?.total_energy_consumption().ok()?;
        Some(mj as f64 / 1000.0)
    }
    fn temperature_c(&self, dev: usize) -> Option<f64> {
        let c = self
            .devices
            .get(dev)?
            .temperature(TemperatureSensor::Gpu)
            .ok()?;
        Some(f64::from(c))
    }
}

/// Registers GPU instruments on `meter` when NVML and a GPU are present;
/// returns whether any were registered. No driver or no GPU: nothing, and
/// one debug-level message per process. See the module docs for the
/// instruments and their attributes.
///
/// ```
/// let meter = lens::otel::global::meter("doc");
/// let _registered = lens::gpu::register_gpu_metrics(&meter);
/// ```
pub fn register_gpu_metrics(meter: &Meter) -> bool {
    register_with(meter, &REPORTED, || {
        let nvml = nvml().map_err(|e| format!("NVML did not load ({e})"))?;
        let (devices, infos): (Vec<_>, Vec<_>) = discover(nvml).into_iter().unzip();
        let reader: Arc<dyn Reader> = Arc::new(NvmlReader { devices });
        Ok((reader, infos))
    })
}

type Detected = (Arc<dyn Reader>, Vec<GpuDevice>);

fn register_with(
    meter: &Meter,
    reported: &AtomicBool,
    detect: impl FnOnce() -> Result<Detected, String>,
) -> bool {
    let (reader, infos) = match detect() {
        Ok(d) => d,
        Err(why) => {
            debug_once(reported, &why);
            return false;
        }
    };
    if infos.is_empty() {
        debug_once(reported, "no visible GPU");
        return false;
    }
    register(meter, reader, &infos);
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

/// Calls `observe(device, attributes)` for every device.
fn each(attrs: &Attrs, mut observe: impl FnMut(usize, &[KeyValue])) {
    for (i, a) in attrs.iter().enumerate() {
        observe(i, a);
    }
}

fn register(meter: &Meter, reader: Arc<dyn Reader>, devices: &[GpuDevice]) {
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
        let r = reader.clone();
        let a = if spec.task {
            task.clone()
        } else {
            base.clone()
        };
        // one observable instrument of kind `$build`, observing `$read`
        macro_rules! observe {
            ($build:ident, $t:ty, $read:expr) => {{
                let read = $read;
                meter
                    .$build(spec.name)
                    .with_unit(spec.unit)
                    .with_description(spec.description)
                    .with_callback(move |o: &dyn AsyncInstrument<$t>| {
                        each(&a, |i, at| {
                            if let Some(v) = read(&*r, i) {
                                o.observe(v, at);
                            }
                        })
                    })
                    .build();
            }};
        }
        match spec.read {
            Read::Gauge(read) => observe!(f64_observable_gauge, f64, read),
            Read::Counter(read) => observe!(f64_observable_counter, f64, read),
            Read::UpDown(read) => observe!(i64_observable_up_down_counter, i64, read),
        }
    }
}

/// How an instrument reads device `dev` (its position in the registered
/// list); `None`: not supported or failed, no point.
#[derive(Clone, Copy)]
enum Read {
    /// An `f64` observable gauge.
    Gauge(fn(&dyn Reader, usize) -> Option<f64>),
    /// An `f64` observable (monotonic) counter.
    Counter(fn(&dyn Reader, usize) -> Option<f64>),
    /// An `i64` observable up-down counter.
    UpDown(fn(&dyn Reader, usize) -> Option<i64>),
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
        read: Read::Gauge(|r, i| r.utilization(i)),
    },
    Instrument {
        name: sc::METRIC_HW_GPU_MEMORY_UTILIZATION,
        unit: "1",
        description: "Fraction of GPU memory used.",
        task: false,
        read: Read::Gauge(|r, i| {
            let (used, total) = r.memory(i).filter(|m| m.1 > 0)?;
            Some(used as f64 / total as f64)
        }),
    },
    Instrument {
        name: sc::METRIC_HW_GPU_MEMORY_USAGE,
        unit: "By",
        description: "GPU memory used.",
        task: false,
        read: Read::UpDown(|r, i| r.memory(i).map(|(used, _)| bytes(used))),
    },
    Instrument {
        name: sc::METRIC_HW_GPU_MEMORY_LIMIT,
        unit: "By",
        description: "Size of the GPU memory.",
        task: false,
        read: Read::UpDown(|r, i| r.memory(i).map(|(_, total)| bytes(total))),
    },
    Instrument {
        name: sc::METRIC_HW_POWER,
        unit: "W",
        description: "Instantaneous power consumed by the component.",
        task: false,
        read: Read::Gauge(|r, i| r.power_w(i)),
    },
    Instrument {
        name: sc::METRIC_HW_ENERGY,
        unit: "J",
        description: "Energy consumed by the component.",
        task: false,
        read: Read::Counter(|r, i| r.energy_j(i)),
    },
    Instrument {
        name: sc::METRIC_HW_TEMPERATURE,
        unit: "Cel",
        description: "Temperature in degrees Celsius.",
        task: false,
        read: Read::Gauge(|r, i| r.temperature_c(i)),
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, Metric, MetricData};
    use std::sync::atomic::AtomicUsize;

    use crate::metrics_test_support::{collect, flat, provider};

    /// Counts `tracing` events at DEBUG from target `lens::gpu`.
    struct CountEvents(Arc<AtomicUsize>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for CountEvents {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _ctx: tracing_subscriber::layer::Context<'_, S>,
        ) {
            let m = event.metadata();
            if m.target() == "lens::gpu" && *m.level() == tracing::Level::DEBUG {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn counting<R>(f: impl FnOnce() -> R) -> (R, usize) {
        use tracing_subscriber::layer::SubscriberExt as _;
        let n = Arc::new(AtomicUsize::new(0));
        let sub = tracing_subscriber::registry().with(CountEvents(n.clone()));
        let r = tracing::subscriber::with_default(sub, f);
        (r, n.load(Ordering::Relaxed))
    }

    #[test]
    fn no_driver_registers_nothing_and_says_so_once() {
        let (p, e) = provider();
        let meter = p.meter("t");
        let flag = AtomicBool::new(false);
        let (results, messages) = counting(|| {
            (0..3)
                .map(|_| {
                    register_with(&meter, &flag, || {
                        Err("NVML did not load (libnvidia-ml.so: cannot open)".into())
                    })
                })
                .collect::<Vec<_>>()
        });
        assert_eq!(results, [false, false, false]);
        assert_eq!(messages, 1, "one debug message per process");
        assert!(flat(&collect(&p, &e)).is_empty(), "no instruments");
    }

    #[test]
    fn no_visible_gpu_registers_nothing() {
        let (p, e) = provider();
        let flag = AtomicBool::new(false);
        let (ok, messages) = counting(|| {
            register_with(&p.meter("t"), &flag, || {
                Ok((Arc::new(Fake) as Arc<dyn Reader>, Vec::new()))
            })
        });
        assert!(!ok);
        assert_eq!(messages, 1);
        assert!(flat(&collect(&p, &e)).is_empty());
    }

    #[test]
    fn this_machine_without_nvml_gets_false_and_no_instruments() {
        let (p, e) = provider();
        let registered = register_gpu_metrics(&p.meter("t"));
        if nvml().is_err() {
            assert!(!registered);
            assert!(flat(&collect(&p, &e)).is_empty());
            assert!(visible_gpus().is_empty());
            // asking again is still silent and false
            let (again, messages) = counting(|| register_gpu_metrics(&p.meter("t")));
            assert!(!again);
            assert_eq!(messages, 0, "the message was already given");
        } else {
            assert_eq!(registered, !visible_gpus().is_empty());
        }
    }

    struct Fake;

    impl Reader for Fake {
        fn utilization(&self, dev: usize) -> Option<f64> {
            [Some(0.75), None][dev]
        }
        fn memory(&self, dev: usize) -> Option<(u64, u64)> {
            [Some((40u64 << 30, 80u64 << 30)), Some((0, 0))][dev]
        }
        fn power_w(&self, dev: usize) -> Option<f64> {
            [Some(350.5), Some(90.0)][dev]
        }
        fn energy_j(&self, dev: usize) -> Option<f64> {
            [Some(1.0e6), None][dev]
        }
        fn temperature_c(&self, dev: usize) -> Option<f64> {
            [Some(61.0), Some(40.0)][dev]
        }
    }

    fn points(m: &Metric) -> Vec<(Vec<(String, String)>, String)> {
        fn a<'a>(it: impl Iterator<Item = &'a KeyValue>) -> Vec<(String, String)> {
            let mut v: Vec<_> = it
                .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                .collect();
            v.sort();
            v
        }
        let mut out: Vec<_> = match m.data() {
            AggregatedMetrics::F64(MetricData::Gauge(g)) => g
                .data_points()
                .map(|p| (a(p.attributes()), format!("gauge {}", p.value())))
                .collect(),
            AggregatedMetrics::I64(MetricData::Sum(s)) => s
                .data_points()
                .map(|p| {
                    (
                        a(p.attributes()),
                        format!("sum monotonic={} {}", s.is_monotonic(), p.value()),
                    )
                })
                .collect(),
            AggregatedMetrics::F64(MetricData::Sum(s)) => s
                .data_points()
                .map(|p| {
                    (
                        a(p.attributes()),
                        format!("sum monotonic={} {}", s.is_monotonic(), p.value()),
                    )
                })
                .collect(),
            other => panic!("{}: unexpected {other:?}", m.name()),
        };
        out.sort();
        out
    }

    #[test]
    fn instruments_read_at_collection_with_hw_attributes() {
        let (p, e) = provider();
        let devices = vec![
            GpuDevice {
                index: 0,
                id: "GPU-aaaa".into(),
                name: "gpu0".into(),
                model: Some("NVIDIA H200".into()),
                driver_version: Some("570.86.15".into()),
            },
            GpuDevice {
                index: 3,
                id: "GPU-bbbb".into(),
                name: "gpu3".into(),
                model: None,
                driver_version: None,
            },
        ];
        let flag = AtomicBool::new(false);
        let detect = || Ok((Arc::new(Fake) as Arc<dyn Reader>, devices.clone()));
        assert!(register_with(&p.meter("t"), &flag, detect));
        let rms = collect(&p, &e);
        let all = flat(&rms);
        let get = |name: &str| {
            all.iter()
                .rev()
                .find(|m| m.name() == name)
                .unwrap_or_else(|| panic!("no {name}"))
        };
        let s = |x: &str| x.to_owned();
        let full = |extra: &[(&str, &str)]| {
            let mut v = vec![
                (s(sc::HW_DRIVER_VERSION), s("570.86.15")),
                (s(sc::HW_ID), s("GPU-aaaa")),
                (s(sc::HW_MODEL), s("NVIDIA H200")),
                (s(sc::HW_NAME), s("gpu0")),
                (s(sc::HW_TYPE), s("gpu")),
                (s(sc::HW_VENDOR), s("NVIDIA")),
            ];
            v.extend(extra.iter().map(|(k, x)| (s(k), s(x))));
            v.sort();
            v
        };
        let bare = vec![
            (s(sc::HW_ID), s("GPU-bbbb")),
            (s(sc::HW_NAME), s("gpu3")),
            (s(sc::HW_TYPE), s("gpu")),
            (s(sc::HW_VENDOR), s("NVIDIA")),
        ];
        let util = get(sc::METRIC_HW_GPU_UTILIZATION);
        assert_eq!(util.unit(), "1");
        assert_eq!(
            points(util),
            vec![(full(&[(sc::HW_GPU_TASK, "general")]), s("gauge 0.75"))]
        );
        let mu = get(sc::METRIC_HW_GPU_MEMORY_UTILIZATION);
        assert_eq!(mu.unit(), "1");
        assert_eq!(points(mu), vec![(full(&[]), s("gauge 0.5"))]);
        let usage = get(sc::METRIC_HW_GPU_MEMORY_USAGE);
        assert_eq!(usage.unit(), "By");
        assert_eq!(
            points(usage),
            vec![
                (full(&[]), format!("sum monotonic=false {}", 40u64 << 30)),
                (bare.clone(), s("sum monotonic=false 0")),
            ]
        );
        let limit = get(sc::METRIC_HW_GPU_MEMORY_LIMIT);
        assert_eq!(limit.unit(), "By");
        assert_eq!(
            points(limit),
            vec![
                (full(&[]), format!("sum monotonic=false {}", 80u64 << 30)),
                (bare.clone(), s("sum monotonic=false 0")),
            ]
        );
        let power = get(sc::METRIC_HW_POWER);
        assert_eq!(power.unit(), "W");
        assert_eq!(
            points(power),
            vec![(full(&[]), s("gauge 350.5")), (bare.clone(), s("gauge 90")),]
        );
        let energy = get(sc::METRIC_HW_ENERGY);
        assert_eq!(energy.unit(), "J");
        assert_eq!(
            points(energy),
            vec![(full(&[]), s("sum monotonic=true 1000000"))]
        );
        let temp = get(sc::METRIC_HW_TEMPERATURE);
        assert_eq!(temp.unit(), "Cel");
        assert_eq!(
            points(temp),
            vec![(full(&[]), s("gauge 61")), (bare, s("gauge 40"))]
        );
    }
}
