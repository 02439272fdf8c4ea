//! Bounded timeline capture for the HTML page: per rank, the first and the
//! last few steps (each with the spans inside it), where the steps begin
//! and end, plus a capped set of the other spans (job roots, model init,
//! data loading, evaluation, checkpoints, truncated and failed spans): the
//! first ones and the last ones, so that both edges of the job are drawn.

use std::collections::{BTreeMap, VecDeque};

use super::cut;
use crate::input::otlp::{span_id_u64, Span, StepIteration};
use crate::input::Origin;

/// Non-step spans buffered per rank before the oldest are set aside.
const MAX_RECENT: usize = 10_000;
/// Spans kept per step.
const MAX_PER_STEP: usize = 400;
/// Non-step spans kept per rank (fewer when there are many ranks).
const MAX_OTHER: usize = 200;
/// Step groups kept over all ranks: with many ranks each keeps fewer steps
/// (at least 2), so memory and page size stay bounded.
const MAX_GROUPS: usize = 4096;
/// Non-step spans kept over all ranks.
const MAX_OTHER_ALL: usize = 51_200;

/// A span as drawn.
#[derive(Debug, Clone)]
pub(crate) struct TSpan {
    /// Span id (0 when invalid).
    pub(crate) id: u64,
    /// Parent span id (0 for roots).
    pub(crate) parent: u64,
    /// Span name.
    pub(crate) name: String,
    /// Start (Unix ns).
    pub(crate) start: u64,
    /// End (Unix ns), never before `start`.
    pub(crate) end: u64,
    /// `key=value` lines for the tooltip.
    pub(crate) attrs: String,
    /// `dl.iteration` (or the former `nv.dl.iteration`) of a step span.
    pub(crate) iteration: Option<i64>,
    /// Marked `nemo.span.truncated`.
    pub(crate) truncated: bool,
    /// ERROR status.
    pub(crate) error: bool,
}

/// One step span with the spans inside it.
#[derive(Debug, Clone)]
pub(crate) struct StepGroup {
    /// The step span first, then the spans inside it.
    pub(crate) spans: Vec<TSpan>,
}

/// What is kept of one rank.
#[derive(Debug, Default)]
pub(crate) struct RankTimeline {
    /// The first steps.
    pub(crate) head: Vec<StepGroup>,
    /// The last steps.
    pub(crate) tail: VecDeque<StepGroup>,
    /// Other spans (roots, init, evaluation, checkpoints, truncated,
    /// failed), capped: the first ones, then (after [`Timeline::finish`])
    /// the last ones.
    pub(crate) other: Vec<TSpan>,
    /// The latest other spans once `other` is full (half its cap).
    late: VecDeque<TSpan>,
    /// Other spans not kept.
    pub(crate) other_dropped: u64,
    /// Non-step spans since the last step span.
    recent: Vec<TSpan>,
    /// Cap of `other`.
    other_cap: usize,
    /// Steps seen in all.
    pub(crate) steps: u64,
    /// The earliest step: (iteration, start ns).
    pub(crate) first_step: Option<(i64, u64)>,
    /// The latest-ending step: (iteration, end ns).
    pub(crate) last_step: Option<(i64, u64)>,
}

impl RankTimeline {
    /// Keeps a non-step span: among the first `other_cap`, else among the
    /// last `other_cap / 2` (truncated and failed ones: up to twice the cap
    /// among the first).
    fn keep_other(&mut self, s: TSpan) {
        let cap = self.other_cap;
        if self.other.len() < cap || ((s.truncated || s.error) && self.other.len() < 2 * cap) {
            self.other.push(s);
            return;
        }
        if self.late.len() >= (cap / 2).max(1) {
            self.late.pop_front();
            self.other_dropped += 1;
        }
        self.late.push_back(s);
    }
}

/// The timelines of all ranks.
#[derive(Debug, Default)]
pub(crate) struct Timeline {
    /// Per rank.
    pub(crate) ranks: BTreeMap<i64, RankTimeline>,
    /// Steps kept at the start and at the end of each rank.
    pub(crate) keep: usize,
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
    pub(crate) fn add(&mut self, origin: &Origin, spans: &[Span<'_>]) {
        let ranks = origin
            .world_size
            .and_then(|w| usize::try_from(w).ok())
            .unwrap_or(0)
            .max(self.ranks.len() + 1);
        self.keep = self.keep.min((MAX_GROUPS / ranks).max(2));
        let half = self.keep / 2;
        let head_n = self.keep - half;
        let r = self
            .ranks
            .entry(origin.rank)
            .or_insert_with(|| RankTimeline {
                other_cap: (MAX_OTHER_ALL / ranks).clamp(4, MAX_OTHER),
                ..RankTimeline::default()
            });
        // ranks seen before `keep` shrank keep their extra steps
        r.head.truncate(head_n);
        while r.tail.len() > half {
            r.tail.pop_front();
        }
        for s in spans {
            let t = to_tspan(s);
            if let Some(it) = t.iteration {
                r.steps += 1;
                let (start, end) = (t.start, t.end);
                if r.first_step.is_none_or(|(_, s)| start < s) {
                    r.first_step = Some((it, start));
                }
                if r.last_step.is_none_or(|(_, e)| end > e) {
                    r.last_step = Some((it, end));
                }
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
                    r.keep_other(x);
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
                        r.keep_other(x);
                    }
                }
            }
        }
    }

    /// Moves what is still buffered into the kept sets.
    pub(crate) fn finish(&mut self) {
        let half = self.keep / 2;
        for r in self.ranks.values_mut() {
            r.head.truncate(self.keep - half);
            while r.tail.len() > half {
                r.tail.pop_front();
            }
            let recent = std::mem::take(&mut r.recent);
            for x in recent {
                r.keep_other(x);
            }
            let late = std::mem::take(&mut r.late);
            r.other.extend(late);
        }
    }
}

fn to_tspan(s: &Span<'_>) -> TSpan {
    let mut attrs = String::new();
    let (mut iteration, mut truncated) = (StepIteration::default(), false);
    for kv in &s.attributes {
        match kv.key.as_ref() {
            k if iteration.offer(k, &kv.value) => {}
            "nemo.span.truncated" => truncated = kv.value.is_true(),
            _ => {}
        }
        // keys and values are cut (a value may be megabytes), and so is
        // the tooltip: the page stays small whatever the input
        if attrs.len() < 2000 {
            let value = kv.value.to_value().to_string();
            attrs.push_str(&format!("{}={}\n", cut(&kv.key), cut(&value)));
        }
    }
    if s.status.code == 2 {
        attrs.push_str(&format!("status=ERROR {}\n", cut(&s.status.message)));
    }
    attrs.push_str(&format!("span_id={}", cut(&s.span_id)));
    TSpan {
        id: span_id_u64(&s.span_id),
        parent: span_id_u64(&s.parent_span_id),
        name: cut(&s.name).into_owned(),
        start: s.start_time_unix_nano,
        end: s.end_time_unix_nano.max(s.start_time_unix_nano),
        attrs,
        iteration: iteration.get(),
        truncated,
        error: s.status.code == 2,
    }
}
