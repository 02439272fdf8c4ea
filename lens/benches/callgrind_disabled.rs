//! Driver for `scripts/callgrind.sh`: runs one instrumentation variant N
//! times so callgrind can count instructions per call
//! (`Ir(2N) - Ir(N)` over N cancels set-up and shutdown; the script counts
//! only inside [`run`]).
//!
//! ```text
//! callgrind_disabled <mode> <iterations>
//! ```
//!
//! Every variant wraps the same `#[inline(never)]` body and is called from
//! the same loop; disabled modes compare the site's gate, enabled modes the
//! work on the calling thread. With no mode (as under `cargo test --benches`
//! or `cargo bench`) it runs every mode briefly as a smoke test.

use lens::otel_sdk::trace::SdkTracer;
use std::hint::black_box;
use std::sync::atomic::Ordering;

#[path = "common/mod.rs"]
mod common;

use common::variants::*;

/// The modes, in the order the script reports them.
const MODES: &[&str] = &[
    "bare",
    "bit_test",
    "bit_test_xcrate",
    "bit_test_noguard",
    "bit_test_noguard_xcrate",
    "lens_off",
    "lens_managed_off",
    "bare3",
    "lens_off3",
    "tracing_off",
    "bridge_off",
    "bridge_off_global",
    "fastrace_off",
    "lens_trace_fn_on",
    "lens_on",
    "lens_setup_on",
    "lens_setup_ids_on",
    "lens_setup3_on",
    "sdk_on",
    "sdk_cx_on",
    "sdk_guard_on",
    "fastrace_root_on",
    "fastrace_local_on",
    "otel_current_ids",
    "otel_current_full",
];

/// Enabled modes flush the batch processor every this many spans: valgrind
/// runs one thread at a time and would otherwise let the queue fill, and a
/// full queue drops spans on the calling thread. Identical for every
/// enabled mode; it costs well under one instruction per call.
const FLUSH_EVERY: u64 = 4096;

/// The fastrace modes call `fastrace::flush()` every this many spans, so
/// the calling thread's command ring (10,240 commands; a root span with a
/// local parent sends four) never spills into its overflow queue.
/// `fastrace::flush()` hands the collector's work to a thread of its own
/// and joins it, so that work is not counted; spawning and joining the
/// thread is, spread over the spans (the same in both fastrace modes).
const FASTRACE_FLUSH_EVERY: u64 = 1024;

/// Everything measured happens inside this function: the script counts only
/// while it runs (`--toggle-collect`), because process start-up is not
/// deterministic (fastrace's clock calibrates itself in a static
/// constructor by spinning for a fixed wall-clock time).
#[inline(never)]
fn run(mode: &str, n: u64) -> Result<(), String> {
    let mut acc = 0u64;
    macro_rules! disabled {
        ($f:ident) => {
            for i in 0..n {
                acc = acc.wrapping_add($f(black_box(i)));
            }
        };
    }
    macro_rules! enabled {
        (|$i:ident, $t:ident| $call:expr) => {{
            let (provider, exporter) = common::discard_provider();
            let tracer = common::raw_tracer(&provider);
            common::lens_on(&provider);
            let $t: &SdkTracer = &tracer;
            for k in 0..n {
                let $i = black_box(k as i64);
                acc = acc.wrapping_add($call);
                if k % FLUSH_EVERY == FLUSH_EVERY - 1 {
                    let _ = provider.force_flush();
                }
            }
            common::lens_off();
            let dropped = common::dropped_after_flush(&provider, &exporter, n);
            lens::clear_tracer_provider();
            let _ = provider.shutdown();
            eprintln!("{mode}: {n} spans, {dropped} dropped by the batch processor");
        }};
    }
    match mode {
        "bare" => disabled!(bare),
        "bit_test" => disabled!(bit_test),
        "bit_test_xcrate" => disabled!(bit_test_xcrate),
        "bit_test_noguard" => disabled!(bit_test_noguard),
        "bit_test_noguard_xcrate" => disabled!(bit_test_noguard_xcrate),
        "lens_off" => disabled!(lens_trace_fn),
        "bare3" => {
            for i in 0..n {
                acc = acc.wrapping_add(bare3(black_box(i), black_box(i), black_box(i)));
            }
        }
        "lens_off3" => {
            for i in 0..n {
                acc = acc.wrapping_add(lens_trace_fn3(black_box(i), black_box(i), black_box(i)));
            }
        }
        "lens_managed_off" => {
            for i in 0..n {
                acc = acc.wrapping_add(lens_managed_span(black_box(i as i64)));
            }
        }
        "tracing_off" => {
            common::tracing_info_only();
            disabled!(tracing_instrument)
        }
        "bridge_off" | "bridge_off_global" => {
            // the bridge alone, its target routed to a group that is off:
            // per layer (the span is made, lens skips it) or global (the
            // span is not made)
            use tracing_subscriber::layer::SubscriberExt as _;
            let bridge = lens::tracing::TracingBridge::new()
                .route("bench_model", &lens::groups::STEP)
                .global_filter(mode == "bridge_off_global");
            let dispatch =
                tracing::Dispatch::new(tracing_subscriber::registry().with(bridge.layer()));
            common::lens_off();
            tracing::dispatcher::with_default(&dispatch, || disabled!(tracing_bridged));
        }
        "fastrace_off" => disabled!(fastrace_trace),
        "lens_trace_fn_on" => enabled!(|i, _t| lens_trace_fn(i as u64)),
        "lens_on" => enabled!(|i, _t| lens_managed_span(i)),
        "lens_setup_on" | "lens_setup_ids_on" | "lens_setup3_on" => {
            if mode == "lens_setup_ids_on" {
                // a span current in OpenTelemetry as its ids only
                std::env::set_var("NEMO_LENS_OTEL_CONTEXT", "ids");
            }
            let handle = common::lens_setup(common::DiscardExporter::default());
            std::env::remove_var("NEMO_LENS_OTEL_CONTEXT");
            let site = match mode {
                "lens_setup3_on" => lens_managed_span3,
                _ => lens_managed_span,
            };
            for k in 0..n {
                acc = acc.wrapping_add(site(black_box(k as i64)));
                if k % FLUSH_EVERY == FLUSH_EVERY - 1 {
                    let _ = handle.force_flush();
                }
            }
            let _ = handle.force_flush();
            let dropped = handle.dropped_spans();
            let _ = handle.shutdown(std::time::Duration::from_secs(5));
            eprintln!("{mode}: {n} spans, {dropped} dropped by the batch processor");
        }
        "fastrace_root_on" | "fastrace_local_on" => {
            // fastrace's own OpenTelemetry reporter into the discarding
            // exporter, as total_cpu's fastrace variants
            let exporter = common::DiscardExporter::default();
            let reporter = fastrace_opentelemetry::OpenTelemetryReporter::new(
                exporter.clone(),
                std::borrow::Cow::Owned(lens::otel_sdk::Resource::builder().build()),
                common::lens_scope(),
            );
            fastrace::set_reporter(reporter, fastrace::collector::Config::default());
            let local = mode == "fastrace_local_on";
            let before = exporter.received();
            let mut step = None;
            for k in 0..n {
                let i = black_box(k as i64);
                if local {
                    if k % FASTRACE_SPANS_PER_ROOT == 0 {
                        drop(step.take()); // the previous root ends first
                        step = Some(FastraceStep::new(k));
                    }
                    acc = acc.wrapping_add(fastrace_local_span(i));
                } else {
                    acc = acc.wrapping_add(fastrace_root_span(i));
                }
                if k % FASTRACE_FLUSH_EVERY == FASTRACE_FLUSH_EVERY - 1 {
                    fastrace::flush();
                }
            }
            drop(step);
            fastrace::flush();
            let expected = if local {
                n + n.div_ceil(FASTRACE_SPANS_PER_ROOT)
            } else {
                n
            };
            let dropped = expected.saturating_sub(exporter.received() - before);
            eprintln!("{mode}: {expected} spans (roots included), {dropped} dropped by the batch processor");
        }
        "sdk_on" => enabled!(|i, t| sdk_start_end(t, i)),
        "sdk_cx_on" => enabled!(|i, t| sdk_in_span(t, i)),
        "sdk_guard_on" => enabled!(|i, t| sdk_guard_like(t, i)),
        "otel_current_ids" | "otel_current_full" => {
            let full = mode == "otel_current_full";
            for i in 0..n {
                acc = acc.wrapping_add(otel_current_only(black_box(i as i64), full));
            }
        }
        _ => {
            return Err(format!(
                "unknown mode `{mode}`; modes: {}",
                MODES.join(", ")
            ))
        }
    }
    black_box(acc);
    Ok(())
}

fn main() {
    HAND_WORD.store(black_box(0), Ordering::Relaxed);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some(mode) if !mode.starts_with('-') => {
            let n = match args.get(1).map(|s| s.replace('_', "").parse::<u64>()) {
                Some(Ok(n)) => n,
                None => 1_000_000,
                Some(Err(e)) => {
                    eprintln!("bad iteration count: {e}");
                    std::process::exit(2);
                }
            };
            run(mode, n)
        }
        // no mode, or harness flags from `cargo test` / `cargo bench`
        _ => MODES.iter().try_for_each(|m| run(m, 1000)),
    };
    if let Err(e) = result {
        eprintln!("{e}");
        std::process::exit(2);
    }
}
