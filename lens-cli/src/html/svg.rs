//! Metric panels: one inline SVG per metric, one polyline per rank,
//! stragglers drawn on top in red.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use super::{esc, esc_cut};
use crate::report::text::fmt_ns;
use crate::report::Series;

/// Panels drawn at most.
const MAX_PANELS: usize = 16;
/// Ranks drawn per panel at most (stragglers always).
const MAX_LINES: usize = 128;

const W: f64 = 640.0;
const H: f64 = 190.0;
const PAD_L: f64 = 60.0;
const PAD_B: f64 = 20.0;
const PAD_T: f64 = 8.0;

/// Writes the metric panels section.
pub(crate) fn panels(
    o: &mut String,
    series: &BTreeMap<String, BTreeMap<i64, Series>>,
    stragglers: &BTreeSet<i64>,
) {
    if series.is_empty() {
        return;
    }
    let _ = writeln!(o, "<h2>Metrics</h2><div class=\"panels\">");
    let t0 = series
        .values()
        .flat_map(|m| m.values())
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .min()
        .unwrap_or(0);
    let t1 = series
        .values()
        .flat_map(|m| m.values())
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .max()
        .unwrap_or(0);
    for (name, by_rank) in series.iter().take(MAX_PANELS) {
        panel(o, name, by_rank, stragglers, t0, t1.max(t0 + 1));
    }
    let _ = writeln!(o, "</div>");
    if series.len() > MAX_PANELS {
        let _ = writeln!(
            o,
            "<p class=\"note\">{} more metrics not drawn (see the table).</p>",
            series.len() - MAX_PANELS
        );
    }
}

fn panel(
    o: &mut String,
    name: &str,
    by_rank: &BTreeMap<i64, Series>,
    strag: &BTreeSet<i64>,
    t0: u64,
    t1: u64,
) {
    let vals = by_rank.values().flat_map(|s| s.points.iter().map(|p| p.1));
    let (mut lo, mut hi) = vals.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    if !lo.is_finite() {
        return;
    }
    if hi - lo < f64::EPSILON * hi.abs().max(1.0) {
        let pad = if hi == 0.0 { 0.5 } else { hi.abs() * 0.1 };
        lo -= pad;
        hi += pad;
    }
    let x = |t: u64| PAD_L + (t.saturating_sub(t0)) as f64 / (t1 - t0) as f64 * (W - PAD_L - 4.0);
    let y = |v: f64| PAD_T + (hi - v) / (hi - lo) * (H - PAD_T - PAD_B);
    let _ = write!(
        o,
        "<div class=\"card panel\"><h3>{}</h3><svg class=\"metric\" data-metric=\"{}\" viewBox=\"0 0 {W} {H}\" xmlns=\"http://www.w3.org/2000/svg\">",
        esc_cut(name),
        esc_cut(name)
    );
    for i in 0..=3 {
        let v = lo + (hi - lo) * f64::from(i) / 3.0;
        let yy = y(v);
        let _ = write!(o, "<line x1=\"{PAD_L}\" x2=\"{W}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>", PAD_L - 4.0, yy + 3.0, esc(&axis_num(v)));
    }
    for i in 0..=4 {
        let xx = PAD_L + f64::from(i) / 4.0 * (W - PAD_L - 4.0);
        let anchor = if i == 4 { "end" } else { "start" };
        let at = ((t1 - t0) as f64 * f64::from(i) / 4.0) as u64;
        let label = if i == 0 { "0".to_owned() } else { fmt_ns(at) };
        let _ = write!(
            o,
            "<text x=\"{xx:.1}\" y=\"{}\" text-anchor=\"{anchor}\">+{}</text>",
            H - 5.0,
            esc(&label)
        );
    }
    let normal = by_rank
        .iter()
        .filter(|(r, _)| !strag.contains(r))
        .take(MAX_LINES);
    let slow = by_rank.iter().filter(|(r, _)| strag.contains(r));
    for (rank, s) in normal.chain(slow) {
        let class = if strag.contains(rank) {
            " class=\"straggler\""
        } else {
            ""
        };
        let _ = write!(o, "<polyline{class} data-rank=\"{rank}\" points=\"");
        for &(t, v) in &s.points {
            let _ = write!(o, "{:.1},{:.1} ", x(t), y(v));
        }
        let _ = write!(o, "\"><title>rank {rank}</title></polyline>");
        if s.points.len() <= 20 {
            for &(t, v) in &s.points {
                let _ = write!(
                    o,
                    "<circle{class} data-rank=\"{rank}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\"><title>rank {rank}: {}</title></circle>",
                    x(t),
                    y(v),
                    esc(&axis_num(v))
                );
            }
        }
    }
    let _ = write!(o, "</svg>");
    let _ = write!(
        o,
        "<div class=\"legend\"><span class=\"sw\" style=\"background:#7d8fb3\"></span>ranks ({})",
        by_rank.len()
    );
    if by_rank.keys().any(|r| strag.contains(r)) {
        let names: Vec<String> = by_rank
            .keys()
            .filter(|r| strag.contains(r))
            .map(|r| r.to_string())
            .collect();
        let _ = write!(
            o,
            " <span class=\"sw\" style=\"background:#d62728\"></span>stragglers: rank {}",
            names.join(", ")
        );
    }
    let _ = writeln!(o, "</div></div>");
}

/// A short axis label: 4 significant digits with an SI suffix.
fn axis_num(v: f64) -> String {
    let a = v.abs();
    let (x, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    if x == 0.0 || (1e-3..1e4).contains(&x.abs()) {
        let digits = (3 - x.abs().log10().floor().max(-3.0) as i32).clamp(0, 6) as usize;
        format!("{x:.digits$}{suffix}")
    } else {
        format!("{x:.2e}")
    }
}
