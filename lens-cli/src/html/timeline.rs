//! Bounded timeline capture for the HTML page: per rank, the first and the
//! last few steps (each with the spans inside it) plus a capped set of
//! other spans (job roots, checkpoints, truncated and failed spans).

use std::collections::{BTreeMap, VecDeque};

use crate::input::otlp::{span_id_u64, Span};

/// Non-step spans buffered per rank before the oldest are set aside.
const MAX_RECENT: usize = 10_000;
/// Spans kept per step.
const MAX_PER_STEP: usize = 400;
/// Non-step spans kept per rank.
const MAX_OTHER: usize = 200;

/// A span as drawn.
#[derive(Debug, Clone)]
pub(crate) struct TSpan {
    pub(crate) id: u64,
    pub(crate) parent: u64,
    pub(crate) name: String,
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// `key=value` lines for the tooltip.
    pub(crate) attrs: String,
    pub(crate) iteration: Option<i64>,
    pub(crate) truncated: bool,
    pub(crate) error: bool,
}

/// One step span with the spans inside it.
#[derive(Debug, Clone)]
pub(crate) struct StepGroup {
    pub(crate) spans: Vec<TSpan>,
}

/// What is kept of one rank.
#[derive(Debug, Default)]
pub(crate) struct RankTimeline {
    pub(crate) head: Vec<StepGroup>,
    pub(crate) tail: VecDeque<StepGroup>,
    pub(crate) other: Vec<TSpan>,
    recent: Vec<TSpan>,
    /// Steps seen in all.
    pub(crate) steps: u64,
}

/// The timelines of all ranks.
#[derive(Debug, Default)]
pub(crate) struct Timeline {
    pub(crate) ranks: BTreeMap<i64, RankTimeline>,
    /// Steps kept at the start and at the end of each rank.
    pub(crate) keep: usize,
}

fn keep_other(other: &mut Vec<TSpan>, s: TSpan) {
    if other.len() < MAX_OTHER || s.truncated || s.error {
        if other.len() >= 2 * MAX_OTHER {
            return;
        }
        other.push(s);
    }
}

impl Timeline {
    /// A timeline keeping `steps` steps per rank (half first, half last).
    pub(crate) fn new(steps: usize) -> Self {
        Timeline {
            ranks: BTreeMap::new(),
            keep: steps.max(2),
        }
    }

    /// Adds a batch of spans of `rank`.
    pub(crate) fn add(&mut self, rank: i64, spans: &[Span<'_>]) {
        let half = self.keep / 2;
        let head_n = self.keep - half;
        let r = self.ranks.entry(rank).or_default();
        for s in spans {
            let t = to_tspan(s);
            if t.iteration.is_some() {
                r.steps += 1;
                let (start, end) = (t.start, t.end);
                let mut inside = vec![t];
                let mut rest = Vec::new();
                for x in r.recent.drain(..) {
                    if x.start >= start && x.end <= end && inside.len() < MAX_PER_STEP {
                        inside.push(x);
                    } else {
                        rest.push(x);
                    }
                }
                for x in rest {
                    keep_other(&mut r.other, x);
                }
                let g = StepGroup { spans: inside };
                if r.head.len() < head_n {
                    r.head.push(g);
                } else if half > 0 {
                    if r.tail.len() == half {
                        r.tail.pop_front();
                    }
                    r.tail.push_back(g);
                }
            } else {
                r.recent.push(t);
                if r.recent.len() > MAX_RECENT {
                    let old: Vec<TSpan> = r.recent.drain(..MAX_RECENT / 2).collect();
                    for x in old {
                        keep_other(&mut r.other, x);
                    }
                }
            }
        }
    }

    /// Moves what is still buffered into the kept sets.
    pub(crate) fn finish(&mut self) {
        for r in self.ranks.values_mut() {
            let recent = std::mem::take(&mut r.recent);
            for x in recent {
                keep_other(&mut r.other, x);
            }
        }
    }
}

fn to_tspan(s: &Span<'_>) -> TSpan {
    let mut attrs = String::new();
    let (mut iteration, mut truncated) = (None, false);
    for kv in &s.attributes {
        match kv.key.as_ref() {
            "nv.dl.iteration" => iteration = kv.value.as_i64(),
            "nemo.span.truncated" => truncated = kv.value.is_true(),
            _ => {}
        }
        if attrs.len() < 2000 {
            attrs.push_str(&format!("{}={}\n", kv.key, kv.value.to_value()));
        }
    }
    if s.status.code == 2 {
        attrs.push_str(&format!("status=ERROR {}\n", s.status.message));
    }
    attrs.push_str(&format!("span_id={}", s.span_id));
    TSpan {
        id: span_id_u64(&s.span_id),
        parent: span_id_u64(&s.parent_span_id),
        name: s.name.to_string(),
        start: s.start_time_unix_nano,
        end: s.end_time_unix_nano.max(s.start_time_unix_nano),
        attrs,
        iteration,
        truncated,
        error: s.status.code == 2,
    }
}
