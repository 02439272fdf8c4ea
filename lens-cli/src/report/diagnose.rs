//! The diagnosis of a synchronized job: which rank and which phase cost the
//! job time, and which rank a hung job is stuck in.
//!
//! # Why step durations cannot answer it
//!
//! In a synchronized step (data parallel: every rank meets the others in a
//! collective) every rank's step lasts the same. A slow rank's extra time in
//! `data.next_batch` becomes every other rank's wait in `allreduce.grads`.
//! Comparing step durations finds nothing; comparing phase durations blames
//! the ranks that waited.
//!
//! # The frontier (after StageFrontier, arXiv 2606.06751)
//!
//! Each rank's step is an ordered vector of phase durations (the step span's
//! direct children, in the order they start). No clock is shared: each
//! rank's times are relative to its own step start, and the collective that
//! ended the previous step lined the starts up. At each phase boundary `k`
//! every rank has a cumulative time `C[r][k]`. The *lead* of a rank is
//! `C[r][k]` minus the lower median over ranks; the *frontier* is the
//! largest lead, held by the rank furthest behind schedule. The frontier's
//! increments add up to the step's exposed delay, and each one appears at
//! the phase and on the rank where the group-visible delay first shows.
//!
//! # How a wait is told from work (the rule)
//!
//! A phase is a **wait** (a synchronization point) when it absorbs leads:
//! in the steps where some rank entered it behind the others (a lead above
//! the noise threshold), every rank left it together (the frontier's lead
//! at its end is under half of what it was at its start), in at least 60 %
//! of those steps. A phase named like a collective (`allreduce`,
//! `all_gather`, `barrier`, `broadcast`, `reduce_scatter`, `all_to_all`,
//! `sync`, `wait`, `nccl`, `gloo`) is a wait when the data cannot tell
//! (balanced runs), unless in at least 5 such steps fewer than 30 % left
//! together. Delay is attributed only to work phases; a wait phase
//! never gets blame, so the ranks that waited are never suspects. A delay
//! after the last wait of a step (the optimizer) is seen where it happens,
//! in its own step; the next step's longer wait on the other ranks is
//! absorbed like any other wait.
//!
//! # Noise and suspects
//!
//! Per work phase, a rank's *own increment* is how much its lead grew in
//! that phase. The noise threshold is the median plus 4 × the scaled median
//! absolute deviation of all own increments of that phase, and at least 3 %
//! of the median step (scheduling jitter on a loaded machine). An *event*
//! is an increment above it. Jitter spreads its events over every rank; a
//! fault concentrates them: a (rank, phase) is a suspect when it has at
//! least 4 events, at least 3 × as many as the other ranks' average in that
//! phase plus 2 (or twice as many holding 4 × their average excess: heavy
//! tailed noise on a loaded machine), and its delay is at least 1 % of the
//! job's step time.
//! A delay too small for single steps to stand out but present in most of
//! them is found from each rank's median increment in the phase: a rank
//! whose median stands 6 scaled MADs (across ranks) above the ranks'
//! median, or that was above the step's median rank in 80 % of the steps
//! (a sign test: noise puts a rank there half the time), by at least 3 %
//! of the median step, is a suspect too, unless other ranks were as late
//! in most of its steps.
//! Suspects are ordered by their own delay (a smaller delay hidden behind a
//! larger one in the same window is still listed, after it), and each
//! carries the exposed time it holds on the frontier. When another rank
//! was nearly as late in the same phase in most of
//! a suspect's steps, the suspect is marked uncertain, as StageFrontier
//! labels a window where cause and coincidence cannot be told apart.
//!
//! # Hangs (after PyTorch's Flight Recorder)
//!
//! When the job ends with spans still open (marked `nemo.span.truncated` by
//! the signal flush or the shutdown), each rank's open phase is the open
//! direct child of its open step. Ranks split into groups by that phase; a
//! wait phase holding most ranks is where they wait, and a rank open in a
//! work phase, or in a different phase than the crowd, is a `hang` suspect.
//! A rank whose last step ended two or more iterations before the others'
//! stopped reporting, and is a suspect too.

use serde::Serialize;
use std::collections::BTreeMap;

/// One rank's step in one row: its duration and its phases' durations in
/// the row's phase order (ns; 0 when the phase did not occur).
#[derive(Debug, Clone)]
pub(crate) struct RankStep {
    pub(crate) rank: i64,
    pub(crate) step_ns: f64,
    pub(crate) phases: Vec<f64>,
}

/// One step (or one bucket of steps) across ranks.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) iteration: i64,
    /// Iterations this row stands for (1 unless long runs merged them).
    pub(crate) span: i64,
    pub(crate) ranks: Vec<RankStep>,
}

/// A span still open when the job ended.
#[derive(Debug, Clone)]
pub(crate) struct OpenSpan {
    pub(crate) name: String,
    pub(crate) span_id: u64,
    pub(crate) parent_id: u64,
    pub(crate) start_ns: u64,
    pub(crate) dur_ns: u64,
    /// Its `dl.iteration`, when it is a step.
    pub(crate) iteration: Option<i64>,
}

/// What the diagnosis reads besides the step rows.
#[derive(Debug, Default)]
pub(crate) struct HangInput {
    /// Spans still open at the end, per rank.
    pub(crate) open: BTreeMap<i64, Vec<OpenSpan>>,
    /// The last iteration each rank finished a step of.
    pub(crate) last_step: BTreeMap<i64, i64>,
}

/// What a suspect is suspected of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    /// Slower than the others in a work phase, so they waited.
    Straggler,
    /// Stuck: open in a work phase while the others wait, or stopped
    /// reporting steps before them.
    Hang,
}

/// One rank and phase that cost the job time.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Suspect {
    pub(crate) rank: i64,
    pub(crate) phase: String,
    pub(crate) kind: Kind,
    /// Exposed time it cost the job (the frontier's increments it holds).
    pub(crate) exposed_ms: f64,
    /// Exposed time per affected step.
    pub(crate) per_step_ms: f64,
    /// Its own delay over the median rank in that phase (also when hidden
    /// behind a larger delay).
    pub(crate) own_delay_ms: f64,
    /// Affected steps.
    pub(crate) steps: u64,
    /// Affected iterations (the first 64).
    pub(crate) iterations: Vec<i64>,
    /// Whether another rank was nearly as late in most of those steps.
    pub(crate) uncertain: bool,
    /// In words, what shows it.
    pub(crate) evidence: String,
}

/// The diagnosis: suspects in order of the time they cost.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Diagnosis {
    pub(crate) suspects: Vec<Suspect>,
    /// The one-line answer.
    pub(crate) verdict: String,
    /// Phases read as waits (synchronization points).
    pub(crate) wait_phases: Vec<String>,
    /// Steps (rows) the analysis read.
    pub(crate) steps: u64,
    /// Per work phase, the noise threshold of a rank's delay (ms): the
    /// median plus 4 scaled median absolute deviations of every rank's
    /// increment, at least 3 % of the median step.
    pub(crate) noise_ms: BTreeMap<String, f64>,
    /// Ranks the analysis read.
    pub(crate) ranks: u64,
}

/// Names that are collectives, for phases the data cannot classify.
const COLLECTIVE_WORDS: &[&str] = &[
    "allreduce",
    "all_reduce",
    "all-reduce",
    "allgather",
    "all_gather",
    "barrier",
    "broadcast",
    "reduce_scatter",
    "reducescatter",
    "all_to_all",
    "alltoall",
    "sync",
    "wait",
    "nccl",
    "gloo",
    "collective",
];

fn named_like_a_collective(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    COLLECTIVE_WORDS.iter().any(|w| n.contains(w))
}

/// The lower median of `v` (sorted in place); 0 for none.
fn lower_median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[(v.len() - 1) / 2]
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Per row and phase: each rank's lead at the phase's end.
struct Leads {
    /// [row][k][i] = lead of the row's i-th rank at the end of phase k.
    lead: Vec<Vec<Vec<f64>>>,
}

fn leads(rows: &[Row], phases: usize) -> Leads {
    let mut lead = Vec::with_capacity(rows.len());
    for row in rows {
        let mut cum: Vec<f64> = vec![0.0; row.ranks.len()];
        let mut per_phase = Vec::with_capacity(phases);
        for k in 0..phases {
            for (i, r) in row.ranks.iter().enumerate() {
                cum[i] += r.phases.get(k).copied().unwrap_or(0.0);
            }
            let m = lower_median(&mut cum.clone());
            per_phase.push(cum.iter().map(|c| c - m).collect());
        }
        lead.push(per_phase);
    }
    Leads { lead }
}

/// How much rank `i`'s lead grew in phase `k` of `row` (from its lead at
/// the phase's start, counted from 0 when it was ahead).
fn own_inc(l: &Leads, row: usize, k: usize, i: usize) -> f64 {
    let before = if k == 0 {
        0.0
    } else {
        l.lead[row][k - 1][i].max(0.0)
    };
    l.lead[row][k][i] - before
}

/// Per phase, the noise threshold of the own increments: their median
/// plus 4 scaled median absolute deviations, at least `floor`.
fn thresholds(rows: &[Row], l: &Leads, phases: usize, floor: f64) -> Vec<f64> {
    (0..phases)
        .map(|k| {
            let mut inc: Vec<f64> = Vec::new();
            for (row, r) in rows.iter().enumerate() {
                for i in 0..r.ranks.len() {
                    inc.push(own_inc(l, row, k, i));
                }
            }
            let m = median(&mut inc.clone());
            let mut dev: Vec<f64> = inc.iter().map(|x| (x - m).abs()).collect();
            let mad = median(&mut dev) * 1.4826;
            (m + 4.0 * mad).max(floor)
        })
        .collect()
}

fn max_of(v: &[f64]) -> (usize, f64) {
    v.iter()
        .copied()
        .enumerate()
        .fold((0, f64::MIN), |a, (i, x)| if x > a.1 { (i, x) } else { a })
}

/// Diagnoses `rows` (phases named `names`, in the order they run) and the
/// spans left open.
pub(crate) fn diagnose(mut rows: Vec<Row>, names: &[String], hangs: &HangInput) -> Diagnosis {
    let had_steps = !rows.is_empty();
    rows.retain(|r| r.ranks.len() >= 2);
    let k_n = names.len();
    let ranks: std::collections::BTreeSet<i64> = rows
        .iter()
        .flat_map(|r| r.ranks.iter().map(|s| s.rank))
        .collect();
    let mut step_ns: Vec<f64> = rows
        .iter()
        .map(|r| median(&mut r.ranks.iter().map(|s| s.step_ns).collect::<Vec<_>>()))
        .collect();
    let total_ns: f64 = rows
        .iter()
        .zip(&step_ns)
        .map(|(r, s)| s * r.span.max(1) as f64)
        .sum();
    let median_step = median(&mut step_ns);
    let floor = (0.03 * median_step).max(20_000.0);
    let l = leads(&rows, k_n);
    let thr = thresholds(&rows, &l, k_n, floor);

    // which phases are waits
    let mut absorbed = vec![(0u64, 0u64); k_n];
    for row in 0..rows.len() {
        for k in 1..k_n {
            let before = max_of(&l.lead[row][k - 1]).1;
            if before > thr[k - 1].max(floor) {
                let after = max_of(&l.lead[row][k]).1;
                absorbed[k].1 += 1;
                if after < 0.5 * before {
                    absorbed[k].0 += 1;
                }
            }
        }
    }
    let wait_in_order: Vec<bool> = (0..k_n)
        .map(|k| {
            let (yes, of) = (absorbed[k].0 as f64, absorbed[k].1 as f64);
            // a phase named like a collective is a wait unless the data
            // clearly say otherwise; any other phase is one when the data
            // say so (a loaded machine wakes ranks up from a collective at
            // slightly different times, so the evidence is a majority)
            match named_like_a_collective(&names[k]) {
                true => of < 5.0 || yes >= 0.3 * of,
                false => of >= 3.0 && yes >= 0.6 * of,
            }
        })
        .collect();

    // Attribution runs from one synchronization point to the next: the
    // ranks leave the first wait together, so their times are aligned
    // there, not at their own step starts (a rank slow after the wait, in
    // its optimizer, starts its next step late). Each window is the phases
    // after the wait of one step, then the phases up to the wait of the
    // next; the first step's are read from its start.
    drop(l);
    let cut = wait_in_order.iter().position(|w| *w);
    let (rows, names, wait, from_prev) = match cut {
        Some(w) if w + 1 < k_n => {
            let order: Vec<usize> = (w + 1..k_n).chain(0..=w).collect();
            let mut out = Vec::with_capacity(rows.len());
            for (i, cur) in rows.iter().enumerate() {
                // the step before, when it is the one just before (else the
                // window starts at this step's start)
                let prev = i
                    .checked_sub(1)
                    .map(|j| &rows[j])
                    .filter(|p| p.iteration.checked_add(p.span.max(1)) == Some(cur.iteration));
                let ranks: Vec<RankStep> = cur
                    .ranks
                    .iter()
                    .map(|c| {
                        let p = prev.and_then(|p| p.ranks.iter().find(|p| p.rank == c.rank));
                        let phases = order
                            .iter()
                            .enumerate()
                            .map(|(j, &k)| match (j < k_n - w - 1, p) {
                                (true, Some(p)) => p.phases.get(k).copied().unwrap_or(0.0),
                                (true, None) => 0.0,
                                (false, _) => c.phases.get(k).copied().unwrap_or(0.0),
                            })
                            .collect();
                        RankStep {
                            rank: c.rank,
                            step_ns: c.step_ns,
                            phases,
                        }
                    })
                    .collect();
                out.push(Row {
                    iteration: cur.iteration,
                    span: cur.span,
                    ranks,
                });
            }
            let names: Vec<String> = order.iter().map(|&k| names[k].clone()).collect();
            let wait: Vec<bool> = order.iter().map(|&k| wait_in_order[k]).collect();
            // one copy of the rows at a time (memory stays bounded)
            drop(rows);
            (out, names, wait, k_n - w - 1)
        }
        _ => (rows, names.to_vec(), wait_in_order.clone(), 0),
    };
    let mut rows = rows;
    rows.retain(|r| r.ranks.len() >= 2);
    let l = leads(&rows, k_n);
    let thr = thresholds(&rows, &l, k_n, floor);
    let own = |row: usize, k: usize, i: usize| own_inc(&l, row, k, i);
    // the iteration a phase of a window belongs to
    let iteration_of = |row: &Row, k: usize| {
        if k < from_prev {
            row.iteration.saturating_sub(row.span.max(1))
        } else {
            row.iteration
        }
    };

    // events: own increments above the threshold in work phases
    #[derive(Default)]
    struct Tally {
        exposed: f64,
        own: f64,
        /// Rows with an event.
        events: u64,
        /// Rows with an increment above the noise threshold (the rest are
        /// steps of a persistent delay).
        over: u64,
        steps: u64,
        shared: u64,
        iterations: Vec<i64>,
        waits: Vec<f64>,
        waited_in: BTreeMap<usize, u64>,
    }
    // persistent delays too small for single steps to stand out: a rank
    // whose median increment in a phase stands out from the other ranks'
    // medians (6 scaled MADs across ranks, at least 3 % of the median step)
    let mut by_rank: BTreeMap<(i64, usize), Vec<f64>> = BTreeMap::new();
    // steps in which a rank's increment was above the step's median one
    let mut above: BTreeMap<(i64, usize), u64> = BTreeMap::new();
    for (row, r) in rows.iter().enumerate() {
        for k in (0..k_n).filter(|&k| !wait[k]) {
            let incs: Vec<f64> = (0..r.ranks.len()).map(|i| own(row, k, i)).collect();
            let mid = median(&mut incs.clone());
            for (s, &inc) in r.ranks.iter().zip(&incs) {
                by_rank.entry((s.rank, k)).or_default().push(inc);
                if inc > mid {
                    *above.entry((s.rank, k)).or_default() += 1;
                }
            }
        }
    }
    let mut persistent: BTreeMap<(i64, usize), f64> = BTreeMap::new();
    for k in (0..k_n).filter(|&k| !wait[k]) {
        let medians: Vec<(i64, f64, f64)> = by_rank
            .iter_mut()
            .filter(|((_, kk), v)| *kk == k && v.len() >= 5)
            .map(|((r, _), v)| {
                let n = v.len() as f64;
                let up = above.get(&(*r, k)).copied().unwrap_or(0) as f64 / n;
                (*r, median(v), up)
            })
            .collect();
        if medians.len() < 3 {
            continue;
        }
        let mut ms: Vec<f64> = medians.iter().map(|m| m.1).collect();
        let mid = median(&mut ms);
        let mut dev: Vec<f64> = ms.iter().map(|m| (m - mid).abs()).collect();
        let spread = 1.4826 * median(&mut dev);
        let least = (0.03 * median_step).max(floor / 3.0);
        for (r, m, up) in medians {
            // its median stands out from the ranks' medians, or it was
            // above the step's median rank in 80 % of the steps (a sign
            // test: noise puts a rank there half the time)
            let stands_out = m - mid > (6.0 * spread).max(least);
            let nearly_always = up >= 0.8 && m - mid > least;
            if stands_out || nearly_always {
                persistent.insert((r, k), m - mid);
            }
        }
    }
    let mut tally: BTreeMap<(i64, usize), Tally> = BTreeMap::new();
    let mut events_per_phase = vec![0u64; k_n];
    let mut excess_per_phase = vec![0f64; k_n];
    for (row, r) in rows.iter().enumerate() {
        for k in (0..k_n).filter(|&k| !wait[k]) {
            let (leader, top) = max_of(&l.lead[row][k]);
            let prev_top = if k == 0 {
                0.0
            } else {
                max_of(&l.lead[row][k - 1]).1.max(0.0)
            };
            let frontier_inc = (top - prev_top).max(0.0);
            let incs: Vec<f64> = (0..r.ranks.len()).map(|i| own(row, k, i)).collect();
            for (i, &inc) in incs.iter().enumerate() {
                let steady = persistent
                    .get(&(r.ranks[i].rank, k))
                    .is_some_and(|&m| inc > 0.5 * m);
                if inc <= thr[k] && !steady {
                    continue;
                }
                events_per_phase[k] += 1;
                excess_per_phase[k] += inc * r.span.max(1) as f64;
                let t = tally.entry((r.ranks[i].rank, k)).or_default();
                let n = r.span.max(1) as f64;
                t.own += inc * n;
                if i == leader {
                    t.exposed += frontier_inc * n;
                }
                t.steps += r.span.max(1) as u64;
                t.events += 1;
                t.over += u64::from(inc > thr[k]);
                if t.iterations.len() < 64 {
                    t.iterations.push(iteration_of(r, k));
                }
                if incs
                    .iter()
                    .enumerate()
                    .any(|(j, &x)| j != i && (x - inc).abs() < 0.3 * inc)
                {
                    t.shared += 1;
                }
                // where the others waited for it: the next wait phase of
                // this step, else the first of the next
                let w = (k + 1..k_n)
                    .find(|&j| wait[j])
                    .or_else(|| (0..k_n).find(|&j| wait[j]));
                if let Some(w) = w {
                    let mut others: Vec<f64> = r
                        .ranks
                        .iter()
                        .enumerate()
                        .filter(|&(j, _)| j != i)
                        .map(|(_, s)| s.phases.get(w).copied().unwrap_or(0.0))
                        .collect();
                    t.waits.push(median(&mut others));
                    *t.waited_in.entry(w).or_default() += 1;
                }
            }
        }
    }
    let world = ranks.len().max(2) as f64;
    let mut suspects: Vec<Suspect> = Vec::new();
    for ((rank, k), t) in tally {
        let others = events_per_phase[k].saturating_sub(t.events) as f64 / (world - 1.0);
        let events = t.over as f64;
        let uncertain = t.shared * 2 > t.events;
        // one-step events: enough of them, concentrated on this rank, and
        // worth 1 % of the job; a persistent small delay: its median stands
        // out, and it is this rank's alone in most of its steps (a small
        // lead that other ranks share is noise, not a suspect)
        let others_excess = (excess_per_phase[k] - t.own).max(0.0) / (world - 1.0);
        let concentrated = events >= 3.0 * others + 2.0
            || (events >= 2.0 * others && t.own >= 4.0 * others_excess);
        let by_events = events >= 4.0 && concentrated && t.own >= 0.01 * total_ns;
        let steady = persistent.contains_key(&(rank, k)) && !uncertain;
        if !by_events && !steady {
            continue;
        }
        let phase = names[k].clone();
        let per_step = t.exposed / t.steps.max(1) as f64;
        let mut evidence = match t.waited_in.iter().max_by_key(|(_, n)| **n) {
            Some((&w, _)) => {
                let mut waits = t.waits.clone();
                format!(
                    "{} ranks waited in `{}` a median {:.1} ms while rank {rank} was in `{phase}` ({} of {} steps)",
                    ranks.len() - 1,
                    names[w],
                    median(&mut waits) / 1e6,
                    t.steps,
                    rows.iter().map(|r| r.span.max(1) as u64).sum::<u64>(),
                )
            }
            None => format!(
                "rank {rank}'s `{phase}` ran {:.1} ms past the median rank in {} steps",
                t.own / t.steps.max(1) as f64 / 1e6,
                t.steps
            ),
        };
        if t.exposed < 0.25 * t.own {
            evidence.push_str(&format!(
                "; its delay ({:.1} ms a step) was mostly hidden behind another rank's",
                t.own / t.steps.max(1) as f64 / 1e6
            ));
        }
        if uncertain {
            evidence.push_str(
                "; in most of these steps another rank was nearly as late in the same phase: \
                 cause and coincidence cannot be told apart",
            );
        }
        suspects.push(Suspect {
            rank,
            phase,
            kind: Kind::Straggler,
            exposed_ms: t.exposed / 1e6,
            per_step_ms: per_step / 1e6,
            own_delay_ms: t.own / 1e6,
            steps: t.steps,
            iterations: t.iterations,
            uncertain,
            evidence,
        });
    }
    // the larger delay first: with two slow ranks in one window the
    // frontier credits the phase where delay shows first, but fixing the
    // larger one saves more, and a smaller one can hide behind it (never
    // the other way round)
    suspects.sort_by(|a, b| b.own_delay_ms.total_cmp(&a.own_delay_ms));
    let mut hung = hang_suspects(hangs, &names, &wait);
    hung.append(&mut suspects);
    let suspects = hung;

    let verdict = match suspects.first() {
        None if rows.is_empty() && had_steps => {
            "no diagnosis: steps from one rank only, nothing to compare them with (for a \
             job of several ranks, record every rank: `lens record`, or \
             NEMO_LENS_EXPORT_STRATEGY=all_ranks)"
                .to_owned()
        }
        None if rows.is_empty() => {
            "no diagnosis: no steps (spans with `dl.iteration`) on two or more ranks".to_owned()
        }
        None => format!(
            "no suspect: the {} ranks were balanced within noise over {} steps",
            ranks.len(),
            rows.len()
        ),
        Some(s) if s.kind == Kind::Hang => {
            format!("rank {} hung in `{}`: {}", s.rank, s.phase, s.evidence)
        }
        Some(s) => format!(
            "rank {} in `{}` cost the job {:.1} ms ({:.1} ms in each of {} steps){}",
            s.rank,
            s.phase,
            s.exposed_ms,
            s.per_step_ms,
            s.steps,
            if s.uncertain { " (uncertain)" } else { "" }
        ),
    };
    Diagnosis {
        suspects,
        verdict,
        wait_phases: names
            .iter()
            .zip(&wait)
            .filter(|(_, w)| **w)
            .map(|(n, _)| n.clone())
            .collect(),
        steps: rows.iter().map(|r| r.span.max(1) as u64).sum(),
        ranks: ranks.len() as u64,
        noise_ms: names
            .iter()
            .zip(&wait)
            .zip(&thr)
            .filter(|((_, w), _)| !**w)
            .map(|((n, _), t)| (n.clone(), t / 1e6))
            .collect(),
    }
}

/// The hang suspects: ranks open in a work phase (or another phase than
/// the crowd) while the others wait, and ranks that stopped reporting.
fn hang_suspects(h: &HangInput, names: &[String], wait: &[bool]) -> Vec<Suspect> {
    let is_wait = |name: &str| match names.iter().position(|n| n == name) {
        Some(k) => wait[k],
        None => named_like_a_collective(name),
    };
    // each rank's open phase: the open direct child of its open step, else
    // its innermost open span
    let mut open: BTreeMap<i64, (String, Option<i64>, u64)> = BTreeMap::new();
    for (&rank, spans) in &h.open {
        let step = spans.iter().find(|s| s.iteration.is_some());
        let child = step.and_then(|st| spans.iter().find(|s| s.parent_id == st.span_id));
        let innermost = spans
            .iter()
            .filter(|s| s.iteration.is_none())
            .max_by_key(|s| s.start_ns);
        let Some(phase) = child.or(innermost).or(step) else {
            continue;
        };
        open.insert(
            rank,
            (
                phase.name.clone(),
                step.and_then(|s| s.iteration),
                phase.dur_ns,
            ),
        );
    }
    let mut out = Vec::new();
    if open.len() >= 2 {
        let mut groups: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
        for (rank, (phase, _, _)) in &open {
            groups.entry(phase.as_str()).or_default().push(*rank);
        }
        if groups.len() >= 2 {
            // the crowd: the wait phase holding most ranks, else the largest
            let crowd = groups
                .iter()
                .max_by_key(|(p, rs)| (is_wait(p), rs.len()))
                .map(|(p, _)| p.to_string())
                .unwrap_or_default();
            let crowd_ranks = groups[crowd.as_str()].len();
            let mut waited: Vec<f64> = groups[crowd.as_str()]
                .iter()
                .map(|r| open[r].2 as f64)
                .collect();
            let waited = median(&mut waited);
            for (phase, rs) in &groups {
                if *phase == crowd || (is_wait(phase) && is_wait(&crowd)) {
                    continue;
                }
                for r in rs {
                    let it = open[r].1;
                    out.push(Suspect {
                        rank: *r,
                        phase: phase.to_string(),
                        kind: Kind::Hang,
                        exposed_ms: waited / 1e6,
                        per_step_ms: waited / 1e6,
                        own_delay_ms: open[r].2 as f64 / 1e6,
                        steps: 1,
                        iterations: it.into_iter().collect(),
                        uncertain: rs.len() > 1 && !is_wait(&crowd),
                        evidence: format!(
                            "{crowd_ranks} ranks were waiting in `{crowd}` (a median {:.1} s) when the job ended, while rank {r} was still in `{phase}`{}",
                            waited / 1e9,
                            it.map_or(String::new(), |i| format!(" at iteration {i}"))
                        ),
                    });
                }
            }
        }
    }
    // ranks that stopped reporting steps two or more iterations early
    if let Some(&last) = h.last_step.values().max() {
        for (&rank, &mine) in &h.last_step {
            if last.saturating_sub(mine) >= 2 && !out.iter().any(|s| s.rank == rank) {
                let phase = open
                    .get(&rank)
                    .map_or("(stopped reporting)".to_owned(), |o| o.0.clone());
                out.push(Suspect {
                    rank,
                    phase,
                    kind: Kind::Hang,
                    exposed_ms: 0.0,
                    per_step_ms: 0.0,
                    own_delay_ms: 0.0,
                    steps: 1,
                    iterations: vec![mine.saturating_add(1)],
                    uncertain: false,
                    evidence: format!(
                        "rank {rank}'s last step was iteration {mine}; the others reached {last}"
                    ),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PHASES: [&str; 4] = [
        "data.next_batch",
        "forward_backward",
        "allreduce.grads",
        "optimizer.step",
    ];
    const MS: f64 = 1e6;

    fn names() -> Vec<String> {
        PHASES.iter().map(|s| s.to_string()).collect()
    }

    /// A synchronized job: every rank's phases take `base` plus the delays
    /// `extra(rank, step, phase)` and a little jitter; the allreduce ends
    /// for all ranks when the last arrives, and a delay after it (phase 3)
    /// delays that rank's next step start, which the others wait out in
    /// the next allreduce.
    fn job(
        world: i64,
        steps: i64,
        jitter: f64,
        extra: impl Fn(i64, i64, usize) -> f64,
    ) -> Vec<Row> {
        let base = [3.0 * MS, 5.0 * MS, 1.0 * MS, 2.0 * MS];
        let mut late = vec![0.0; world as usize]; // start offsets
        let mut rows = Vec::new();
        let mut seed = 7u64;
        let mut noise = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) as f64 / (1u64 << 31) as f64) * jitter
        };
        for it in 0..steps {
            let mut d: Vec<[f64; 4]> = Vec::new();
            for r in 0..world {
                let mut p = [0.0; 4];
                for k in 0..4 {
                    p[k] = base[k] + extra(r, it, k) + noise();
                }
                d.push(p);
            }
            // arrival at the allreduce, in absolute time
            let arrive: Vec<f64> = (0..world as usize)
                .map(|r| late[r] + d[r][0] + d[r][1])
                .collect();
            let last = arrive.iter().copied().fold(f64::MIN, f64::max);
            let mut ranks = Vec::new();
            for r in 0..world as usize {
                let mut p = d[r];
                p[2] += last - arrive[r];
                let start = late[r];
                let end = last + d[r][2] + p[3];
                late[r] = end;
                ranks.push(RankStep {
                    rank: r as i64,
                    step_ns: end - start,
                    phases: p.to_vec(),
                });
            }
            // the next step starts where each rank's optimizer ended;
            // re-base so the earliest starts at 0
            let m = late.iter().copied().fold(f64::MAX, f64::min);
            late.iter_mut().for_each(|x| *x -= m);
            rows.push(Row {
                iteration: it,
                span: 1,
                ranks,
            });
        }
        rows
    }

    fn first(d: &Diagnosis) -> (i64, &str) {
        let s = d
            .suspects
            .first()
            .unwrap_or_else(|| panic!("no suspect: {d:#?}"));
        (s.rank, s.phase.as_str())
    }

    #[test]
    fn a_slow_phase_before_the_sync_point_is_blamed_not_the_wait() {
        let rows = job(8, 40, 0.3 * MS, |r, _, k| {
            if r == 5 && k == 0 {
                8.0 * MS
            } else {
                0.0
            }
        });
        let d = diagnose(rows.clone(), &names(), &HangInput::default());
        assert_eq!(first(&d), (5, "data.next_batch"), "{d:#?}");
        assert_eq!(d.suspects.len(), 1, "{d:#?}");
        assert_eq!(d.wait_phases, ["allreduce.grads"]);
        let s = &d.suspects[0];
        assert!((s.per_step_ms - 8.0).abs() < 1.0, "{s:#?}");
        assert!(
            s.evidence.contains("7 ranks waited in `allreduce.grads`"),
            "{}",
            s.evidence
        );
    }

    #[test]
    fn a_slow_phase_after_the_sync_point_is_blamed_in_its_own_step() {
        let rows = job(8, 40, 0.3 * MS, |r, _, k| {
            if r == 6 && k == 3 {
                6.0 * MS
            } else {
                0.0
            }
        });
        let d = diagnose(rows.clone(), &names(), &HangInput::default());
        assert_eq!(first(&d), (6, "optimizer.step"), "{d:#?}");
        assert_eq!(d.suspects.len(), 1, "{d:#?}");
    }

    #[test]
    fn intermittent_windowed_small_and_rank_zero_delays_are_found() {
        type Extra = Box<dyn Fn(i64, i64, usize) -> f64>;
        let cases: Vec<(i64, usize, Extra)> = vec![
            (
                3,
                1,
                Box::new(|r, it, k| {
                    if r == 3 && k == 1 && it % 4 == 0 {
                        8.0 * MS
                    } else {
                        0.0
                    }
                }),
            ),
            (
                2,
                0,
                Box::new(|r, it, k| {
                    if r == 2 && k == 0 && (10..=20).contains(&it) {
                        8.0 * MS
                    } else {
                        0.0
                    }
                }),
            ),
            (
                4,
                1,
                Box::new(|r, _, k| if r == 4 && k == 1 { 2.0 * MS } else { 0.0 }),
            ),
            (
                0,
                0,
                Box::new(|r, _, k| if r == 0 && k == 0 { 5.0 * MS } else { 0.0 }),
            ),
        ];
        for (rank, phase, extra) in cases {
            let rows = job(8, 40, 0.3 * MS, extra);
            let d = diagnose(rows.clone(), &names(), &HangInput::default());
            assert_eq!(first(&d), (rank, PHASES[phase]), "{d:#?}");
        }
    }

    #[test]
    fn two_slow_ranks_the_larger_first_the_hidden_one_listed() {
        let rows = job(8, 40, 0.3 * MS, |r, _, k| match (r, k) {
            (2, 0) => 12.0 * MS,
            (6, 0) => 6.0 * MS,
            _ => 0.0,
        });
        let d = diagnose(rows.clone(), &names(), &HangInput::default());
        assert_eq!(first(&d), (2, "data.next_batch"), "{d:#?}");
        assert!(d.suspects.iter().any(|s| s.rank == 6), "{d:#?}");
    }

    #[test]
    fn balanced_runs_with_jitter_name_no_suspect() {
        for world in [2, 8, 32] {
            let rows = job(world, 60, 1.5 * MS, |_, _, _| 0.0);
            let d = diagnose(rows.clone(), &names(), &HangInput::default());
            assert!(d.suspects.is_empty(), "{world} ranks: {d:#?}");
            assert!(d.verdict.starts_with("no suspect"), "{}", d.verdict);
        }
    }

    #[test]
    fn two_ranks_equally_late_in_the_same_steps_are_uncertain() {
        let rows = job(8, 40, 0.3 * MS, |r, _, k| {
            if (r == 1 || r == 2) && k == 1 {
                6.0 * MS
            } else {
                0.0
            }
        });
        let d = diagnose(rows.clone(), &names(), &HangInput::default());
        assert!(!d.suspects.is_empty(), "{d:#?}");
        assert!(d.suspects.iter().all(|s| s.uncertain), "{d:#?}");
    }

    fn open(name: &str, id: u64, parent: u64, iteration: Option<i64>) -> OpenSpan {
        OpenSpan {
            name: name.into(),
            span_id: id,
            parent_id: parent,
            start_ns: id,
            dur_ns: 2_000_000_000,
            iteration,
        }
    }

    #[test]
    fn a_hang_names_the_rank_open_in_work_while_the_others_wait() {
        let mut h = HangInput::default();
        for r in 0..8 {
            let phase = if r == 4 {
                "forward_backward"
            } else {
                "allreduce.grads"
            };
            h.open.insert(
                r,
                vec![
                    open("train.step", 10, 0, Some(5)),
                    open(phase, 11, 10, None),
                ],
            );
            h.last_step.insert(r, 4);
        }
        let rows = job(8, 5, 0.3 * MS, |_, _, _| 0.0);
        let d = diagnose(rows.clone(), &names(), &h);
        assert_eq!(first(&d), (4, "forward_backward"), "{d:#?}");
        assert_eq!(d.suspects[0].kind, Kind::Hang);
        assert_eq!(d.suspects[0].iterations, [5]);
        assert!(
            d.verdict.starts_with("rank 4 hung in `forward_backward`"),
            "{}",
            d.verdict
        );
    }

    #[test]
    fn one_ranks_steps_get_no_diagnosis_and_say_why() {
        let d = diagnose(
            job(1, 10, 0.3 * MS, |_, _, _| 0.0),
            &names(),
            &HangInput::default(),
        );
        assert!(d.suspects.is_empty());
        assert!(
            d.verdict.contains("steps from one rank only"),
            "{}",
            d.verdict
        );
        let d = diagnose(Vec::new(), &names(), &HangInput::default());
        assert!(d.verdict.contains("no steps"), "{}", d.verdict);
    }

    #[test]
    fn a_rank_that_stopped_reporting_is_a_hang_suspect() {
        let mut h = HangInput::default();
        for r in 0..4 {
            h.last_step.insert(r, if r == 1 { 3 } else { 9 });
        }
        let d = diagnose(Vec::new(), &names(), &h);
        assert_eq!(first(&d).0, 1, "{d:#?}");
        assert_eq!(d.suspects[0].kind, Kind::Hang);
    }
}
