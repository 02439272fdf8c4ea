//! Settings that need a feature this build lacks are setup errors that
//! name the setting and the feature; what the build has works.

use lens::{ExporterKind, LensConfig, TelemetryBuilder};
use std::time::Duration;

fn setup_error(cfg: LensConfig) -> String {
    match TelemetryBuilder::new(cfg, 0, 1)
        .allow_reinit(true)
        .install()
    {
        Ok(h) => {
            let _ = h.shutdown(Duration::from_secs(5));
            panic!("setup succeeded")
        }
        Err(e) => e.to_string(),
    }
}

fn enabled(exporter: ExporterKind) -> LensConfig {
    let mut cfg = LensConfig::default();
    cfg.enabled = true;
    cfg.exporter = exporter;
    cfg
}

#[test]
fn file_exporters_need_the_file_feature() {
    for (kind, name) in [
        (ExporterKind::File, "file"),
        (ExporterKind::Perfetto, "perfetto"),
    ] {
        let e = setup_error(enabled(kind));
        assert!(
            e.contains(&format!(
                "NEMO_LENS_EXPORTER={name} needs the `file` feature of nemo-lens"
            )),
            "{e}"
        );
    }
}

#[test]
fn flush_on_signal_needs_the_signal_feature() {
    let mut cfg = enabled(ExporterKind::Console);
    cfg.flush_on_signal = true;
    let e = setup_error(cfg);
    assert!(
        e.contains("NEMO_LENS_FLUSH_ON_SIGNAL=1 needs the `signal` feature"),
        "{e}"
    );
}

#[test]
fn gpu_metrics_need_the_gpu_feature() {
    let mut cfg = enabled(ExporterKind::Console);
    cfg.gpu_metrics = true;
    let e = setup_error(cfg);
    assert!(
        e.contains("NEMO_LENS_GPU_METRICS=1 needs the `gpu` feature"),
        "{e}"
    );
}

#[cfg(not(feature = "http"))]
#[test]
fn otlp_needs_a_transport_feature() {
    let e = setup_error(enabled(ExporterKind::Otlp));
    assert!(e.contains("OTLP grpc for traces"), "{e}");
    assert!(e.contains("needs the `otlp-grpc` feature"), "{e}");
}

#[cfg(feature = "http")]
#[test]
fn https_needs_the_tls_feature_and_grpc_its_own() {
    // one process, one environment: set before any setup reads it
    std::env::set_var("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf");
    std::env::set_var(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "https://collector.example:4318",
    );
    let e = setup_error(enabled(ExporterKind::Otlp));
    assert!(
        e.contains("https://collector.example:4318 (from OTEL_EXPORTER_OTLP_ENDPOINT) is https://"),
        "{e}"
    );
    assert!(e.contains("enable the `tls` feature of nemo-lens"), "{e}");
    std::env::set_var("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc");
    let e = setup_error(enabled(ExporterKind::Otlp));
    assert!(e.contains("needs the `otlp-grpc` feature"), "{e}");
}

#[test]
fn the_console_exporter_needs_nothing_more() {
    let mut cfg = enabled(ExporterKind::Console);
    cfg.traces_enabled = false;
    cfg.metrics_enabled = false;
    let h = TelemetryBuilder::new(cfg, 0, 1)
        .allow_reinit(true)
        .install()
        .expect("console setup");
    h.shutdown(Duration::from_secs(5))
        .into_result()
        .expect("shutdown");
}
