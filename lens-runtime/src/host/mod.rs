//! The host layer: facts about the machine and the launcher (rank, SLURM,
//! Kubernetes, GPUs) turned into resource attributes.

pub(crate) mod gpus;
pub(crate) mod launcher;
pub(crate) mod resource;
