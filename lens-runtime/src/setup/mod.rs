//! Setup: the builder, the handle it returns and the signal hook. The top
//! layer: it uses every layer below and nothing uses it.

mod builder;
mod handle;
mod logs;
mod signal;

pub use builder::{setup_telemetry, SetupError, TelemetryBuilder};
pub use handle::{ShutdownError, TelemetryHandle};
pub use logs::setup_logging_bridge;
