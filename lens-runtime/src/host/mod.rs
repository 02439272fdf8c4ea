//! The host layer: facts about the machine and the launcher (rank, SLURM,
//! Kubernetes, GPUs) turned into resource attributes.

#[cfg(test)]
pub(crate) mod gpu_fake;
// the sampling thread's readings are read only by the GPU instruments
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
pub(crate) mod gpu_sample;
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
pub(crate) mod gpu_worker;
pub(crate) mod gpus;
pub(crate) mod launcher;
#[cfg(feature = "gpu")]
pub(crate) mod nvml;
pub(crate) mod resource;
