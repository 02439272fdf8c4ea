//! Setup: the builder, the handle it returns and the signal hook. The top
//! layer: it uses every layer below and nothing uses it.

mod builder;
mod error;
mod handle;
mod logs;
mod signal;

pub use builder::{setup_telemetry, TelemetryBuilder};
pub use error::SetupError;
pub use handle::{ShutdownError, TelemetryHandle};
pub use logs::setup_logging_bridge;
