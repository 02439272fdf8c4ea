//! A fake NVML for tests: a device table of UUIDs, MIG instances, readings,
//! failing or unsupported queries and hung calls, shared with the test so
//! it can change readings while the sampling thread runs.

use crate::host::gpu_worker::{Timing, Warn, Worker};
use crate::host::gpus::{GpuError, GpuLib};
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

/// One row of the device table.
#[derive(Debug, Clone)]
pub(crate) struct FakeGpu {
    pub uuid: String,
    pub name: String,
    /// false: hidden by a cgroup (NVML counts it, cannot open it)
    pub accessible: bool,
    pub migs: Vec<String>,
    pub utilization_percent: u32,
    pub memory: (u64, u64),
    pub power_mw: u32,
    pub energy_mj: u64,
    pub temperature_c: u32,
    /// queries (`"power"`, …) that fail
    pub failing: Vec<&'static str>,
    /// queries the device does not support
    pub unsupported: Vec<&'static str>,
    /// every reading call blocks while the gate is closed
    pub hangs: bool,
}

/// A fake UUID: `GPU-<n, 8 hex digits>-…`.
pub(crate) fn uuid(n: u32) -> String {
    format!("GPU-{n:08x}-1111-2222-3333-444455556666")
}

impl FakeGpu {
    /// An H200 with UUID [`uuid`]`(n)`.
    pub(crate) fn new(n: u32) -> FakeGpu {
        FakeGpu {
            uuid: uuid(n),
            name: "NVIDIA H200".into(),
            accessible: true,
            migs: Vec::new(),
            utilization_percent: 75,
            memory: (40 << 30, 80 << 30),
            power_mw: 350_500,
            energy_mj: 9_000_000_000,
            temperature_c: 61,
            failing: Vec::new(),
            unsupported: Vec::new(),
            hangs: false,
        }
    }
}

/// The fake library's shared state.
#[derive(Debug, Default)]
pub(crate) struct FakeState {
    pub table: Mutex<Vec<FakeGpu>>,
    /// closed: hung calls block
    pub gate_closed: Mutex<bool>,
    pub gate: Condvar,
    pub loads: AtomicUsize,
    pub threads: Mutex<HashSet<ThreadId>>,
    pub driver_version: Option<String>,
}

/// A fake NVML over `FakeState`.
#[derive(Debug, Clone)]
pub(crate) struct Fake(pub Arc<FakeState>);

/// Fast timing for tests: 20 ms period, 1 s deadline (generous for a busy
/// machine: a slow sweep must not look like a hang).
pub(crate) const FAST: Timing = Timing {
    period: Duration::from_millis(20),
    deadline: Duration::from_secs(1),
};

impl Fake {
    pub(crate) fn new(table: Vec<FakeGpu>) -> Fake {
        Fake(Arc::new(FakeState {
            table: Mutex::new(table),
            driver_version: Some("570.86.15".into()),
            ..FakeState::default()
        }))
    }

    /// `n` accessible GPUs.
    pub(crate) fn gpus(n: u32) -> Fake {
        Fake::new((0..n).map(FakeGpu::new).collect())
    }

    /// Changes row `i`.
    pub(crate) fn edit(&self, i: usize, f: impl FnOnce(&mut FakeGpu)) {
        if let Some(g) = self.0.table.lock().unwrap().get_mut(i) {
            f(g);
        }
    }

    pub(crate) fn close_gate(&self) {
        *self.0.gate_closed.lock().unwrap() = true;
    }

    pub(crate) fn open_gate(&self) {
        *self.0.gate_closed.lock().unwrap() = false;
        self.0.gate.notify_all();
    }

    /// A worker over this fake with `CUDA_VISIBLE_DEVICES=raw`, and the
    /// warnings it gives.
    pub(crate) fn worker(
        &self,
        raw: Option<&str>,
        timing: Timing,
    ) -> (Worker, Arc<Mutex<Vec<String>>>) {
        let warnings = Arc::new(Mutex::new(Vec::new()));
        let w = warnings.clone();
        let warn: Warn = Arc::new(move |m| w.lock().unwrap().push(m.to_owned()));
        let me = self.clone();
        let load = Box::new(move || {
            me.0.loads.fetch_add(1, Ordering::SeqCst);
            Ok(Box::new(me) as Box<dyn GpuLib>)
        });
        (
            Worker::start(load, raw.map(str::to_owned), timing, warn),
            warnings,
        )
    }

    /// The row of NVML index `index`, after the checks every call makes.
    fn row(&self, index: u32, query: &str) -> Result<FakeGpu, GpuError> {
        self.0
            .threads
            .lock()
            .unwrap()
            .insert(std::thread::current().id());
        let row = self
            .0
            .table
            .lock()
            .unwrap()
            .get(index as usize)
            .cloned()
            .ok_or_else(|| GpuError::Failed("Invalid Argument".into()))?;
        if !row.accessible {
            return Err(GpuError::Failed("Insufficient Permissions".into()));
        }
        if row.hangs && !matches!(query, "uuid" | "name" | "mig") {
            let mut closed = self.0.gate_closed.lock().unwrap();
            while *closed {
                closed = self.0.gate.wait(closed).unwrap();
            }
        }
        if row.failing.contains(&query) {
            return Err(GpuError::Failed("Unknown Error".into()));
        }
        if row.unsupported.contains(&query) {
            return Err(GpuError::NotSupported);
        }
        Ok(row)
    }
}

impl GpuLib for Fake {
    fn device_count(&mut self) -> Result<u32, GpuError> {
        self.0
            .threads
            .lock()
            .unwrap()
            .insert(std::thread::current().id());
        Ok(self.0.table.lock().unwrap().len() as u32)
    }
    fn uuid(&mut self, index: u32) -> Result<String, GpuError> {
        Ok(self.row(index, "uuid")?.uuid)
    }
    fn name(&mut self, index: u32) -> Result<String, GpuError> {
        Ok(self.row(index, "name")?.name)
    }
    fn mig_uuids(&mut self, index: u32) -> Result<Vec<String>, GpuError> {
        Ok(self.row(index, "mig")?.migs)
    }
    fn driver_version(&mut self) -> Result<String, GpuError> {
        self.0.driver_version.clone().ok_or(GpuError::NotSupported)
    }
    fn utilization_percent(&mut self, index: u32) -> Result<u32, GpuError> {
        Ok(self.row(index, "utilization")?.utilization_percent)
    }
    fn memory_bytes(&mut self, index: u32) -> Result<(u64, u64), GpuError> {
        Ok(self.row(index, "memory")?.memory)
    }
    fn power_mw(&mut self, index: u32) -> Result<u32, GpuError> {
        Ok(self.row(index, "power")?.power_mw)
    }
    fn energy_mj(&mut self, index: u32) -> Result<u64, GpuError> {
        Ok(self.row(index, "energy")?.energy_mj)
    }
    fn temperature_c(&mut self, index: u32) -> Result<u32, GpuError> {
        Ok(self.row(index, "temperature")?.temperature_c)
    }
}
