//! The log bridge: `log` records and `tracing` events to the OpenTelemetry
//! logger provider, with the active trace and span ids.
