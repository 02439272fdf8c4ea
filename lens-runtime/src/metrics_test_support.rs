//! Test helpers shared by the metrics and GPU unit tests: a meter provider
//! reading into an in-memory exporter.

use opentelemetry_sdk::metrics::data::{Metric, ResourceMetrics};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

pub(crate) fn provider() -> (SdkMeterProvider, InMemoryMetricExporter) {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    (provider, exporter)
}

/// Flushes and returns everything exported so far.
pub(crate) fn collect(
    provider: &SdkMeterProvider,
    exporter: &InMemoryMetricExporter,
) -> Vec<ResourceMetrics> {
    provider.force_flush().unwrap();
    exporter.get_finished_metrics().unwrap()
}

/// Every metric of every resource and scope.
pub(crate) fn flat(rms: &[ResourceMetrics]) -> Vec<&Metric> {
    rms.iter()
        .flat_map(ResourceMetrics::scope_metrics)
        .flat_map(|sm| sm.metrics())
        .collect()
}
