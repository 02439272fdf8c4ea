//! The SDK layer: everything that needs the OpenTelemetry SDK (exporters and
//! the batch processor, ids, the rank-aware sampler, GPU metrics, the log
//! bridge, last-point redaction, fork handling).

pub mod export;
pub(crate) mod fork;
pub mod gpu;
pub mod ids;
pub mod logs;
pub(crate) mod pipeline;
pub mod redact;
pub mod sampler;
