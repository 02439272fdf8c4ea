//! Bringing the profiles held in memory to the exporting rank: one
//! collective call on every rank (`TelemetryHandle::gather_profiles`).
//!
//! Each rank hands the lines it holds ([`Profile::take_held`]; none on a
//! rank that exports, or writes its profile to a file) to
//! [`Collective::gather_bytes`] rooted at the lowest exporting rank. The
//! root cuts what it receives into *carrier spans*: a span named
//! [`CARRIER_NAME`] whose [`CARRIER_KEY`] attribute is the array of the
//! profile lines it carries (at most [`CARRIER_BYTES`] of them each), handed
//! straight to its span processor (no sampler: a sampled-out carrier would
//! lose a rank's steps) and exported with its own spans, to a collector or
//! a file. `lens report` reads the lines out of the carrier and does not
//! count the carrier as a span. No rank opens a connection or starts a
//! thread here: the collective is the application's.

use super::Profile;
use crate::api::propagation::{Collective, CollectiveError};
use crate::api::scope::SCOPE_NAME;
use crate::config::strategy::{should_export, StrategyFn};
use crate::config::LensConfig;
use crate::sdk::pipeline::Pipeline;
use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceState};
use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SpanData, SpanEvents, SpanLinks};
use std::time::SystemTime;

/// The name of a span that carries profile lines.
pub(crate) const CARRIER_NAME: &str = "lens.profile";
/// The attribute of a carrier span that holds its lines (a string array,
/// one `{"lensProfile":…}` line each, without its newline).
pub(crate) const CARRIER_KEY: &str = "lens.profile.lines";
/// The most bytes of lines in one carrier span: a batch of 512 such spans
/// stays near the 4 MiB a collector takes in one gRPC message.
pub(crate) const CARRIER_BYTES: usize = 7 * 1024;
/// Carrier spans handed to the span processor between two flushes (its
/// queue holds 2,048 spans by default).
const CARRIERS_PER_FLUSH: usize = 256;

/// The rank a gather of the profiles goes to: the lowest rank that exports
/// under `cfg` (and `custom`, the builder's own strategy), the same on
/// every rank given the same configuration; `None` when telemetry or traces
/// are off or no rank exports. `first_rank_per_node` decides from each
/// process's own local rank, which no other rank can see: rank 0 is the
/// first rank of the first node, so it is 0. A custom strategy must decide
/// from the configuration, the rank and the world size alone.
pub(crate) fn root(cfg: &LensConfig, custom: Option<&StrategyFn>, world_size: u32) -> Option<u32> {
    if !cfg.enabled || !cfg.traces_enabled {
        return None;
    }
    let world = world_size.max(1);
    if custom.is_none()
        && cfg
            .export_strategy
            .trim()
            .eq_ignore_ascii_case("first_rank_per_node")
    {
        return Some(0);
    }
    (0..world).find(|&r| match custom {
        Some(f) => f(cfg, r, world),
        None => should_export(cfg, r, world).unwrap_or(false),
    })
}

/// What one gather moved on this rank: the lines it sent (every rank,
/// the root included) and, on the root, the lines it received and
/// exported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Moved {
    pub(crate) sent: u64,
    pub(crate) exported: u64,
}

/// One gather: every rank of `comm` calls it with the same `root` (the
/// lowest exporting rank; `None`: no rank exports, nothing to do). The
/// root exports what it receives through `pipeline`.
pub(crate) fn gather(
    comm: &dyn Collective,
    root: Option<u32>,
    profile: Option<&Profile>,
    pipeline: Option<&Pipeline>,
) -> Result<Moved, CollectiveError> {
    let (sent, parts) = collect(comm, root, profile)?;
    let Some(parts) = parts else {
        return Ok(Moved { sent, exported: 0 });
    };
    let lines: u64 = parts.iter().map(|p| lines_in(p)).sum();
    let Some(pipeline) = pipeline.filter(|p| p.tracer_provider.is_some()) else {
        if lines > 0 {
            crate::diag::warn(format_args!(
                "warning: rank {} received {lines} profile lines to export but exports no \
                 spans (the export strategy must be a function of the rank and the world \
                 size alone); they are dropped",
                comm.rank()
            ));
        }
        return Ok(Moved { sent, exported: 0 });
    };
    let mut carried = 0u64;
    for (i, (span, n)) in carriers(&parts, SystemTime::now()).into_iter().enumerate() {
        if i > 0 && i % CARRIERS_PER_FLUSH == 0 {
            // make room in the span queue before the next ones
            let _ = pipeline.flush(crate::config::otel::DEFAULT_FLUSH_TIMEOUT);
        }
        if pipeline.export_span(span) {
            carried += n;
        }
    }
    Ok(Moved {
        sent,
        exported: carried,
    })
}

/// Every rank's bytes, by rank, on the root of a gather.
pub(crate) type Parts = Vec<Vec<u8>>;

/// The collective half of [`gather`]: the lines this rank sent and, on
/// the root, every rank's lines.
pub(crate) fn collect(
    comm: &dyn Collective,
    root: Option<u32>,
    profile: Option<&Profile>,
) -> Result<(u64, Option<Parts>), CollectiveError> {
    let Some(root) = root else {
        return Ok((0, None));
    };
    let root = root as usize;
    if root >= comm.size() {
        return Err(CollectiveError(format!(
            "the exporting rank {root} is not below the communicator's size {} (the \
             communicator must span the job's ranks, numbered as lens numbers them)",
            comm.size()
        )));
    }
    let data = profile.map(Profile::take_held).unwrap_or_default();
    let sent = lines_in(&data);
    Ok((sent, comm.gather_bytes(root, data)?))
}

fn lines_in(b: &[u8]) -> u64 {
    b.split(|c| *c == b'\n').filter(|l| !l.is_empty()).count() as u64
}

/// The carrier spans of `parts` (each the lines of one rank), with the
/// count of lines each carries: no line is split, a line longer than
/// [`CARRIER_BYTES`] is a carrier of its own, and what is not UTF-8 is
/// skipped.
pub(crate) fn carriers(parts: &[Vec<u8>], now: SystemTime) -> Vec<(SpanData, u64)> {
    let ids = RandomIdGenerator::default();
    let mut out = Vec::new();
    let mut lines: Vec<StringValue> = Vec::new();
    let mut bytes = 0usize;
    let mut flush = |lines: &mut Vec<StringValue>, bytes: &mut usize| {
        if lines.is_empty() {
            return;
        }
        let n = lines.len() as u64;
        let values = std::mem::take(lines);
        *bytes = 0;
        out.push((carrier(&ids, values, now), n));
    };
    for part in parts {
        for line in part.split(|c| *c == b'\n').filter(|l| !l.is_empty()) {
            let Ok(text) = std::str::from_utf8(line) else {
                continue;
            };
            if bytes + text.len() > CARRIER_BYTES {
                flush(&mut lines, &mut bytes);
            }
            bytes += text.len();
            lines.push(StringValue::from(text.to_owned()));
        }
    }
    flush(&mut lines, &mut bytes);
    out
}

fn carrier(ids: &RandomIdGenerator, lines: Vec<StringValue>, now: SystemTime) -> SpanData {
    SpanData {
        span_context: SpanContext::new(
            ids.new_trace_id(),
            ids.new_span_id(),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: SpanId::INVALID,
        parent_span_is_remote: false,
        span_kind: SpanKind::Internal,
        name: CARRIER_NAME.into(),
        start_time: now,
        end_time: now,
        attributes: vec![KeyValue::new(
            CARRIER_KEY,
            Value::Array(Array::String(lines)),
        )],
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status: Status::Unset,
        instrumentation_scope: InstrumentationScope::builder(SCOPE_NAME).build(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_gather_root_is_the_lowest_exporting_rank() {
        let mut cfg = LensConfig::default();
        assert_eq!(root(&cfg, None, 8), None, "telemetry off");
        cfg.enabled = true;
        // single_rank: the last rank by default, else export_rank
        assert_eq!(root(&cfg, None, 8), Some(7));
        cfg.export_rank = 2;
        assert_eq!(root(&cfg, None, 8), Some(2));
        cfg.export_rank = 9;
        assert_eq!(root(&cfg, None, 8), None, "no rank exports");
        cfg.export_strategy = "all_ranks".into();
        assert_eq!(root(&cfg, None, 8), Some(0));
        cfg.export_strategy = " First_Rank_Per_Node ".into();
        assert_eq!(root(&cfg, None, 8), Some(0));
        cfg.export_strategy = "sampled".into();
        cfg.export_sample_rate = 0.25;
        let first = (0..64).find(|r| crate::config::strategy::rank_is_sampled(*r, 0.25));
        assert_eq!(root(&cfg, None, 64), first);
        let odd: StrategyFn = Arc::new(|_, r, _| r % 2 == 1);
        assert_eq!(root(&cfg, Some(&odd), 4), Some(1));
        cfg.traces_enabled = false;
        assert_eq!(root(&cfg, Some(&odd), 4), None, "no spans, no profile");
    }
}
