//! The host layer: facts about the machine and the launcher (rank, SLURM,
//! Kubernetes, GPUs) turned into resource attributes.

#[cfg(test)]
pub(crate) mod gpu_fake;
pub(crate) mod gpu_sample;
pub(crate) mod gpu_worker;
pub(crate) mod gpus;
pub(crate) mod launcher;
pub(crate) mod nvml;
pub(crate) mod resource;
