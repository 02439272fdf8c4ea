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
use std::sync::atomic::{AtomicU64, Ordering};

#[path = "common/mod.rs"]
mod common;

use common::variants::*;

/// Reference for (b): the ideal gate written by hand, a `static AtomicU64`
/// of this crate and a constant mask, around the same span call
/// (`span_cm!` is the `start_span(name, Vec::new())` of `#[trace_fn]`).
static HAND_WORD: AtomicU64 = AtomicU64::new(0);

#[inline(never)]
fn hand_bit_test(x: u64) -> u64 {
    let _guard = if HAND_WORD.load(Ordering::Relaxed) & (1 << 5) != 0 {
        Some(lens::span_cm!("hand_bit_test"))
    } else {
        None
    };
    body(x)
}

/// Prototype of the proposed fix for (b) (docs/PERFORMANCE.md): the group
/// handle as a `const`, so the gate loads lens's word directly instead of
/// first loading the word's address out of the `static` handle.
const STEP_CONST: lens::SpanGroup = lens::SpanGroup::__new("step", "base", &lens::groups::WORD, 5);

#[inline(never)]
fn const_group(x: u64) -> u64 {
    let _guard = if STEP_CONST.is_enabled() {
        Some(lens::span_cm!("const_group"))
    } else {
        None
    };
    body(x)
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
    common::lens_off();
    g.bench_function("a_bare", |b| {
        let mut i = 0u64;
        b.iter(|| {
            i = i.wrapping_add(1);
            bare(black_box(i))
        })
    });
    g.bench_function("b_lens_trace_fn_off", |b| {
        let mut i = 0u64;
        b.iter(|| {
            i = i.wrapping_add(1);
            lens_trace_fn(black_box(i))
        })
    });
    HAND_WORD.store(black_box(0), Ordering::Relaxed);
    g.bench_function("b_ref_hand_bit_test_off", |b| {
        let mut i = 0u64;
        b.iter(|| {
            i = i.wrapping_add(1);
            hand_bit_test(black_box(i))
        })
    });
    g.bench_function("b_proto_const_group_off", |b| {
        let mut i = 0u64;
        b.iter(|| {
            i = i.wrapping_add(1);
            const_group(black_box(i))
        })
    });
    g.bench_function("b_lens_managed_span_off", |b| {
        let mut i = 0i64;
        b.iter(|| {
            i = i.wrapping_add(1);
            lens_managed_span(black_box(i))
        })
    });
    g.bench_function("g_tracing_instrument_off", |b| {
        let mut i = 0u64;
        b.iter(|| {
            i = i.wrapping_add(1);
            tracing_instrument(black_box(i))
        })
    });
    g.bench_function("g_fastrace_trace_off", |b| {
        let mut i = 0u64;
        b.iter(|| {
            i = i.wrapping_add(1);
            fastrace_trace(black_box(i))
        })
    });

    // --- enabled ----------------------------------------------------------
    common::lens_on(&provider);
    g.bench_function("c_lens_trace_fn_on", |b| {
        let mut i = 0u64;
        b.iter(|| {
            i = i.wrapping_add(1);
            produced += 1;
            lens_trace_fn(black_box(i))
        })
    });
    g.bench_function("d_lens_managed_span_on_1attr", |b| {
        let mut i = 0i64;
        b.iter(|| {
            i = i.wrapping_add(1);
            produced += 1;
            lens_managed_span(black_box(i))
        })
    });
    g.bench_function("e_sdk_start_end_1attr", |b| {
        let mut i = 0i64;
        b.iter(|| {
            i = i.wrapping_add(1);
            produced += 1;
            sdk_start_end(&tracer, black_box(i))
        })
    });
    g.bench_function("f_sdk_in_span_1attr", |b| {
        let mut i = 0i64;
        b.iter(|| {
            i = i.wrapping_add(1);
            produced += 1;
            sdk_in_span(&tracer, black_box(i))
        })
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
    g.bench_function("d2_lens_managed_span_on_1attr_setup", |b| {
        let mut i = 0i64;
        b.iter(|| {
            i = i.wrapping_add(1);
            lens_managed_span(black_box(i))
        })
    });
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
