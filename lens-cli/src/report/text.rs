//! Plain-text rendering of a [`Report`] for the terminal.

use std::fmt::Write;

use super::Report;

/// Ranks up to which the text step table shows one column per rank.
const MATRIX_RANKS: usize = 8;

/// Formats nanoseconds with a unit that keeps 3 significant digits.
pub(crate) fn fmt_ns(ns: u64) -> String {
    let v = ns as f64;
    if v >= 1e9 {
        format!("{:.3} s", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.2} ms", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} µs", v / 1e3)
    } else {
        format!("{ns} ns")
    }
}

/// Formats a metric value compactly.
pub(crate) fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e6).contains(&a) {
        format!("{v:.3e}")
    } else {
        format!("{v:.4}")
    }
}

/// Renders the report; at most `max_rows` rows per long table.
pub(crate) fn render_text(r: &Report, max_rows: usize) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Run {}: {} spans from {} rank(s) in {} file(s); world size {}",
        if r.run_ids.is_empty() {
            "?".to_owned()
        } else {
            show(&r.run_ids.join(","), MAX_TEXT)
        },
        r.spans.count,
        r.rank_count,
        r.input.files,
        r.world_size.map_or("?".to_owned(), |w| w.to_string()),
    );
    if r.input.skipped_lines + r.input.broken_files > 0 {
        let _ = writeln!(
            o,
            "Skipped {} bad line(s); {} file(s) ended early or could not be opened (see stderr)",
            r.input.skipped_lines, r.input.broken_files
        );
    }
    if r.input.not_otlp_files > 0 {
        let _ = writeln!(
            o,
            "Skipped {} file(s) that are not OTLP/JSON lines (see stderr)",
            r.input.not_otlp_files
        );
    }
    if r.input.unreadable_paths > 0 {
        let _ = writeln!(
            o,
            "Skipped {} folder(s) or entries that could not be read (see stderr)",
            r.input.unreadable_paths
        );
    }
    if let Some(f) = &r.filter {
        let mut what = Vec::new();
        if !f.names.is_empty() {
            what.push(format!(
                "--name {}",
                show(&f.names.join(" --name "), MAX_TEXT)
            ));
        }
        if !f.ranks.is_empty() {
            let ranks: Vec<String> = f
                .ranks
                .iter()
                .map(|&[a, b]| {
                    if a == b {
                        a.to_string()
                    } else {
                        format!("{a}-{b}")
                    }
                })
                .collect();
            what.push(format!("--rank {}", ranks.join(",")));
        }
        let _ = writeln!(
            o,
            "Filter {}: {} of {} spans in the tables; the diagnosis and the steps read all",
            what.join(" "),
            f.spans,
            r.spans.count
        );
    }
    diagnosis(&mut o, r, max_rows);
    ranks(&mut o, r, max_rows);
    let _ = writeln!(
        o,
        "\nSpans by name (share = summed time / summed rank wall time)"
    );
    let _ = writeln!(
        o,
        "  {:<32} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6}",
        "name", "count", "total", "mean", "min", "p50", "p95", "p99", "max", "share"
    );
    let mut names: Vec<_> = r.by_name.iter().collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.1.total_ns));
    for (name, n) in names.iter().take(max_rows) {
        let _ = writeln!(
            o,
            "  {:<32} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>5.1}%",
            show(name, 32),
            n.count,
            fmt_ns(n.total_ns),
            fmt_ns(n.mean),
            fmt_ns(n.min),
            fmt_ns(n.p50),
            fmt_ns(n.p95),
            fmt_ns(n.p99),
            fmt_ns(n.max),
            n.share * 100.0
        );
    }
    more(&mut o, names.len(), max_rows);
    steps(&mut o, r, max_rows);
    problems(&mut o, r, max_rows);
    training(&mut o, r, max_rows);
    metrics(&mut o, r, max_rows);
    o
}

/// The answer first: which rank and phase cost the job time, or hung it.
fn diagnosis(o: &mut String, r: &Report, max_rows: usize) {
    let d = &r.diagnosis;
    let _ = writeln!(o, "\nDiagnosis: {}", show(&d.verdict, 4 * MAX_TEXT));
    for (i, s) in d.suspects.iter().take(max_rows).enumerate() {
        let cost = match s.kind {
            super::diagnose::Kind::Hang => "hang".to_owned(),
            _ => format!(
                "{:.1} ms exposed ({:.1} ms in each of {} steps)",
                s.exposed_ms, s.per_step_ms, s.steps
            ),
        };
        let _ = writeln!(
            o,
            "  {}. rank {} in {}: {}{}",
            i + 1,
            s.rank,
            show(&s.phase, MAX_TEXT),
            cost,
            if s.uncertain { " (uncertain)" } else { "" }
        );
        let _ = writeln!(o, "     {}", show(&s.evidence, 4 * MAX_TEXT));
    }
    more(o, d.suspects.len(), max_rows);
    if !d.wait_phases.is_empty() {
        let _ = writeln!(
            o,
            "  waits (synchronization points): {}",
            show(&d.wait_phases.join(", "), 2 * MAX_TEXT)
        );
    }
}

fn ranks(o: &mut String, r: &Report, max_rows: usize) {
    let _ = writeln!(o, "\nRanks");
    let _ = writeln!(
        o,
        "  {:>6} {:<20} {:>10} {:>8} {:>12} {:>8}",
        "rank", "host", "spans", "steps", "wall", "logs"
    );
    for x in r.ranks.iter().take(max_rows) {
        let _ = writeln!(
            o,
            "  {:>6} {:<20} {:>10} {:>8} {:>12} {:>8}",
            x.rank,
            show(&x.host, 20),
            x.spans,
            x.steps,
            fmt_ns(x.wall_ns),
            x.log_records
        );
    }
    more(o, r.ranks.len(), max_rows);
}

fn more(o: &mut String, n: usize, shown: usize) {
    if n > shown {
        let _ = writeln!(o, "  … {} more (use --max-rows or --json)", n - shown);
    }
}

/// Longest input text shown in full (run ids, details, metric labels).
const MAX_TEXT: usize = 200;

/// `s` from the input, control characters escaped, at most `n` characters.
fn show(s: &str, n: usize) -> String {
    truncate(&crate::term::printable(s), n)
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

fn steps(o: &mut String, r: &Report, max_rows: usize) {
    let st = &r.steps;
    if st.rows.is_empty() {
        let _ = writeln!(
            o,
            "\nNo step spans (spans with dl.iteration or nv.dl.iteration)."
        );
        return;
    }
    let _ = writeln!(
        o,
        "\nSteps ({}): {}, phases: {}",
        show(&r.spans.step_span_names.join(", "), MAX_TEXT),
        if st.iterations_per_row > 1 {
            format!(
                "{} rows, each the mean of {} iterations (long run)",
                st.count, st.iterations_per_row
            )
        } else {
            format!("{} iterations", st.count)
        },
        if st.phases.is_empty() {
            "-".to_owned()
        } else {
            show(&st.phases.join(", "), MAX_TEXT)
        }
    );
    // the full rank x step matrix when it fits a terminal
    let matrix = st.ranks.len() <= MATRIX_RANKS && st.rows.iter().all(|r| r.by_rank.is_some());
    let _ = write!(
        o,
        "  {:>9} {:>6} {:>18} {:>18} {:>18}",
        "iteration", "ranks", "min (rank)", "median (rank)", "max (rank)"
    );
    if matrix {
        for rank in &st.ranks {
            let _ = write!(o, " {:>10}", format!("rank {rank}"));
        }
    }
    let _ = writeln!(o);
    let rows = &st.rows;
    let head = max_rows.div_ceil(2);
    let tail = max_rows / 2;
    for (i, s) in rows.iter().enumerate() {
        if rows.len() > max_rows && i >= head && i < rows.len() - tail {
            if i == head {
                let _ = writeln!(o, "  … {} iterations not shown …", rows.len() - max_rows);
            }
            continue;
        }
        let _ = writeln!(
            o,
            "  {:>9} {:>6} {:>18} {:>18} {:>18}",
            s.iteration,
            s.ranks,
            format!("{} ({})", fmt_ns(s.min_ns), s.min_rank),
            format!("{} ({})", fmt_ns(s.median_ns), s.median_rank),
            format!("{} ({})", fmt_ns(s.max_ns), s.max_rank),
        );
        if let (true, Some(by_rank)) = (matrix, &s.by_rank) {
            // drop the newline, add the per-rank cells
            o.pop();
            for d in by_rank {
                let cell = d.map_or("-".to_owned(), fmt_ns);
                let _ = write!(o, " {cell:>10}");
            }
            let _ = writeln!(o);
        }
    }
    let _ = writeln!(
        o,
        "\nWhole-step stragglers (> {}% over the step median in ≥ {:.0}% of steps; unsynchronized ranks)",
        r.settings.straggler_pct,
        r.settings.straggler_share * 100.0
    );
    if r.stragglers.is_empty() {
        let _ = writeln!(o, "  none");
    }
    for s in &r.stragglers {
        let _ = writeln!(
            o,
            "  rank {:<5} slow in {}/{} steps, +{:.1}% on average; slowest phase: {}",
            s.rank,
            s.slow_steps,
            s.steps,
            s.mean_excess_pct,
            s.phase.as_ref().map_or("-".to_owned(), |p| format!(
                "{} (+{})",
                show(p, MAX_TEXT),
                fmt_ns(s.phase_excess_ns)
            )),
        );
    }
}

fn problems(o: &mut String, r: &Report, max_rows: usize) {
    if r.missing_rank_count > 0 {
        let _ = writeln!(
            o,
            "\nRanks that exported nothing ({} of world size {}): {}",
            r.missing_rank_count,
            r.world_size.unwrap_or(0),
            rank_ranges(&r.missing_rank_ranges, 64)
        );
    }
    for (title, list) in [
        ("Truncated spans", &r.truncated),
        ("ERROR spans", &r.errors),
    ] {
        if list.count == 0 {
            continue;
        }
        let _ = writeln!(o, "\n{title}: {}", list.count);
        for f in list.items.iter().take(max_rows) {
            let _ = writeln!(
                o,
                "  rank {:<5} {:<28} {:>10}  {}",
                f.rank,
                show(&f.name, 28),
                fmt_ns(f.dur_ns),
                show(&f.detail, MAX_TEXT)
            );
        }
        more(o, list.count as usize, max_rows.min(list.items.len()));
    }
}

/// `2, 4–99999999`: the first `max` ranges, then `…`.
pub(crate) fn rank_ranges(ranges: &[[i64; 2]], max: usize) -> String {
    let mut shown: Vec<String> = ranges
        .iter()
        .take(max)
        .map(|&[a, b]| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}–{b}")
            }
        })
        .collect();
    if ranges.len() > max {
        shown.push("…".to_owned());
    }
    shown.join(", ")
}

/// Characters of a text sparkline at most.
const SPARK: usize = 24;

/// One series line: `first → last  min  max  N points  ▁▃▅█`.
fn series_line(
    o: &mut String,
    rank: i64,
    (first, last, min, max, count): (f64, f64, f64, f64, u64),
    values: &[f64],
) {
    let line = format!(
        "    rank {:<5} {:>11} → {:<11} min {:<11} max {:<11} {:>7} {}  {}",
        rank,
        fmt_num(first),
        fmt_num(last),
        fmt_num(min),
        fmt_num(max),
        count,
        if count == 1 { "point " } else { "points" },
        super::series::sparkline(values, min, max, SPARK)
    );
    let _ = writeln!(o, "{}", line.trim_end());
}

/// Numeric attributes of the step spans, per rank, by iteration.
fn training(o: &mut String, r: &Report, max_rows: usize) {
    if r.step_series_map.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\nStep attributes (per rank, by iteration: first → last, min, max, points)"
    );
    for (name, by_rank) in &r.step_series_map {
        let _ = writeln!(o, "  {}", show(name, MAX_TEXT));
        for (i, (rank, s)) in by_rank.iter().enumerate() {
            if i == max_rows {
                more(o, by_rank.len(), max_rows);
                break;
            }
            let values: Vec<f64> = s.points.iter().map(|p| p.1).collect();
            series_line(o, *rank, (s.first, s.last, s.min, s.max, s.count), &values);
        }
    }
    if r.step_attributes_untracked > 0 {
        let _ = writeln!(
            o,
            "  {} values of attributes past the first 32 not tracked",
            r.step_attributes_untracked
        );
    }
}

/// Metric series with fewer points than this get the export-interval hint.
const FEW_POINTS: u64 = 3;

fn metrics(o: &mut String, r: &Report, max_rows: usize) {
    if r.metrics.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\nMetrics (per rank, by time: first → last, min, max, points)"
    );
    let mut few = false;
    for (name, by_rank) in &r.series {
        let _ = writeln!(o, "  {}", show(name, MAX_TEXT));
        for (i, (rank, s)) in by_rank.iter().enumerate() {
            if i == max_rows {
                more(o, by_rank.len(), max_rows);
                break;
            }
            few |= s.count < FEW_POINTS;
            let values: Vec<f64> = s.points.iter().map(|p| p.1).collect();
            series_line(o, *rank, (s.first, s.last, s.min, s.max, s.count), &values);
        }
    }
    if few {
        let _ = writeln!(
            o,
            "  Few points: metrics are exported every OTEL_METRIC_EXPORT_INTERVAL (10 s by default), so a short job's are only a few; a step span's attributes (the loss set on the step span) give one point per step."
        );
    }
}
