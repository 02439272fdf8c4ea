//! The rank × step heat map: each cell is a rank's step duration over the
//! step median (mean over the steps bucketed into that column), so a
//! straggler is a red row and a slow phase of the run a red column.

use std::collections::BTreeSet;
use std::fmt::Write;

use super::esc;
use crate::report::Report;

/// Rows drawn at most (stragglers first).
const MAX_ROWS: usize = 256;
const W: f64 = 1000.0;
const LEFT: f64 = 64.0;

/// (upper bound of the ratio, colour, legend).
const LEVELS: [(f32, &str, &str); 7] = [
    (0.98, "#cfe0f1", "< 0.98×"),
    (1.02, "#e3e8f0", "≈ median"),
    (1.05, "#fde9c8", "+2–5%"),
    (1.10, "#fbc98a", "+5–10%"),
    (1.20, "#f59a5b", "+10–20%"),
    (1.35, "#e4572e", "+20–35%"),
    (f32::INFINITY, "#b31b1b", "> +35%"),
];

fn level(r: f32) -> Option<usize> {
    if r.is_nan() {
        return None;
    }
    LEVELS.iter().position(|(hi, ..)| r < *hi)
}

/// Writes the heat map section (nothing without steps on 2+ ranks).
pub(crate) fn heat(o: &mut String, r: &Report, strag: &BTreeSet<i64>) {
    let h = &r.heat;
    let cols = h.first_iteration.len();
    if cols == 0 || h.ranks.len() < 2 {
        return;
    }
    let mut rows: Vec<usize> = (0..h.ranks.len())
        .filter(|&i| strag.contains(&h.ranks[i]))
        .collect();
    rows.extend(
        (0..h.ranks.len())
            .filter(|&i| !strag.contains(&h.ranks[i]))
            .take(MAX_ROWS.saturating_sub(rows.len())),
    );
    rows.sort_unstable();
    let row_h = (480.0 / rows.len() as f64).clamp(3.0, 12.0);
    let height = row_h * rows.len() as f64 + 22.0;
    let cw = (W - LEFT) / cols as f64;
    let _ = write!(
        o,
        "<h2>Rank × step</h2><div class=\"card\"><p class=\"note\">Step duration over the step median (white: no step){}.{}</p><svg class=\"heat\" viewBox=\"0 0 {W} {height:.0}\" xmlns=\"http://www.w3.org/2000/svg\"><rect x=\"{LEFT}\" y=\"0\" width=\"{}\" height=\"{:.1}\" fill=\"#fff\" stroke=\"#e3e6ee\"/>",
        if cols < r.steps.count { format!("; {} steps per column", r.steps.count.div_ceil(cols)) } else { String::new() },
        if rows.len() < h.ranks.len() { format!(" {} of {} ranks drawn (stragglers first).", rows.len(), h.ranks.len()) } else { String::new() },
        W - LEFT,
        row_h * rows.len() as f64
    );
    for (y, &ri) in rows.iter().enumerate() {
        let rank = h.ranks[ri];
        let yy = y as f64 * row_h;
        // every row labelled when there is room; else every few rows, and
        // always the stragglers (whose neighbours then stay unlabelled)
        let is_strag = |i: usize| rows.get(i).is_some_and(|&r| strag.contains(&h.ranks[r]));
        let every = (8.0 / row_h).ceil() as usize;
        let near_strag = (y > 0 && is_strag(y - 1)) || is_strag(y + 1);
        if row_h >= 8.0 || is_strag(y) || (y % every == 0 && !near_strag) {
            let color = if strag.contains(&rank) {
                "#d62728"
            } else {
                "#6b7385"
            };
            let _ = write!(o, "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"{color}\" font-size=\"{:.0}\">rank {rank}</text>", LEFT - 4.0, yy + row_h * 0.8, row_h.clamp(7.0, 11.0));
        }
        // runs of one colour become one rect
        let cells = &h.ratio[ri * cols..(ri + 1) * cols];
        let mut c = 0;
        while c < cols {
            let lv = level(cells[c]);
            let mut end = c + 1;
            while end < cols && level(cells[end]) == lv {
                end += 1;
            }
            if let Some(lv) = lv {
                let (lo_it, hi_it) = (
                    h.first_iteration[c],
                    h.first_iteration
                        .get(end)
                        .map_or(r.steps.rows.last().map_or(0, |x| x.iteration), |x| {
                            x.saturating_sub(1)
                        }),
                );
                let worst = cells[c..end].iter().copied().fold(0f32, f32::max);
                let _ = write!(
                    o,
                    "<rect data-rank=\"{rank}\" x=\"{:.2}\" y=\"{yy:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"{}\"><title>{}</title></rect>",
                    LEFT + c as f64 * cw,
                    (end - c) as f64 * cw,
                    row_h - 0.5,
                    LEVELS[lv].1,
                    esc(&format!("rank {rank}, iterations {lo_it}–{hi_it}: up to {worst:.2}× the median"))
                );
            }
            c = end;
        }
    }
    let axis_y = row_h * rows.len() as f64 + 14.0;
    for i in 0..=5 {
        let c = (cols - 1) * i / 5;
        let anchor = if i == 5 {
            "end"
        } else if i == 0 {
            "start"
        } else {
            "middle"
        };
        let _ = write!(o, "<text x=\"{:.1}\" y=\"{axis_y:.1}\" text-anchor=\"{anchor}\" font-size=\"10\" fill=\"#6b7385\">step {}</text>", LEFT + (c as f64 + 0.5) * cw, h.first_iteration[c]);
    }
    let _ = write!(o, "</svg><div class=\"legend\">");
    for (_, color, label) in LEVELS {
        let _ = write!(
            o,
            "<span class=\"sw\" style=\"background:{color}\"></span>{} ",
            esc(label)
        );
    }
    let _ = writeln!(o, "</div></div>");
}
