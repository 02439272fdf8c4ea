//! Setup: the builder, the handle it returns and the signal hook. The top
//! layer: it uses every layer below and nothing uses it.

mod builder;
mod error;
mod forked;
mod from_env;
mod handle;
mod install;
#[cfg(feature = "logs")]
mod logs;
mod off_groups;
mod profile;
mod signal;

pub use crate::sdk::report::{LossCause, ShutdownReport, SignalReport};
pub use builder::{setup_telemetry, TelemetryBuilder};
pub use error::SetupError;
pub use from_env::setup_telemetry_from_env;
pub use handle::TelemetryHandle;
#[cfg(feature = "logs")]
pub use logs::setup_logging_bridge;
