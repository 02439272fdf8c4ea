//! The per-rank timeline: one lane per rank (`data-rank`). First the whole
//! job, from each rank's first span to its last (model init, the first data
//! load, evaluation and checkpoints around the steps, the steps' region
//! marked), with buttons that zoom onto the first and the last steps; then
//! the first and the last steps with their phases, aligned on the first
//! step drawn.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use rustc_hash::FxHashMap as HashMap;

use super::esc;
use super::timeline::{RankTimeline, TSpan, Timeline};
use crate::report::text::fmt_ns;

/// Lanes drawn per section at most (stragglers always).
const MAX_LANES: usize = 64;
const ROW: u32 = 16;
/// Colours of the other spans, by a hash of the name: no red, which marks
/// stragglers and failures, and none of the colours of the kinds below.
const PALETTE: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#edc948", "#9c755f", "#bab0ac", "#a0cbe8", "#d7b5a6", "#ffbe7d",
];

/// What a span is, for its colour: the step, and the job phases around
/// the steps that a person looks for (named as the span groups
/// `evaluate`, `checkpoint`, `load_checkpoint` and `model_init` name them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A step span (`dl.iteration`).
    Step,
    /// Evaluation or validation.
    Eval,
    /// Saving or loading a checkpoint.
    Checkpoint,
    /// Model or job set-up.
    Init,
    /// Anything else.
    Other,
}

impl Kind {
    /// The kind of a span named `name` (`step`: it carries an iteration).
    /// Words of the name (split at `.`, `_`, `-`, `/`, `:` and spaces) are
    /// matched ASCII case-insensitively: `eval*`, `validat*`, `val`;
    /// `checkpoint*`, `ckpt*`, `save*`, `restore*`; `init*`, `setup`.
    pub(crate) fn of(name: &str, step: bool) -> Kind {
        if step {
            return Kind::Step;
        }
        let lower = name.to_ascii_lowercase();
        let words = || lower.split(['.', '_', '-', '/', ':', ' ']);
        let any = |f: &dyn Fn(&str) -> bool| words().any(f);
        if any(&|w| {
            w.starts_with("checkpoint")
                || w.starts_with("ckpt")
                || w.starts_with("save")
                || w.starts_with("restore")
        }) {
            Kind::Checkpoint
        } else if any(&|w| w.starts_with("eval") || w.starts_with("validat") || w == "val") {
            Kind::Eval
        } else if any(&|w| w.starts_with("init") || w == "setup") {
            Kind::Init
        } else {
            Kind::Other
        }
    }

    /// The colour it is drawn in.
    fn color(self, name: &str) -> &'static str {
        match self {
            Kind::Step => "#3b4a66",
            Kind::Eval => "#2a9d8f",
            Kind::Checkpoint => "#7b5ea7",
            Kind::Init => "#8a9a2b",
            Kind::Other => {
                let h = name
                    .bytes()
                    .fold(5381u32, |h, b| h.wrapping_mul(33) ^ u32::from(b));
                PALETTE[(h % PALETTE.len() as u32) as usize]
            }
        }
    }

    /// Its CSS class.
    fn class(self) -> &'static str {
        match self {
            Kind::Step => " k-step",
            Kind::Eval => " k-eval",
            Kind::Checkpoint => " k-ckpt",
            Kind::Init => " k-init",
            Kind::Other => "",
        }
    }
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
        "One lane per rank; hover a span for its attributes; zoom with the buttons or Ctrl+wheel. The whole job first, then the steps. Showing the first {} and the last {} of up to {max_steps} steps per rank.",
        tl.keep - tl.keep / 2,
        tl.keep / 2
    );
    if !has_tail {
        note = format!("One lane per rank; hover a span for its attributes; zoom with the buttons or Ctrl+wheel. The whole job first, then the steps. All {max_steps} steps shown.");
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
    overview(o, &ranks, tl, m);
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

/// The whole job on one absolute time axis: per rank, the spans outside
/// the steps (job root, init, data loading, evaluation, checkpoints) and
/// the step spans kept, over a band that marks where the steps ran; the
/// buttons zoom onto the first and the last steps kept.
fn overview(o: &mut String, ranks: &[i64], tl: &Timeline, m: &Marks<'_>) {
    let drawn: Vec<(i64, &RankTimeline, Vec<&TSpan>)> = ranks
        .iter()
        .filter_map(|r| tl.ranks.get(r).map(|t| (*r, t)))
        .map(|(r, t)| {
            let steps = t.head.iter().chain(&t.tail).filter_map(|g| g.spans.first());
            (r, t, t.other.iter().chain(steps).collect())
        })
        .collect();
    let all = || drawn.iter().flat_map(|d| d.2.iter());
    let Some(t0) = all().map(|s| s.start).min() else {
        return;
    };
    let t1 = all().map(|s| s.end).max().unwrap_or(t0).max(t0 + 1);
    // 1% of room on the right: a short checkpoint at the very end stays in
    // view at its minimum width
    let t1 = t1.saturating_add((t1 - t0) / 100);
    let range = (t1 - t0) as f64;
    let pct = |t: u64| t.saturating_sub(t0) as f64 / range * 100.0;
    // the zoom targets: the first and the last steps kept, over all lanes
    let bounds = |groups: &mut dyn Iterator<Item = &TSpan>| {
        groups.fold(None, |acc: Option<(u64, u64)>, s| {
            Some(acc.map_or((s.start, s.end), |(a, b)| (a.min(s.start), b.max(s.end))))
        })
    };
    let first = bounds(
        &mut drawn
            .iter()
            .flat_map(|d| d.1.head.iter().filter_map(|g| g.spans.first())),
    );
    let last = bounds(
        &mut drawn
            .iter()
            .flat_map(|d| d.1.tail.iter().filter_map(|g| g.spans.first())),
    );
    let mut buttons = String::new();
    for (label, b) in [("first steps", first), ("last steps", last)] {
        if let Some((a, b)) = b {
            let _ = write!(
                buttons,
                "<button class=\"zfit\" data-fit=\"{:.4},{:.4}\">{label}</button>",
                pct(a),
                pct(b)
            );
        }
    }
    let _ = writeln!(
        o,
        "<div class=\"section card whole\"><div class=\"controls\"><b>Whole job</b><span class=\"note\">{}</span><span style=\"flex:1\"></span>{buttons}<button class=\"zout\">−</button><span class=\"zl\">1.0×</span><button class=\"zin\">+</button><button class=\"zreset\">whole job</button></div>",
        esc(&format!("{} from the first span to the last; the band marks the steps", fmt_ns(t1 - t0)))
    );
    let _ = writeln!(
        o,
        "<div class=\"legend\"><span class=\"sw\" style=\"background:{}\"></span>step <span class=\"sw\" style=\"background:{}\"></span>evaluation <span class=\"sw\" style=\"background:{}\"></span>checkpoint <span class=\"sw\" style=\"background:{}\"></span>init / set-up <span class=\"sw region-sw\"></span>steps region</div>",
        Kind::Step.color(""),
        Kind::Eval.color(""),
        Kind::Checkpoint.color(""),
        Kind::Init.color("")
    );
    let (mut labels, mut lanes_html) = (String::new(), String::new());
    for (rank, t, spans) in &drawn {
        let d = rows_of(spans, &depths(spans));
        open_lane(&mut labels, &mut lanes_html, *rank, &d, m);
        if let (Some((a_it, a)), Some((b_it, b))) = (t.first_step, t.last_step) {
            let (l, r) = (pct(a), pct(b));
            let _ = write!(
                lanes_html,
                "<div class=\"region\" style=\"left:{l:.4}%;width:{:.4}%\" title=\"{}\"></div>",
                (r - l).max(0.0),
                esc(&format!("steps {a_it}–{b_it} ({} step spans)", t.steps))
            );
        }
        for (s, depth) in spans.iter().zip(d) {
            span(&mut lanes_html, s, (t0, t1), depth, m, *rank);
        }
        let _ = write!(lanes_html, "</div>");
    }
    let _ = writeln!(
        o,
        "<div class=\"tl\"><div class=\"labels\"><div class=\"axis\"></div>{labels}</div><div class=\"scroll\"><div class=\"inner\"><div class=\"axis\">{}</div>{lanes_html}</div></div></div></div>",
        axis(range)
    );
}

/// Ten ticks over `range` ns.
/// Writes `rank`'s label and opens its lane (closed by the caller), tall
/// enough for the rows of `rows` (each span's row), marked when the rank
/// is a straggler.
fn open_lane(labels: &mut String, lanes: &mut String, rank: i64, rows: &[u32], m: &Marks<'_>) {
    let h = (rows.iter().max().map_or(1, |r| r + 1)) * ROW + 4;
    let is_strag = m.strag.contains(&rank);
    let cls = if is_strag { " straggler" } else { "" };
    let _ = write!(
        labels,
        "<div class=\"label{cls}\" style=\"height:{h}px\">rank {rank}{}</div>",
        if is_strag { " ⚠" } else { "" }
    );
    let _ = write!(
        lanes,
        "<div class=\"lane{cls}\" data-rank=\"{rank}\" style=\"height:{h}px\">"
    );
}

fn axis(range: f64) -> String {
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
    axis
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

/// Draws one span of `rank`'s lane, clipped to the window `t0..t1`.
fn span(o: &mut String, s: &TSpan, (t0, t1): (u64, u64), depth: u32, m: &Marks<'_>, rank: i64) {
    let range = t1.saturating_sub(t0).max(1) as f64;
    let a = s.start.clamp(t0, t1);
    let b = s.end.clamp(t0, t1);
    let left = (a - t0) as f64 / range * 100.0;
    let width = (b.saturating_sub(a)) as f64 / range * 100.0;
    let kind = Kind::of(&s.name, s.iteration.is_some());
    let mut class = String::from("s");
    class.push_str(kind.class());
    let slow_its = m.slow.get(&rank);
    if s.iteration
        .map(|it| it - it.rem_euclid(m.stride.max(1)))
        .is_some_and(|it| slow_its.is_some_and(|v| v.binary_search(&it).is_ok()))
    {
        class.push_str(" slow");
    }
    if m.waits.contains(&s.name) {
        class.push_str(" wait");
    }
    if m.culprit.get(&rank).is_some_and(|p| p.contains(&s.name)) {
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
        o,
        "<div class=\"{class}\" style=\"left:{left:.4}%;width:{width:.4}%;top:{}px;background:{}\" data-n=\"{}\" data-d=\"{}\" data-a=\"{}\">{label}</div>",
        depth * ROW + 2,
        kind.color(&s.name),
        esc(&s.name),
        esc(&fmt_ns(s.end - s.start)),
        esc(&s.attrs),
    );
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
        open_lane(&mut labels, &mut lanes_html, *rank, &d, m);
        for (s, depth) in all.iter().zip(d) {
            span(&mut lanes_html, s, (t0, t1), depth, m, *rank);
        }
        let _ = write!(lanes_html, "</div>");
    }
    let axis = axis(range);
    let _ = writeln!(
        o,
        "<div class=\"tl\"><div class=\"labels\"><div class=\"axis\"></div>{labels}</div><div class=\"scroll\"><div class=\"inner\"><div class=\"axis\">{axis}</div>{lanes_html}</div></div></div></div>"
    );
}
