//! The per-rank timeline: one lane per rank (`data-rank`), steps and their
//! phases drawn to scale, in up to two sections (first and last steps).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use rustc_hash::FxHashMap as HashMap;

use super::esc;
use super::timeline::{TSpan, Timeline};
use crate::report::text::fmt_ns;

/// Lanes drawn per section at most (stragglers always).
const MAX_LANES: usize = 64;
const ROW: u32 = 16;
const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#e15759",
    "#bab0ac", "#ff9da7",
];

fn color(name: &str, step: bool) -> &'static str {
    if step {
        return "#3b4a66";
    }
    let h = name
        .bytes()
        .fold(5381u32, |h, b| h.wrapping_mul(33) ^ u32::from(b));
    PALETTE[(h % PALETTE.len() as u32) as usize]
}

/// What marks a lane (straggler) or a step (slow) in red.
#[derive(Debug)]
pub(crate) struct Marks<'a> {
    /// Straggler ranks (and the diagnosis's suspects).
    pub(crate) strag: &'a BTreeSet<i64>,
    /// Phases that are waits (synchronization points): drawn pale.
    pub(crate) waits: &'a BTreeSet<String>,
    /// Suspect rank → the phases it is suspected in: outlined in red.
    pub(crate) culprit: &'a BTreeMap<i64, BTreeSet<String>>,
    /// Straggler rank → first iterations of its slow rows.
    pub(crate) slow: &'a BTreeMap<i64, Vec<i64>>,
    /// Iterations per row of the step analysis.
    pub(crate) stride: i64,
}

/// Writes the timeline sections.
pub(crate) fn lanes(o: &mut String, tl: &Timeline, m: &Marks<'_>) {
    let mut ranks: Vec<i64> = tl
        .ranks
        .keys()
        .copied()
        .filter(|r| m.strag.contains(r))
        .collect();
    ranks.extend(
        tl.ranks
            .keys()
            .copied()
            .filter(|r| !m.strag.contains(r))
            .take(MAX_LANES.saturating_sub(ranks.len())),
    );
    ranks.sort_unstable();
    let has_tail = tl.ranks.values().any(|r| !r.tail.is_empty());
    let max_steps = tl.ranks.values().map(|r| r.steps).max().unwrap_or(0);
    let _ = writeln!(o, "<h2>Timeline</h2>");
    let mut note = format!(
        "One lane per rank; hover a span for its attributes; zoom with the buttons or Ctrl+wheel. Showing the first {} and the last {} of up to {max_steps} steps per rank.",
        tl.keep - tl.keep / 2,
        tl.keep / 2
    );
    if !has_tail {
        note = format!("One lane per rank; hover a span for its attributes; zoom with the buttons or Ctrl+wheel. All {max_steps} steps shown.");
    }
    if ranks.len() < tl.ranks.len() {
        note.push_str(&format!(
            " {} of {} ranks drawn (stragglers first).",
            ranks.len(),
            tl.ranks.len()
        ));
    }
    let _ = writeln!(o, "<p class=\"note\">{}</p>", esc(&note));
    let head: BTreeMap<i64, Vec<&TSpan>> = ranks
        .iter()
        .filter_map(|r| {
            tl.ranks
                .get(r)
                .map(|t| (*r, t.head.iter().flat_map(|g| &g.spans).collect()))
        })
        .collect();
    let any_steps = head.values().any(|v| !v.is_empty());
    if !any_steps {
        let other: BTreeMap<i64, Vec<&TSpan>> = ranks
            .iter()
            .filter_map(|r| tl.ranks.get(r).map(|t| (*r, t.other.iter().collect())))
            .collect();
        section(o, "Spans (no step spans found)", &other, tl, m, false);
        return;
    }
    section(
        o,
        if has_tail { "First steps" } else { "Steps" },
        &head,
        tl,
        m,
        true,
    );
    if has_tail {
        let tail: BTreeMap<i64, Vec<&TSpan>> = ranks
            .iter()
            .filter_map(|r| {
                tl.ranks
                    .get(r)
                    .map(|t| (*r, t.tail.iter().flat_map(|g| &g.spans).collect()))
            })
            .collect();
        section(o, "Last steps", &tail, tl, m, true);
    }
}

/// Rows: the depth in the parent chain, except that spans overlapping a
/// span of the same depth (async work, lost parents) move to extra rows
/// below, so that nothing is drawn over anything else.
fn rows_of(spans: &[&TSpan], depths: &[u32]) -> Vec<u32> {
    let max_depth = depths.iter().copied().max().unwrap_or(0);
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by_key(|&i| (depths[i], spans[i].start));
    let mut row_end: HashMap<u32, u64> = HashMap::default();
    let mut rows = depths.to_vec();
    let mut extra = max_depth;
    for i in order {
        let (start, end) = (spans[i].start, spans[i].end);
        let mut row = depths[i];
        if row_end.get(&row).is_some_and(|&e| e > start) {
            row = (max_depth + 1..=extra)
                .find(|r| row_end.get(r).is_none_or(|&e| e <= start))
                .unwrap_or_else(|| {
                    extra += 1;
                    extra
                });
        }
        row_end.insert(row, end);
        rows[i] = row;
    }
    rows
}

fn depths(spans: &[&TSpan]) -> Vec<u32> {
    let parent: HashMap<u64, u64> = spans
        .iter()
        .filter(|s| s.id != 0)
        .map(|s| (s.id, s.parent))
        .collect();
    spans
        .iter()
        .map(|s| {
            let (mut d, mut p) = (0u32, s.parent);
            while let Some(&pp) = parent.get(&p) {
                d += 1;
                p = pp;
                if d > 32 {
                    break;
                }
            }
            d
        })
        .collect()
}

fn section(
    o: &mut String,
    title: &str,
    main: &BTreeMap<i64, Vec<&TSpan>>,
    tl: &Timeline,
    m: &Marks<'_>,
    add_other: bool,
) {
    // each lane is aligned on its own first step, so that iterations line up
    let origin = |spans: &Vec<&TSpan>| {
        spans
            .iter()
            .filter(|s| s.iteration.is_some())
            .map(|s| s.start)
            .min()
            .or_else(|| spans.iter().map(|s| s.start).min())
            .unwrap_or(0)
    };
    let width = main
        .values()
        .map(|v| {
            v.iter()
                .map(|s| s.end)
                .max()
                .unwrap_or(0)
                .saturating_sub(origin(v))
        })
        .max()
        .unwrap_or(0)
        .max(1);
    let range = width as f64;
    let _ = writeln!(
        o,
        "<div class=\"section card\"><div class=\"controls\"><b>{}</b><span class=\"note\">{}</span><span style=\"flex:1\"></span><button class=\"zout\">−</button><span class=\"zl\">1.0×</span><button class=\"zin\">+</button><button class=\"zreset\">reset</button></div>",
        esc(title),
        esc(&format!("{} wide; lanes aligned on their first step shown", fmt_ns(width)))
    );
    let mut lanes_html = String::new();
    let mut labels = String::new();
    for (rank, spans) in main {
        let t0 = origin(spans);
        let t1 = t0.saturating_add(width);
        let mut all: Vec<&TSpan> = spans.clone();
        if add_other {
            if let Some(r) = tl.ranks.get(rank) {
                all.extend(r.other.iter().filter(|s| s.end > t0 && s.start < t1));
            }
        }
        let d = rows_of(&all, &depths(&all));
        let rows = d.iter().max().map_or(1, |m| m + 1);
        let h = rows * ROW + 4;
        let is_strag = m.strag.contains(rank);
        let cls = if is_strag { " straggler" } else { "" };
        let slow_its = m.slow.get(rank);
        let _ = write!(
            labels,
            "<div class=\"label{cls}\" style=\"height:{h}px\">rank {rank}{}</div>",
            if is_strag { " ⚠" } else { "" }
        );
        let _ = write!(
            lanes_html,
            "<div class=\"lane{cls}\" data-rank=\"{rank}\" style=\"height:{h}px\">"
        );
        for (s, depth) in all.iter().zip(d) {
            let a = s.start.max(t0);
            let b = s.end.min(t1);
            let left = (a - t0) as f64 / range * 100.0;
            let width = (b.saturating_sub(a)) as f64 / range * 100.0;
            let mut class = String::from("s");
            if s.iteration
                .map(|it| it - it.rem_euclid(m.stride.max(1)))
                .is_some_and(|it| slow_its.is_some_and(|v| v.binary_search(&it).is_ok()))
            {
                class.push_str(" slow");
            }
            if m.waits.contains(&s.name) {
                class.push_str(" wait");
            }
            if m.culprit.get(rank).is_some_and(|p| p.contains(&s.name)) {
                class.push_str(" culprit");
            }
            if s.truncated {
                class.push_str(" trunc");
            }
            if s.error {
                class.push_str(" err");
            }
            let label = if width > 3.0 {
                esc(&s.name)
            } else {
                String::new()
            };
            let _ = write!(
                lanes_html,
                "<div class=\"{class}\" style=\"left:{left:.4}%;width:{width:.4}%;top:{}px;background:{}\" data-n=\"{}\" data-d=\"{}\" data-a=\"{}\">{label}</div>",
                depth * ROW + 2,
                color(&s.name, s.iteration.is_some()),
                esc(&s.name),
                esc(&fmt_ns(s.end - s.start)),
                esc(&s.attrs),
            );
        }
        let _ = write!(lanes_html, "</div>");
    }
    let mut axis = String::new();
    for i in 0..10 {
        let label = if i == 0 {
            "0".to_owned()
        } else {
            fmt_ns((range * f64::from(i) / 10.0) as u64)
        };
        let _ = write!(
            axis,
            "<div class=\"tick\" style=\"left:{}%\">+{}</div>",
            i * 10,
            esc(&label)
        );
    }
    let _ = writeln!(
        o,
        "<div class=\"tl\"><div class=\"labels\"><div class=\"axis\"></div>{labels}</div><div class=\"scroll\"><div class=\"inner\"><div class=\"axis\">{axis}</div>{lanes_html}</div></div></div></div>"
    );
}
