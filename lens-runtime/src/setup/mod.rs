//! Setup: the builder, the handle it returns and the signal hook. The top
//! layer: it uses every layer below and nothing uses it.

mod builder;
mod handle;
mod logs;
mod signal;

pub use crate::config::otel::{
    DEFAULT_EXPORT_TIMEOUT, DEFAULT_FLUSH_TIMEOUT, DEFAULT_MAX_EXPORT_BATCH_SIZE,
    DEFAULT_MAX_QUEUE_SIZE, DEFAULT_METRIC_EXPORT_INTERVAL, MAX_HEADERS_LEN,
    MAX_LOG_QUEUE_SIZE_LIMIT, MAX_QUEUE_SIZE_LIMIT, MIN_SCHEDULE_DELAY,
};
pub use builder::{setup_telemetry, SetupError, TelemetryBuilder};
pub use handle::{ShutdownError, TelemetryHandle, DROP_SHUTDOWN_TIMEOUT, TRUNCATED_REASON};
pub use logs::setup_logging_bridge;
