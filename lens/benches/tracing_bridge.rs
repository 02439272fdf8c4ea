//! A `tracing` span through the lens bridge, enabled and disabled, side by
//! side with `tracing-opentelemetry` on the same SDK pipeline (a batch
//! processor into an exporter that drops everything), and with `tracing`
//! with no subscriber at all. See docs/PERFORMANCE.md for results.
//!
//! The bridge filters per layer by default (`b_bridge_off`: the group off
//! hides the span from lens alone, so the registry still makes it);
//! `*_global` variants use `TracingBridge::global_filter(true)` (the span is
//! not created at all). `b_bridge_off_beside_fmt*` add a `fmt` layer that
//! keeps nothing below WARN (as a per-layer filter), the usual neighbour.
//!
//! `f_bridge_on_setup` is the enabled bridge under `TelemetryBuilder::install`
//! (lens's own span recorder, the default there) instead of the SDK path.
//!
//! Each variant makes, enters and closes one `info_span!` around the same
//! `#[inline(never)]` body (the per-entry variants enter a span made once).
//! Subscribers are scoped to each variant with `dispatcher::with_default`.

use criterion::{criterion_group, criterion_main, Criterion};
use lens::groups;
use lens::tracing::TracingBridge;
use std::hint::black_box;
use tracing_subscriber::layer::SubscriberExt as _;

#[path = "common/mod.rs"]
mod common;

use common::variants::body;

/// A span of the routed target around the body.
#[inline(never)]
fn traced(x: u64) -> u64 {
    let span = tracing::info_span!(target: "bench_model", "bench.span", n = x);
    let _e = span.enter();
    body(x)
}

/// One entry of a span made once (candle's pattern).
#[inline(never)]
fn entered(span: &tracing::Span, x: u64) -> u64 {
    let _e = span.enter();
    body(x)
}

fn per_call(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    mut f: impl FnMut(u64) -> u64,
) -> u64 {
    let mut i = 0u64;
    g.bench_function(name, |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            f(black_box(i))
        })
    });
    i
}

fn bridge(c: &mut Criterion) {
    let (provider, exporter) = common::discard_provider();
    lens::set_tracer_provider(&provider);
    let mut g = c.benchmark_group("tracing_bridge");
    let mut produced = 0u64;

    // `tracing` with no subscriber: the floor a disabled bridge aims at
    per_call(&mut g, "a_tracing_no_subscriber", traced);

    let lifetime = tracing::Dispatch::new(
        tracing_subscriber::registry().with(
            TracingBridge::new()
                .route("bench_model", &groups::STEP)
                .layer(),
        ),
    );
    let lifetime_global = tracing::Dispatch::new(
        tracing_subscriber::registry().with(
            TracingBridge::new()
                .route("bench_model", &groups::STEP)
                .global_filter(true)
                .layer(),
        ),
    );
    let beside_fmt = |global: bool| {
        use tracing_subscriber::Layer as _;
        tracing::Dispatch::new(
            tracing_subscriber::registry()
                .with(
                    tracing_subscriber::fmt::layer()
                        .with_writer(std::io::sink)
                        .with_filter(tracing_subscriber::filter::LevelFilter::WARN),
                )
                .with(
                    TracingBridge::new()
                        .route("bench_model", &groups::STEP)
                        .global_filter(global)
                        .layer(),
                ),
        )
    };
    let per_entry = tracing::Dispatch::new(
        tracing_subscriber::registry().with(
            TracingBridge::new()
                .route_per_entry("bench_model", &groups::STEP)
                .layer(),
        ),
    );
    let otel = tracing::Dispatch::new(
        tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(common::raw_tracer(&provider))),
    );

    // --- disabled: the group is off --------------------------------------
    common::lens_off();
    tracing::dispatcher::with_default(&lifetime, || {
        per_call(&mut g, "b_bridge_off", traced);
    });
    tracing::dispatcher::with_default(&lifetime_global, || {
        per_call(&mut g, "b_bridge_off_global", traced);
    });
    tracing::dispatcher::with_default(&beside_fmt(false), || {
        per_call(&mut g, "b_bridge_off_beside_fmt", traced);
    });
    tracing::dispatcher::with_default(&beside_fmt(true), || {
        per_call(&mut g, "b_bridge_off_beside_fmt_global", traced);
    });
    tracing::dispatcher::with_default(&per_entry, || {
        let span = tracing::info_span!(target: "bench_model", "bench.block");
        per_call(&mut g, "b_bridge_per_entry_off", |x| entered(&span, x));
    });

    // --- enabled -----------------------------------------------------------
    lens::set_enabled_span_groups(&lens::SpanGroupSet::resolve("step", &[]).unwrap());
    tracing::dispatcher::with_default(&lifetime, || {
        produced += per_call(&mut g, "c_bridge_on", traced);
    });
    tracing::dispatcher::with_default(&lifetime_global, || {
        produced += per_call(&mut g, "c_bridge_on_global", traced);
    });
    tracing::dispatcher::with_default(&otel, || {
        produced += per_call(&mut g, "d_tracing_opentelemetry", traced);
    });
    tracing::dispatcher::with_default(&per_entry, || {
        let span = tracing::info_span!(target: "bench_model", "bench.block");
        produced += per_call(&mut g, "e_bridge_per_entry_on", |x| entered(&span, x));
    });

    // --- enabled under setup: lens's own span recorder (the default path
    // of `install`), same layer, same discarding exporter kind
    let sink = common::DiscardExporter::default();
    let handle = common::lens_setup(sink.clone());
    tracing::dispatcher::with_default(&lifetime, || {
        let n = per_call(&mut g, "f_bridge_on_setup", traced);
        let _ = handle.force_flush();
        eprintln!(
            "tracing_bridge: under setup {n} spans, {} exported, {} dropped",
            sink.received(),
            handle.dropped_spans()
        );
    });
    let _ = handle.shutdown(std::time::Duration::from_secs(5));
    lens::set_tracer_provider(&provider);
    g.finish();

    common::lens_off();
    let dropped = common::dropped_after_flush(&provider, &exporter, produced);
    eprintln!(
        "tracing_bridge: {produced} spans produced, {dropped} dropped by the batch processor"
    );
    lens::clear_tracer_provider();
    let _ = provider.shutdown();
}

criterion_group!(benches, bridge);
criterion_main!(benches);
