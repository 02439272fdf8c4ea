//! `lens report --html`: one self-contained page (inline CSS, JS and SVG,
//! no network fetches) with the report tables, a per-rank timeline and
//! metric panels. Its size is bounded: the timeline keeps only the first
//! and last steps of each rank, series are decimated, long tables capped.

mod assets;
mod heat;
mod lanes;
mod svg;
mod timeline;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use crate::input::otlp::{Metric, Span};
use crate::input::{Origin, Sink};
use crate::report::text::{fmt_ns, fmt_num, rank_ranges};
use crate::report::{Aggregator, Report};
pub(crate) use timeline::Timeline;

/// Table rows shown per long table.
const MAX_ROWS: usize = 40;
/// Longest text from the input copied into the page, in bytes: attribute
/// keys and values, span names and ids, status messages, run ids and
/// metric labels. Longer ones are cut there and end in
/// `… (truncated, N bytes)`, N their full length.
pub(crate) const MAX_TEXT_BYTES: usize = 256;

/// Feeds both the report aggregation and the timeline capture.
#[derive(Debug)]
pub(crate) struct Collector {
    agg: Aggregator,
    tl: Timeline,
}

impl Collector {
    /// A collector feeding `agg`, keeping `steps` steps per rank for the
    /// timeline.
    pub(crate) fn new(agg: Aggregator, steps: usize) -> Self {
        Collector {
            agg,
            tl: Timeline::new(steps),
        }
    }

    /// Splits into the aggregation and the timeline.
    pub(crate) fn into_parts(mut self) -> (Aggregator, Timeline) {
        self.tl.finish();
        (self.agg, self.tl)
    }
}

impl Sink for Collector {
    fn spans(&mut self, o: &Origin, s: &[Span<'_>]) {
        self.agg.spans(o, s);
        self.tl.add(o, s);
    }

    fn metrics(&mut self, o: &Origin, m: &[Metric<'_>]) {
        self.agg.metrics(o, m);
    }

    fn logs(&mut self, o: &Origin, n: usize) {
        self.agg.logs(o, n);
    }
}

/// `s`, cut to [`MAX_TEXT_BYTES`] (on a character boundary) with
/// `… (truncated, N bytes)` appended when longer.
pub(crate) fn cut(s: &str) -> std::borrow::Cow<'_, str> {
    if s.len() <= MAX_TEXT_BYTES {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut end = MAX_TEXT_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}… (truncated, {} bytes)", &s[..end], s.len()))
}

/// [`esc`] of [`cut`]: text from the input.
pub(crate) fn esc_cut(s: &str) -> String {
    esc(&cut(s))
}

/// [`esc`] of a sentence of lens's own that quotes a few input names (the
/// diagnosis's verdict and evidence): cut at four times [`MAX_TEXT_BYTES`].
fn esc_cut_long(s: &str) -> String {
    let max = 4 * MAX_TEXT_BYTES;
    if s.len() <= max {
        return esc(s);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    esc(&format!("{}… (truncated, {} bytes)", &s[..end], s.len()))
}

/// Escapes text for HTML content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            '\n' => o.push_str("&#10;"),
            c => o.push(c),
        }
    }
    o
}

/// Renders the page.
pub(crate) fn render(r: &Report, tl: &Timeline) -> String {
    // the lanes marked in red: the diagnosis's suspects, and ranks whose
    // whole step was slow
    let strag: BTreeSet<i64> = r
        .stragglers
        .iter()
        .map(|s| s.rank)
        .chain(r.suspects.iter().map(|s| s.rank))
        .collect();
    let waits: BTreeSet<String> = r.diagnosis.wait_phases.iter().cloned().collect();
    let mut culprit: BTreeMap<i64, BTreeSet<String>> = BTreeMap::new();
    for s in &r.suspects {
        culprit.entry(s.rank).or_default().insert(s.phase.clone());
    }
    let run = if r.run_ids.is_empty() {
        "run".to_owned()
    } else {
        r.run_ids.join(", ")
    };
    let mut o = String::with_capacity(1 << 20);
    let _ = write!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>lens report: {}</title><style>{}</style></head><body><header><h1>lens report: {}</h1><div class=\"sub\">{} spans · {} rank(s) · world size {} · {} file(s){}</div></header><main>",
        esc_cut(&run),
        assets::CSS,
        esc_cut(&run),
        r.spans.count,
        r.ranks.len(),
        r.world_size.map_or("?".to_owned(), |w| w.to_string()),
        r.input.files,
        if r.input.skipped_lines + r.input.broken_files + r.input.unreadable_paths > 0 {
            format!(" · {} bad line(s) skipped, {} file(s) cut short, {} unreadable folder(s) skipped", r.input.skipped_lines, r.input.broken_files, r.input.unreadable_paths)
        } else {
            String::new()
        }
    );
    diagnosis(&mut o, r);
    stragglers(&mut o, r);
    heat::heat(&mut o, r, &strag);
    let marks = lanes::Marks {
        strag: &strag,
        waits: &waits,
        culprit: &culprit,
        slow: &r.slow,
        stride: r.steps.iterations_per_row,
    };
    lanes::lanes(&mut o, tl, &marks);
    svg::panels(&mut o, r, &strag);
    tables(&mut o, r);
    let _ = write!(
        o,
        "</main><div id=\"tip\"></div><script>{}</script></body></html>",
        assets::JS
    );
    o
}

/// The answer first: the verdict and the suspects in order of blame.
fn diagnosis(o: &mut String, r: &Report) {
    let d = &r.diagnosis;
    let bad = !d.suspects.is_empty();
    let _ = write!(
        o,
        "<h2>Diagnosis</h2><div class=\"card diag{}\" id=\"diagnosis\"><p class=\"verdict\">{}</p>",
        if bad { " strag" } else { "" },
        esc_cut_long(&d.verdict)
    );
    if bad {
        let _ = write!(o, "<table><tr><th>#</th><th>rank</th><th>phase</th><th>kind</th><th>exposed time</th><th>per step</th><th>steps</th><th>evidence</th></tr>");
        for (i, s) in d.suspects.iter().take(MAX_ROWS).enumerate() {
            let _ = write!(
                o,
                "<tr class=\"bad suspect\" data-rank=\"{}\"><td>{}</td><td>rank {}</td><td>{}</td><td>{}{}</td><td>{:.1} ms</td><td>{:.1} ms</td><td>{}</td><td class=\"ev\">{}</td></tr>",
                s.rank,
                i + 1,
                s.rank,
                esc_cut(&s.phase),
                match s.kind {
                    crate::report::diagnose::Kind::Hang => "hang",
                    crate::report::diagnose::Kind::Straggler => "straggler",
                },
                if s.uncertain { " (uncertain)" } else { "" },
                s.exposed_ms,
                s.per_step_ms,
                s.steps,
                esc_cut_long(&s.evidence)
            );
        }
        let _ = write!(o, "</table>");
    }
    if !d.wait_phases.is_empty() {
        let _ = write!(
            o,
            "<p class=\"note\">Waits (synchronization points, drawn pale and hatched in the timeline): {}. A wait is where the ranks leave together; time there is another rank's delay, never blamed on the rank that waits.</p>",
            esc_cut_long(&d.wait_phases.join(", "))
        );
    }
    let _ = write!(o, "</div>");
}

fn stragglers(o: &mut String, r: &Report) {
    let _ = write!(o, "<h2>Whole-step stragglers</h2>");
    if r.stragglers.is_empty() {
        let _ = write!(
            o,
            "<div class=\"card\">No straggler (no rank more than {}% over the step median in ≥ {:.0}% of its steps).</div>",
            r.settings.straggler_pct,
            r.settings.straggler_share * 100.0
        );
        return;
    }
    let _ = write!(o, "<div class=\"card strag\"><table><tr><th>rank</th><th>slow steps</th><th>mean excess</th><th>slowest phase</th><th>phase excess / step</th></tr>");
    for s in &r.stragglers {
        let _ = write!(
            o,
            "<tr class=\"bad\"><td>rank {}</td><td>{}/{}</td><td>+{:.1}%</td><td>{}</td><td>+{}</td></tr>",
            s.rank,
            s.slow_steps,
            s.steps,
            s.mean_excess_pct,
            esc_cut(s.phase.as_deref().unwrap_or("-")),
            esc(&fmt_ns(s.phase_excess_ns))
        );
    }
    let _ = write!(o, "</table></div>");
}

fn tables(o: &mut String, r: &Report) {
    let _ = write!(o, "<h2>Spans by name</h2><div class=\"card\"><table><tr><th>name</th><th>count</th><th>p50</th><th>p95</th><th>p99</th><th>max</th><th>share</th></tr>");
    let mut names: Vec<_> = r.by_name.iter().collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.1.total_ns));
    for (n, s) in names.iter().take(MAX_ROWS) {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}%</td></tr>",
            esc_cut(n), s.count, fmt_ns(s.p50), fmt_ns(s.p95), fmt_ns(s.p99), fmt_ns(s.max), s.share * 100.0
        );
    }
    let _ = write!(o, "</table>{}</div>", capped(names.len()));
    let rows = &r.steps.rows;
    if !rows.is_empty() {
        let _ = write!(o, "<h2>Steps</h2><div class=\"card\"><table><tr><th>iteration</th><th>ranks</th><th>min (rank)</th><th>median (rank)</th><th>max (rank)</th></tr>");
        let shown: Vec<_> = if rows.len() > MAX_ROWS {
            rows.iter()
                .take(MAX_ROWS / 2)
                .chain(rows.iter().skip(rows.len() - MAX_ROWS / 2))
                .collect()
        } else {
            rows.iter().collect()
        };
        for s in shown {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{} ({})</td><td>{} ({})</td><td>{} ({})</td></tr>",
                s.iteration,
                s.ranks,
                fmt_ns(s.min_ns),
                s.min_rank,
                fmt_ns(s.median_ns),
                s.median_rank,
                fmt_ns(s.max_ns),
                s.max_rank
            );
        }
        let _ = write!(o, "</table>{}</div>", capped(rows.len()));
    }
    if r.missing_rank_count > 0 {
        let _ = write!(
            o,
            "<h2>Ranks that exported nothing ({})</h2><div class=\"card strag\">{}</div>",
            r.missing_rank_count,
            esc(&rank_ranges(&r.missing_rank_ranges, 1000))
        );
    }
    for (title, list) in [
        ("Truncated spans", &r.truncated),
        ("ERROR spans", &r.errors),
    ] {
        if list.count == 0 {
            continue;
        }
        let _ = write!(o, "<h2>{title} ({})</h2><div class=\"card\"><table><tr><th>rank</th><th>name</th><th>duration</th><th>detail</th></tr>", list.count);
        for f in list.items.iter().take(MAX_ROWS) {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                f.rank,
                esc_cut(&f.name),
                fmt_ns(f.dur_ns),
                esc_cut(&f.detail)
            );
        }
        let _ = write!(o, "</table>{}</div>", capped(list.count as usize));
    }
    if !r.metrics.is_empty() {
        let _ = write!(o, "<h2>Metrics per rank</h2><div class=\"card\"><table><tr><th>metric</th><th>rank</th><th>last</th><th>min</th><th>max</th><th>points</th></tr>");
        for m in r.metrics.iter().take(MAX_ROWS * 4) {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc_cut(&m.name),
                m.rank,
                fmt_num(m.series.last),
                fmt_num(m.series.min),
                fmt_num(m.series.max),
                m.series.count
            );
        }
        let _ = write!(
            o,
            "</table>{}</div>",
            if r.metrics.len() > MAX_ROWS * 4 {
                "<p class=\"note\">Table capped; see --json for all.</p>"
            } else {
                ""
            }
        );
    }
}

fn capped(n: usize) -> String {
    if n > MAX_ROWS {
        format!("<p class=\"note\">{MAX_ROWS} of {n} rows shown; see <code>lens report --json</code> for all.</p>")
    } else {
        String::new()
    }
}
