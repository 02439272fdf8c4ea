//! The SDK layer: everything that needs the OpenTelemetry SDK (exporters and
//! the batch processor, ids, the rank-aware sampler, GPU metrics, the log
//! bridge, last-point redaction, fork handling).

pub(crate) mod deadline;
pub(crate) mod export;
pub(crate) mod features;
pub(crate) mod fork;
#[cfg(feature = "gpu")]
pub(crate) mod gpu;
pub(crate) mod ids;
#[cfg(feature = "logs")]
pub(crate) mod logs;
pub(crate) mod pipeline;
pub(crate) mod processors;
pub(crate) mod profile;
pub(crate) mod redact;
pub(crate) mod report;
pub(crate) mod sampler;
