//! Paired, interleaved wall-clock comparison of an enabled lens span with
//! the raw OpenTelemetry SDK doing the same span.
//!
//! Criterion measures one variant after the other; on a shared 2-core VM the
//! machine's speed drifts between them by more than the differences we look
//! for. Here every round runs each variant on a batch of spans, back to back
//! and in a rotating order, and the comparison is the median of the
//! per-round differences (with a distribution-free 95% confidence interval
//! of that median), so drift that is slow compared with a round cancels.
//!
//! ```text
//! cargo bench -p nemo-lens --bench paired               # full run (about a minute)
//! ROUNDS=2000 BATCH=1000 cargo bench -p nemo-lens --bench paired
//! ```
//!
//! Phase 1 records every variant into one provider (a batch processor into a
//! discarding exporter, `common::discard_provider`) installed for lens with
//! `set_tracer_provider`. Phase 2 is the production path: lens under
//! `TelemetryBuilder::install` (open-span tracking, counters, fork-safe ids,
//! the configured sampler), paired with the raw SDK on phase 1's provider.
//! The batch queues are flushed between rounds (outside the timed part), so
//! no span is dropped; the run checks that.

use std::hint::black_box;
use std::time::Instant;

#[path = "common/mod.rs"]
mod common;

use common::variants::{
    lens_managed_span, sdk_guard_like, sdk_in_span, sdk_in_span_end, sdk_start_end,
};

/// The target of the issue: an enabled `managed_span!` with one attribute
/// and context attach costs at most the raw SDK's start+end plus this.
const TARGET_NS: f64 = 100.0;

struct Settings {
    full: bool,
    warmup: usize,
    rounds: usize,
    batch: usize,
}

fn settings() -> Settings {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: then
    // this is a quick smoke run.
    let full = std::env::args().any(|a| a == "--bench");
    let var = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    if full {
        Settings {
            full,
            warmup: var("WARMUP", 50),
            rounds: var("ROUNDS", 600),
            batch: var("BATCH", 2000),
        }
    } else {
        Settings {
            full,
            warmup: 1,
            rounds: 5,
            batch: 50,
        }
    }
}

/// One timed batch of `n` spans, in ns per span.
fn time_batch(n: usize, f: &mut dyn FnMut(i64) -> u64) -> f64 {
    let mut acc = 0u64;
    let start = Instant::now();
    for i in 0..n {
        acc = acc.wrapping_add(f(black_box(i as i64)));
    }
    let ns = start.elapsed().as_nanos() as f64 / n as f64;
    black_box(acc);
    ns
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Distribution-free 95% confidence interval of the median: the order
/// statistics at n/2 ∓ 0.98·√n (normal approximation to the binomial).
fn median_ci(v: &[f64]) -> (f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len() as f64;
    let half = 0.98 * n.sqrt();
    let lo = ((n / 2.0 - half).floor().max(0.0)) as usize;
    let hi = ((n / 2.0 + half).ceil() as usize).min(s.len() - 1);
    (s[lo], s[hi])
}

/// Runs `variants` for `warmup + rounds` rounds, rotating their order each
/// round and calling `between` after each round (untimed). Returns the
/// per-round ns/span of each variant (warm-up rounds dropped).
fn run_rounds(
    s: &Settings,
    variants: &mut [(&str, &mut dyn FnMut(i64) -> u64)],
    between: &mut dyn FnMut(),
) -> Vec<Vec<f64>> {
    let k = variants.len();
    let mut samples = vec![Vec::with_capacity(s.rounds); k];
    for round in 0..s.warmup + s.rounds {
        for j in 0..k {
            let v = (round + j) % k;
            let ns = time_batch(s.batch, &mut *variants[v].1);
            if round >= s.warmup {
                samples[v].push(ns);
            }
        }
        between();
    }
    samples
}

/// Prints each variant and each `(a, b)` difference; `checked` pairs are
/// lens against the raw start+end and get a verdict against the target.
fn report(s: &Settings, names: &[&str], samples: &[Vec<f64>], pairs: &[(usize, usize, bool)]) {
    println!("{:<34} {:>10} {:>10}", "variant", "median ns", "min ns");
    for (name, v) in names.iter().zip(samples) {
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        println!("{name:<34} {:>10.1} {:>10.1}", median(v), min);
    }
    for &(a, b, checked) in pairs {
        let diffs: Vec<f64> = samples[a]
            .iter()
            .zip(&samples[b])
            .map(|(x, y)| x - y)
            .collect();
        let (lo, hi) = median_ci(&diffs);
        let d = median(&diffs);
        let verdict = if !checked {
            String::new()
        } else if s.full {
            if d <= TARGET_NS {
                format!("  target <= +{TARGET_NS:.0} ns: PASS")
            } else {
                format!("  target <= +{TARGET_NS:.0} ns: MISS")
            }
        } else {
            "  (smoke run: no verdict)".to_owned()
        };
        println!(
            "{} - {}: median of per-round differences {:+.1} ns (95% CI {:+.1} .. {:+.1}){verdict}",
            names[a], names[b], d, lo, hi
        );
    }
}

fn main() {
    let s = settings();
    println!(
        "paired: {} rounds (+{} warm-up) x {} spans per variant per round",
        s.rounds, s.warmup, s.batch
    );

    // --- phase 1: one provider, lens via set_tracer_provider ----------------
    let (provider, exporter) = common::discard_provider();
    let tracer = common::raw_tracer(&provider);
    common::lens_on(&provider);
    let mut produced = 0u64;
    let names = [
        "lens managed_span! (1 attr)",
        "sdk start+end (1 attr)",
        "sdk in_span-style (1 attr)",
        "sdk in_span-style + explicit end",
        "sdk guard-like (own handle + end)",
    ];
    let samples = {
        let mut lens = |i| lens_managed_span(i);
        let mut raw = |i| sdk_start_end(&tracer, i);
        let mut in_span = |i| sdk_in_span(&tracer, i);
        let mut in_span_end = |i| sdk_in_span_end(&tracer, i);
        let mut guard_like = |i| sdk_guard_like(&tracer, i);
        let mut variants: [(&str, &mut dyn FnMut(i64) -> u64); 5] = [
            (names[0], &mut lens),
            (names[1], &mut raw),
            (names[2], &mut in_span),
            (names[3], &mut in_span_end),
            (names[4], &mut guard_like),
        ];
        let mut flush = || {
            let _ = provider.force_flush();
        };
        run_rounds(&s, &mut variants, &mut flush)
    };
    produced += ((s.warmup + s.rounds) * s.batch * names.len()) as u64;
    println!("\nphase 1: lens with set_tracer_provider, same provider for all");
    report(
        &s,
        &names,
        &samples,
        &[
            (0, 1, true),
            (0, 2, false),
            (2, 1, false),
            (3, 2, false),
            (4, 2, false),
            (0, 4, false),
        ],
    );
    common::lens_off();
    lens::clear_tracer_provider();

    // --- phase 2: lens under setup (production path) ------------------------
    let lens_exporter = common::DiscardExporter::default();
    let handle = common::lens_setup(lens_exporter.clone());
    let names2 = ["lens managed_span! under setup", "sdk start+end (1 attr)"];
    let samples2 = {
        let mut lens = |i| lens_managed_span(i);
        let mut raw = |i| sdk_start_end(&tracer, i);
        let mut variants: [(&str, &mut dyn FnMut(i64) -> u64); 2] =
            [(names2[0], &mut lens), (names2[1], &mut raw)];
        let mut flush = || {
            let _ = handle.force_flush();
            let _ = provider.force_flush();
        };
        run_rounds(&s, &mut variants, &mut flush)
    };
    let lens_produced = ((s.warmup + s.rounds) * s.batch) as u64;
    produced += lens_produced;
    println!("\nphase 2: lens under TelemetryBuilder::install, raw SDK on phase 1's provider");
    report(&s, &names2, &samples2, &[(0, 1, true)]);
    let lens_dropped = handle.dropped_spans();
    let _ = handle.shutdown(std::time::Duration::from_secs(5));
    let raw_dropped = common::dropped_after_flush(&provider, &exporter, produced - lens_produced);
    println!(
        "\ndropped by the batch processors: lens {lens_dropped}, raw {raw_dropped} (must be 0)"
    );
    let _ = provider.shutdown();
    assert_eq!(
        lens_dropped + raw_dropped,
        0,
        "a batch processor dropped spans"
    );
}
