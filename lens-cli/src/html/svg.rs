//! Series panels: one inline SVG per series, one polyline per rank,
//! stragglers drawn on top in red. With step spans, the training view:
//! the step spans' numeric attributes and the metrics on one step axis;
//! without, the metrics over time.

use std::collections::BTreeSet;
use std::fmt::Write;

use super::{esc, esc_cut};
use crate::report::text::fmt_ns;
use crate::report::Report;

/// Panels drawn at most.
const MAX_PANELS: usize = 16;
/// Ranks drawn per panel at most (stragglers always).
const MAX_LINES: usize = 128;

const W: f64 = 640.0;
const H: f64 = 170.0;
const PAD_L: f64 = 60.0;
const PAD_B: f64 = 20.0;
const PAD_T: f64 = 8.0;

/// The x axis of a panel.
#[derive(Debug, Clone, Copy)]
enum Axis {
    /// Time since `t0` (ns).
    Time,
    /// Iterations.
    Step,
}

/// One line of a panel: a rank's `(x, y)` points.
type Line = (i64, Vec<(f64, f64)>);

/// Writes the training view (step attributes and metrics on the step
/// axis) when the run has step spans, else the metric panels over time.
pub(crate) fn panels(o: &mut String, r: &Report, stragglers: &BTreeSet<i64>) {
    if let Some((x0, x1)) = r.step_axis {
        if !r.step_series_map.is_empty() || !r.series.is_empty() {
            training(o, r, stragglers, (x0, x1));
        }
        return;
    }
    let series = &r.series;
    if series.is_empty() {
        return;
    }
    let _ = writeln!(o, "<h2>Metrics</h2><div class=\"panels\">");
    let times = || {
        series
            .values()
            .flat_map(|m| m.values())
            .flat_map(|s| s.points.iter().map(|p| p.0))
    };
    let t0 = times().min().unwrap_or(0);
    let t1 = times().max().unwrap_or(0).max(t0 + 1);
    for (name, by_rank) in series.iter().take(MAX_PANELS) {
        let lines: Vec<Line> = by_rank
            .iter()
            .map(|(&rank, s)| {
                let pts = s.points.iter().map(|&(t, v)| ((t - t0) as f64, v));
                (rank, pts.collect())
            })
            .collect();
        let what = format!("metric · {}", points(by_rank.values().map(|s| s.count)));
        panel(
            o,
            name,
            &what,
            &lines,
            stragglers,
            (0.0, (t1 - t0) as f64),
            Axis::Time,
        );
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

/// `N points`, `N points per rank` or `up to N points per rank`: what the
/// chart has, said rather than drawn as if it were more.
fn points(counts: impl Iterator<Item = u64>) -> String {
    let (mut lo, mut hi, mut ranks) = (u64::MAX, 0, 0);
    for c in counts {
        (lo, hi, ranks) = (lo.min(c), hi.max(c), ranks + 1);
    }
    format!(
        "{}{hi} point{}{}",
        if lo < hi { "up to " } else { "" },
        if hi == 1 { "" } else { "s" },
        if ranks > 1 { " per rank" } else { "" }
    )
}

/// Step attributes, then metrics placed on the step axis: every panel has
/// the same x range, so the charts line up.
fn training(o: &mut String, r: &Report, strag: &BTreeSet<i64>, axis: (f64, f64)) {
    let _ = writeln!(
        o,
        "<h2>Training</h2><p class=\"note\">Numeric attributes of the step spans (one point per step) and the metrics (one point per export), on the same step axis: iterations {} to {}. Each chart says how many points it has.</p><div class=\"panels\">",
        axis.0,
        axis.1 - 1.0
    );
    let mut drawn = 0;
    for (name, by_rank) in r.step_series_map.iter().take(MAX_PANELS) {
        let lines: Vec<Line> = by_rank
            .iter()
            .map(|(&rank, s)| (rank, s.points.iter().map(|&(i, v)| (i as f64, v)).collect()))
            .collect();
        let what = format!(
            "step attribute · {}",
            points(by_rank.values().map(|s| s.count))
        );
        panel(o, name, &what, &lines, strag, axis, Axis::Step);
        drawn += 1;
    }
    for (name, by_rank) in r.series.iter().take(MAX_PANELS.saturating_sub(drawn)) {
        let lines: Vec<Line> = by_rank
            .iter()
            .map(|(&rank, s)| {
                let pts = s.points.iter().zip(&s.at_step);
                (rank, pts.filter_map(|(p, x)| x.map(|x| (x, p.1))).collect())
            })
            .collect();
        let count = by_rank.values().map(|s| s.count).max().unwrap_or(0);
        let mut what = format!("metric · {}", points(by_rank.values().map(|s| s.count)));
        if count < 3 {
            what.push_str(" (exported every OTEL_METRIC_EXPORT_INTERVAL, 10 s by default)");
        }
        panel(o, name, &what, &lines, strag, axis, Axis::Step);
        drawn += 1;
    }
    let _ = writeln!(o, "</div>");
    let all = r.step_series_map.len() + r.series.len();
    if all > drawn {
        let _ = writeln!(
            o,
            "<p class=\"note\">{} more series not drawn (see the tables and --json).</p>",
            all - drawn
        );
    }
}

fn panel(
    o: &mut String,
    name: &str,
    what: &str,
    lines: &[Line],
    strag: &BTreeSet<i64>,
    (x0, x1): (f64, f64),
    axis: Axis,
) {
    let vals = lines.iter().flat_map(|l| l.1.iter().map(|p| p.1));
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
    let span = (x1 - x0).max(f64::MIN_POSITIVE);
    let x = |t: f64| PAD_L + (t - x0).clamp(0.0, span) / span * (W - PAD_L - 4.0);
    let y = |v: f64| PAD_T + (hi - v) / (hi - lo) * (H - PAD_T - PAD_B);
    let _ = write!(
        o,
        "<div class=\"card panel\"><h3>{} <span class=\"note\">{}</span></h3><svg class=\"metric\" data-metric=\"{}\" viewBox=\"0 0 {W} {H}\" xmlns=\"http://www.w3.org/2000/svg\">",
        esc_cut(name),
        esc(what),
        esc_cut(name)
    );
    for i in 0..=3 {
        let v = lo + (hi - lo) * f64::from(i) / 3.0;
        let yy = y(v);
        let _ = write!(o, "<line x1=\"{PAD_L}\" x2=\"{W}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>", PAD_L - 4.0, yy + 3.0, esc(&axis_num(v)));
    }
    let ticks: Vec<(f64, String)> = match axis {
        Axis::Time => (0..=4)
            .map(|i| {
                let at = (x1 - x0) * f64::from(i) / 4.0;
                let label = match i {
                    0 => "+0".to_owned(),
                    _ => format!("+{}", fmt_ns(at as u64)),
                };
                (x0 + at, label)
            })
            .collect(),
        // whole steps only, each where its step is drawn
        Axis::Step => step_ticks(x0, x1)
            .into_iter()
            .enumerate()
            .map(|(i, v)| match i {
                0 => (v as f64, format!("step {v}")),
                _ => (v as f64, format!("{v}")),
            })
            .collect(),
    };
    let right = W - 4.0;
    for (v, label) in &ticks {
        let xx = x(*v);
        let anchor = if xx <= PAD_L + 1.0 {
            "start"
        } else if xx >= right - 12.0 {
            "end"
        } else {
            "middle"
        };
        let _ = write!(
            o,
            "<text x=\"{xx:.1}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text>",
            H - 5.0,
            esc(label)
        );
    }
    let normal = lines
        .iter()
        .filter(|(r, _)| !strag.contains(r))
        .take(MAX_LINES);
    let slow = lines.iter().filter(|(r, _)| strag.contains(r));
    for (rank, pts) in normal.chain(slow) {
        let class = if strag.contains(rank) {
            " class=\"straggler\""
        } else {
            ""
        };
        let _ = write!(o, "<polyline{class} data-rank=\"{rank}\" points=\"");
        for &(t, v) in pts {
            let _ = write!(o, "{:.1},{:.1} ", x(t), y(v));
        }
        let _ = write!(o, "\"><title>rank {rank}</title></polyline>");
        if pts.len() <= 20 {
            for &(t, v) in pts {
                let at = match axis {
                    Axis::Time => String::new(),
                    Axis::Step => format!(" at step {}", (t * 100.0).round() / 100.0),
                };
                let _ = write!(
                    o,
                    "<circle{class} data-rank=\"{rank}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\"><title>rank {rank}{}: {}</title></circle>",
                    x(t),
                    y(v),
                    esc(&at),
                    esc(&axis_num(v))
                );
            }
        }
    }
    let _ = write!(o, "</svg>");
    let _ = write!(
        o,
        "<div class=\"legend\"><span class=\"sw\" style=\"background:#7d8fb3\"></span>ranks ({})",
        lines.len()
    );
    if lines.iter().any(|(r, _)| strag.contains(r)) {
        let names: Vec<String> = lines
            .iter()
            .filter(|(r, _)| strag.contains(r))
            .map(|(r, _)| r.to_string())
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
    if v == 0.0 {
        return "0".to_owned();
    }
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

/// The whole steps to label on a step axis from `x0` to `x1`: at most
/// five, the smallest stride of 1, 2 or 5 times a power of ten that gives
/// no more.
fn step_ticks(x0: f64, x1: f64) -> Vec<i64> {
    // i128: a hostile file's steps reach i64's ends, and nothing here may
    // overflow (a tick past i64 is not drawn)
    let (first, last) = (x0.ceil() as i64 as i128, x1.floor() as i64 as i128);
    if last < first {
        return vec![x0.round() as i64];
    }
    let strides = (0..19u32).flat_map(|p| [1i128, 2, 5].map(|m| m * 10i128.pow(p)));
    for stride in strides {
        let start = first.div_euclid(stride) * stride;
        let start = if start < first { start + stride } else { start };
        let ticks: Vec<i64> = (0..6)
            .map(|k| start + k * stride)
            .take_while(|v| *v <= last)
            .filter_map(|v| i64::try_from(v).ok())
            .collect();
        if ticks.len() <= 5 {
            return ticks;
        }
    }
    vec![first as i64]
}

#[cfg(test)]
mod step_axis_tests {
    use super::step_ticks;

    #[test]
    fn step_ticks_are_whole_distinct_steps() {
        assert_eq!(step_ticks(0.0, 3.0), [0, 1, 2, 3]);
        assert_eq!(step_ticks(0.0, 10.0), [0, 5, 10]);
        assert_eq!(step_ticks(3.0, 1003.0), [200, 400, 600, 800, 1000]);
        assert_eq!(step_ticks(7.0, 7.0), [7]);
        assert_eq!(step_ticks(0.2, 0.8), [0]);
        assert!((1..=5).contains(&step_ticks(-9.3e18, 9.3e18).len()));
        assert!(step_ticks(f64::NAN, f64::INFINITY).len() <= 5);
    }
}
