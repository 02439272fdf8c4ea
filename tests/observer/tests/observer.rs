//! A span whose start panics inside an OpenTelemetry context observer
//! (its `make_view`, called as the span's context is made, after lens has
//! registered the span's record) is ended with the panic, on lens's own
//! span path, in both context modes: not left open to be truncated at
//! shutdown.

use lens::otel::trace::Status;
use lens::otel_sdk::trace::SpanData;
use lens::{span_cm, LensConfig, TelemetryBuilder};
use opentelemetry::context::{ContextObserver, GlobalContextObserver, ObserverContextView};
use opentelemetry::trace::TraceContextExt;
use opentelemetry::Context;
use std::cell::Cell;
use std::sync::{Arc, Mutex};
use std::time::Duration;

thread_local! {
    /// Whether the next context made with an active span panics.
    static PANIC_NEXT: Cell<bool> = const { Cell::new(false) };
}

struct Observer;

impl ContextObserver for Observer {
    fn on_context_enter(&self, _: &Context, _: &Context) {}
    fn on_context_exit(&self, _: &Context, _: &Context) {}
    fn make_view(&self, cx: &Context) -> Option<Arc<dyn ObserverContextView>> {
        if cx.has_active_span() && PANIC_NEXT.with(|p| p.replace(false)) {
            panic!("the observer's view failed");
        }
        None
    }
}

#[derive(Clone, Default, Debug)]
struct Capture(Arc<Mutex<Vec<SpanData>>>);

impl lens::otel_sdk::trace::SpanExporter for Capture {
    async fn export(&self, batch: Vec<SpanData>) -> lens::otel_sdk::error::OTelSdkResult {
        self.0.lock().unwrap().extend(batch);
        Ok(())
    }
}

fn run(mode: &str) -> Vec<String> {
    std::env::set_var("NEMO_LENS_SPAN_PATH", "lens");
    std::env::set_var("NEMO_LENS_OTEL_CONTEXT", mode);
    let mut c = LensConfig::default();
    c.enabled = true;
    c.metrics_enabled = false;
    c.span_groups = "all".into();
    c.export_strategy = "all_ranks".into();
    c.quiet = true;
    let exporter = Capture::default();
    let h = TelemetryBuilder::new(c, 0, 1)
        .allow_reinit(true)
        .with_span_exporter(exporter.clone())
        .install()
        .unwrap();
    std::env::remove_var("NEMO_LENS_OTEL_CONTEXT");
    {
        let _outer = span_cm!("outside");
        for name in ["guard", "detached"] {
            let caught = std::panic::catch_unwind(|| {
                PANIC_NEXT.with(|p| p.set(true));
                match name {
                    "guard" => drop(span_cm!("guard")),
                    _ => drop(lens::detached_span("detached")),
                }
            });
            assert!(caught.is_err(), "{mode}: the observer did not panic");
        }
    }
    h.shutdown(Duration::from_secs(5)).into_result().unwrap();
    let spans = exporter.0.lock().unwrap().clone();
    let mut out: Vec<String> = spans
        .iter()
        .map(|s| {
            let error = match &s.status {
                Status::Error { description } => description.contains("the observer's view failed"),
                _ => false,
            };
            let truncated = s
                .attributes
                .iter()
                .any(|a| a.key.as_str() == "nemo.span.truncated");
            format!("{} error={error} truncated={truncated}", s.name)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_start_that_panics_in_a_context_observer_ends_its_span_with_the_panic() {
    GlobalContextObserver::set(Arc::new(Observer));
    for mode in ["full", "ids"] {
        assert_eq!(
            run(mode),
            [
                "detached error=true truncated=false",
                "guard error=true truncated=false",
                "outside error=false truncated=false"
            ],
            "{mode}"
        );
    }
}
