//! Per-call overhead of lens instrumentation, side by side with a bare call,
//! the raw OpenTelemetry SDK, and the disabled paths of `tracing` and
//! `fastrace`. See docs/PERFORMANCE.md for results and how to run it.
//!
//! Every variant wraps the same `#[inline(never)]` body. Enabled variants
//! record into an `SdkTracerProvider` with a `BatchSpanProcessor` feeding an
//! exporter that drops everything (queue size in `common::MAX_QUEUE_SIZE`);
//! the run prints how many spans the processor dropped, which must be 0.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::sync::atomic::Ordering;

#[path = "common/mod.rs"]
mod common;

use common::variants::*;

/// One criterion bench of `f` called with a fresh counter value each
/// iteration; adds the number of calls to `spans` (spans produced, checked
/// against spans exported after the enabled benches).
fn per_call(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    spans: &mut u64,
    mut f: impl FnMut(u64) -> u64,
) {
    let mut i = 0u64;
    g.bench_function(name, |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            f(black_box(i))
        })
    });
    // criterion calls the routine `i` times in all (warm-up included)
    *spans += i;
}

fn overhead(c: &mut Criterion) {
    let (provider, exporter) = common::discard_provider();
    let tracer = common::raw_tracer(&provider);
    lens::set_tracer_provider(&provider);
    common::tracing_info_only();
    // spans started by the enabled variants (a local counter: one add)
    let mut produced = 0u64;

    let mut g = c.benchmark_group("overhead");

    // --- disabled ---------------------------------------------------------
    // (no span is made: a local sink takes the call counts)
    let mut none = 0u64;
    common::lens_off();
    per_call(&mut g, "a_bare", &mut none, bare);
    per_call(&mut g, "b_lens_trace_fn_off", &mut none, lens_trace_fn);
    HAND_WORD.store(black_box(0), Ordering::Relaxed);
    per_call(&mut g, "b_ref_hand_bit_test_off", &mut none, bit_test);
    per_call(
        &mut g,
        "b_ref_hand_bit_test_noguard_off",
        &mut none,
        bit_test_noguard,
    );
    per_call(&mut g, "b_lens_managed_span_off", &mut none, |i| {
        lens_managed_span(i as i64)
    });
    per_call(
        &mut g,
        "g_tracing_instrument_off",
        &mut none,
        tracing_instrument,
    );
    per_call(&mut g, "g_fastrace_trace_off", &mut none, fastrace_trace);

    // --- enabled ----------------------------------------------------------
    common::lens_on(&provider);
    per_call(&mut g, "c_lens_trace_fn_on", &mut produced, lens_trace_fn);
    per_call(&mut g, "d_lens_managed_span_on_1attr", &mut produced, |i| {
        lens_managed_span(i as i64)
    });
    per_call(&mut g, "e_sdk_start_end_1attr", &mut produced, |i| {
        sdk_start_end(&tracer, i as i64)
    });
    per_call(&mut g, "f_sdk_in_span_1attr", &mut produced, |i| {
        sdk_in_span(&tracer, i as i64)
    });

    common::lens_off();
    let dropped = common::dropped_after_flush(&provider, &exporter, produced);
    eprintln!(
        "overhead: {produced} spans produced, {dropped} dropped by the batch processor \
         (max_queue_size = {}, max_export_batch_size = {})",
        common::MAX_QUEUE_SIZE,
        common::MAX_EXPORT_BATCH_SIZE
    );
    lens::clear_tracer_provider();
    let _ = provider.shutdown();

    // --- enabled, through setup_telemetry (the production pipeline) --------
    let handle = common::lens_setup(common::DiscardExporter::default());
    per_call(
        &mut g,
        "d2_lens_managed_span_on_1attr_setup",
        &mut none,
        |i| lens_managed_span(i as i64),
    );
    // the same with 100,000 spans held open on the thread (issue 39: each
    // hand-over of 512 finished spans used to copy every open one)
    let held: Vec<_> = (0..100_000i64)
        .map(|i| lens::span_cm!("held", i = i))
        .collect();
    per_call(
        &mut g,
        "d3_lens_managed_span_on_1attr_setup_100k_open",
        &mut none,
        |i| lens_managed_span(i as i64),
    );
    drop(held);
    g.finish();
    let _ = handle.force_flush();
    eprintln!(
        "overhead (setup_telemetry pipeline): {} spans dropped",
        handle.dropped_spans()
    );
    let _ = handle.shutdown(std::time::Duration::from_secs(5));
}

criterion_group!(benches, overhead);
criterion_main!(benches);
