//! The one thread that calls NVML: it loads the library, runs the GPU
//! discovery of [`crate::host::gpus`], then, once GPU metrics are
//! registered, reads every selected device each [`Timing::period`]. Metric
//! callbacks and `host.gpu.count` only read what it left behind, so a hung
//! NVML call (a wedged driver) never blocks an export, a shutdown or the
//! signal hook.
//!
//! A device is *stale* (its gauge points are left out) while a call on it
//! has run past [`Timing::deadline`], or when its last sample is older
//! than `period + deadline` (the thread is stuck on another device). Its
//! energy keeps its last value, so a delta exporter reports 0 for the gap
//! and never repeats energy.
//!
//! The process has one worker ([`process`]), started on first need: the
//! first [`visible_gpus`](crate::visible_gpus), GPU-metrics registration, or
//! `host.gpu.count` with GPU metrics on. Nothing starts it otherwise, so
//! NVML is neither loaded nor called. A failure to load NVML, a failed
//! query and a hung call are each warned about once, on stderr.

use crate::host::gpu_sample::{read_device, Sample};
use crate::host::gpus::{discover, listed_count, GpuDevice, GpuError, GpuLib, VISIBLE_DEVICES};
use std::collections::HashSet;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How often the worker samples, and how long one NVML call may take
/// before its device is stale.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// Time between two sweeps over the devices.
    pub period: Duration,
    /// How long one call may run before its device is stale.
    pub deadline: Duration,
}

/// The process worker's timing: a sample a second, a call stale after 2 s.
pub(crate) const TIMING: Timing = Timing {
    period: Duration::from_secs(1),
    deadline: Duration::from_secs(2),
};

/// How long setup waits for NVML to load and list the devices.
pub(crate) const DISCOVERY_DEADLINE: Duration = Duration::from_secs(10);

/// Loads NVML, on the worker thread.
pub(crate) type Loader = Box<dyn FnOnce() -> Result<Box<dyn GpuLib>, String> + Send>;
/// Where warnings go (stderr, or a test's list).
pub(crate) type Warn = Arc<dyn Fn(&str) + Send + Sync>;

/// What callbacks read: for every discovered device, its fresh sample
/// (`None`: stale or none yet) and its last energy reading (mJ since driver
/// load), kept when stale.
#[derive(Debug, Clone, Default)]
pub(crate) struct Readings {
    /// One per device, in discovery order.
    pub fresh: Vec<Option<Sample>>,
    /// One per device: the last energy reading that succeeded.
    pub energy_mj: Vec<Option<u64>>,
}

#[derive(Default)]
struct Slot {
    sample: Sample,
    taken: Option<Instant>,
    energy_mj: Option<u64>,
}

#[derive(Default)]
struct State {
    /// `None` until discovery ends; the error says why it failed.
    discovery: Option<Result<Vec<GpuDevice>, String>>,
    slots: Vec<Slot>,
    sweeps: u64,
    /// The device of the call in progress, and since when.
    busy: Option<(usize, Instant)>,
    sampling: bool,
    stop: bool,
}

/// What a worker's handles and its NVML thread share: the state, the
/// condition it changes under, the warnings given, and the timing.
struct WorkerCore {
    state: Mutex<State>,
    changed: Condvar,
    warned: Mutex<HashSet<String>>,
    warn: Warn,
    timing: Timing,
}

impl WorkerCore {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Warns about `cause` once (over the worker's life).
    fn warn_once(&self, cause: &str, message: &str) {
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        if warned.insert(cause.to_owned()) {
            drop(warned);
            (self.warn)(message);
        }
    }
}

/// A handle on an NVML sampling thread; clones share it.
#[derive(Clone)]
pub(crate) struct Worker {
    shared: Arc<WorkerCore>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("timing", &self.shared.timing)
            .finish()
    }
}

#[cfg(feature = "gpu")]
use crate::host::nvml::load as load_nvml;

/// A build without the `gpu` feature has no NVML (setup refuses GPU
/// metrics there, so only `host.gpu.count` asks, and falls back to the list).
#[cfg(not(feature = "gpu"))]
fn load_nvml() -> Result<Box<dyn crate::host::gpus::GpuLib>, String> {
    Err("NVML is not in this build (the `gpu` feature of nemo-lens)".to_owned())
}

/// The process's worker: NVML through `nvml-wrapper`, the process's
/// `CUDA_VISIBLE_DEVICES`, warnings on stderr. Started (and NVML loaded) on
/// the first call, once.
pub(crate) fn process() -> &'static Worker {
    static WORKER: OnceLock<Worker> = OnceLock::new();
    #[cfg(test)]
    CALLERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashSet::new)
        .insert(std::thread::current().id());
    WORKER.get_or_init(|| {
        Worker::start(
            Box::new(load_nvml),
            crate::vars::raw(VISIBLE_DEVICES),
            TIMING,
            Arc::new(|m| crate::diag::warn(format_args!("{m}"))),
        )
    })
}

/// The threads that asked for the process's worker (tests: NVML is not
/// touched unless asked for).
#[cfg(test)]
pub(crate) static CALLERS: Mutex<Option<HashSet<std::thread::ThreadId>>> = Mutex::new(None);

impl Worker {
    /// Starts the thread: it runs `load`, then discovery over `raw` (the
    /// value of `CUDA_VISIBLE_DEVICES`), then waits for [`Self::start_sampling`].
    pub(crate) fn start(load: Loader, raw: Option<String>, timing: Timing, warn: Warn) -> Worker {
        let shared = Arc::new(WorkerCore {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            warned: Mutex::new(HashSet::new()),
            warn,
            timing,
        });
        let worker = Worker {
            shared: shared.clone(),
        };
        let spawned = std::thread::Builder::new()
            .name("lens-nvml".into())
            .spawn(move || run(&shared, load, raw.as_deref()));
        if let Err(e) = spawned {
            worker.finish_discovery(Err(format!("the NVML thread did not start ({e})")));
        }
        worker
    }

    fn finish_discovery(&self, result: Result<Vec<GpuDevice>, String>) {
        if let Err(why) = &result {
            self.shared
                .warn_once(why, &format!("GPU telemetry off: {why}"));
        }
        let mut st = self.shared.lock();
        st.slots = match &result {
            Ok(d) => d.iter().map(|_| Slot::default()).collect(),
            Err(_) => Vec::new(),
        };
        st.discovery = Some(result);
        drop(st);
        self.shared.changed.notify_all();
    }

    /// The discovered devices, waiting up to `wait` for discovery; `None`
    /// when it has not ended by then (a warning says so).
    pub(crate) fn devices(&self, wait: Duration) -> Option<Result<Vec<GpuDevice>, String>> {
        let end = Instant::now() + wait;
        let mut st = self.shared.lock();
        loop {
            if let Some(d) = &st.discovery {
                return Some(d.clone());
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                drop(st);
                self.shared.warn_once(
                    "discovery-timeout",
                    &format!(
                        "NVML did not list the GPUs within {} s; no GPU count and no GPU metrics",
                        wait.as_secs_f64()
                    ),
                );
                return None;
            }
            st = match self.shared.changed.wait_timeout(st, left) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
    }

    /// Starts sampling (once GPU metrics are registered) and waits up to
    /// `wait` for the first sweep; returns the energy readings then (the
    /// baseline of `hw.energy`).
    pub(crate) fn start_sampling(&self, wait: Duration) -> Vec<Option<u64>> {
        let end = Instant::now() + wait;
        let mut st = self.shared.lock();
        st.sampling = true;
        self.shared.changed.notify_all();
        while st.sweeps == 0 && !st.stop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            st = match self.shared.changed.wait_timeout(st, left) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        st.slots.iter().map(|s| s.energy_mj).collect()
    }

    /// The worker's sampling period and call deadline.
    pub(crate) fn timing(&self) -> Timing {
        self.shared.timing
    }

    /// What the metric callbacks report now; never waits on NVML.
    pub(crate) fn readings(&self) -> Readings {
        let now = Instant::now();
        let t = self.shared.timing;
        let st = self.shared.lock();
        let hung = st
            .busy
            .filter(|(_, since)| now.saturating_duration_since(*since) > t.deadline)
            .map(|(d, _)| d);
        let fresh = st
            .slots
            .iter()
            .enumerate()
            .map(|(d, s)| {
                let taken = s.taken?;
                let young = now.saturating_duration_since(taken) <= t.period + t.deadline;
                (young && hung != Some(d)).then(|| s.sample.clone())
            })
            .collect();
        let energy_mj = st.slots.iter().map(|s| s.energy_mj).collect();
        let hung_device = hung.and_then(|d| match &st.discovery {
            Some(Ok(devices)) => devices.get(d).cloned(),
            _ => None,
        });
        drop(st);
        if let Some(device) = hung_device {
            self.shared.warn_once(
                &format!("{} hung", device.id),
                &format!(
                    "GPU {} ({}): an NVML call has not answered within {:.1} s; its points are stale until it does",
                    device.name,
                    device.id,
                    t.deadline.as_secs_f64()
                ),
            );
        }
        Readings { fresh, energy_mj }
    }

    /// How many sweeps over the devices have ended.
    #[cfg(test)]
    pub(crate) fn sweeps(&self) -> u64 {
        self.shared.lock().sweeps
    }

    /// The device whose NVML call has run past the deadline, if any.
    #[cfg(test)]
    pub(crate) fn hung(&self) -> Option<usize> {
        let st = self.shared.lock();
        st.busy
            .filter(|(_, since)| since.elapsed() > self.shared.timing.deadline)
            .map(|(d, _)| d)
    }

    /// Stops the thread after its current call (tests).
    #[cfg(test)]
    pub(crate) fn stop(&self) {
        self.shared.lock().stop = true;
        self.shared.changed.notify_all();
    }
}

/// The number of visible GPUs: the discovery of `worker` when given (GPU
/// metrics on) and it succeeds within [`DISCOVERY_DEADLINE`]; else the
/// [`listed_count`] of `raw` when set; else unknown.
pub(crate) fn visible_count(raw: Option<&str>, worker: Option<&Worker>) -> Option<usize> {
    if let Some(w) = worker {
        if let Some(Ok(devices)) = w.devices(DISCOVERY_DEADLINE) {
            return Some(devices.len());
        }
    }
    raw.map(listed_count)
}

/// The thread: load, discover, then sweep every period while sampling.
fn run(shared: &Arc<WorkerCore>, load: Loader, raw: Option<&str>) {
    let worker = Worker {
        shared: shared.clone(),
    };
    let mut lib = match load() {
        Ok(lib) => lib,
        Err(e) => {
            worker.finish_discovery(Err(format!("NVML did not load ({e})")));
            return;
        }
    };
    let devices = match discover(lib.as_mut(), raw) {
        Ok(d) => d,
        Err(e) => {
            worker.finish_discovery(Err(format!("NVML did not list the GPUs ({e})")));
            return;
        }
    };
    let none = devices.is_empty();
    worker.finish_discovery(Ok(devices.clone()));
    if none {
        return;
    }
    loop {
        {
            let mut st = shared.lock();
            while !st.sampling && !st.stop {
                st = match shared.changed.wait(st) {
                    Ok(g) => g,
                    Err(e) => e.into_inner(),
                };
            }
            if st.stop {
                return;
            }
        }
        for (d, device) in devices.iter().enumerate() {
            sample_device(shared, lib.as_mut(), d, device);
        }
        let mut st = shared.lock();
        st.sweeps += 1;
        shared.changed.notify_all();
        let end = Instant::now() + shared.timing.period;
        while !st.stop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            st = match shared.changed.wait_timeout(st, left) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        if st.stop {
            return;
        }
    }
}

/// Reads every query of device `d` and stores the sample.
fn sample_device(shared: &WorkerCore, lib: &mut dyn GpuLib, d: usize, device: &GpuDevice) {
    let i = device.index;
    // one NVML call, timed against the deadline, its failure warned once
    let mut call = |what: &str, f: &mut dyn FnMut(&mut dyn GpuLib) -> Result<u64, GpuError>| {
        let since = Instant::now();
        shared.lock().busy = Some((d, since));
        let r = f(lib);
        shared.lock().busy = None;
        let took = since.elapsed();
        if took > shared.timing.deadline {
            shared.warn_once(
                &format!("{} hung", device.id),
                &format!(
                    "GPU {} ({}): NVML {what} took {:.1} s (deadline {:.1} s); its points are stale while NVML does not answer",
                    device.name,
                    device.id,
                    took.as_secs_f64(),
                    shared.timing.deadline.as_secs_f64()
                ),
            );
        }
        match r {
            Ok(v) => Some(v),
            Err(GpuError::NotSupported) => None,
            Err(GpuError::Failed(why)) => {
                shared.warn_once(
                    &format!("{} {what} {why}", device.id),
                    &format!(
                        "GPU {} ({}): NVML {what} failed ({why}); its points are left out while it fails",
                        device.name, device.id
                    ),
                );
                None
            }
        }
    };
    let (sample, energy) = read_device(i, &mut call);
    let mut st = shared.lock();
    if let Some(slot) = st.slots.get_mut(d) {
        slot.sample = sample;
        slot.taken = Some(Instant::now());
        if energy.is_some() {
            slot.energy_mj = energy;
        }
    }
}
