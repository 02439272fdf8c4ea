//! `lens emit-spans`: spans with given start and end times, for steps that
//! are not a Rust program (sbatch scripts, prologues, epilogues), as the
//! Python library's `nemo-lens emit-spans`.
//!
//! Every `--span` is checked before anything is set up ([`plan`]): one bad
//! value and nothing is emitted. Telemetry and traces are on whatever
//! `NEMO_LENS_ENABLED` / `NEMO_LENS_TRACES_ENABLED` say (this command exists
//! to emit); exporter, file and collector settings come from the
//! environment, `service.name` from `--service`. The spans form one trace: the one in `TRACEPARENT` when
//! set; otherwise the trace of the single top-level span or, when several
//! spans have no parent, of a root span named after the service that
//! covers them all.

mod plan;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lens::otel::global::BoxedTracer;
use lens::otel::trace::{SpanBuilder, TraceContextExt, Tracer as _};
use lens::otel::Context;
use lens::LensConfig;

use crate::cli::EmitSpansArgs;
use crate::telemetry;
use crate::Failure;

/// Runs `lens emit-spans`.
pub(crate) fn run(args: &EmitSpansArgs) -> Result<(), Failure> {
    let fail = |msg: String| Failure::Other(format!("emit-spans: {msg}"));
    let usage = |msg: String| Failure::Usage(format!("emit-spans: {msg}"));
    if args.service.trim().is_empty() {
        return Err(usage("--service is empty".into()));
    }
    let plan = plan::plan(&args.spans).map_err(usage)?;
    let mut cfg = LensConfig::from_env().map_err(|e| fail(format!("{e:?}")))?;
    // this command exists to emit spans: on whatever the switches say
    cfg.enabled = true;
    cfg.traces_enabled = true;
    cfg.service_name = args.service.clone();
    let (handle, _) = telemetry::install(cfg, "emit-spans").map_err(fail)?;
    emit(&plan, &args.service, &handle.tracer());
    // the library reports each shutdown problem on stderr itself
    let flushed = telemetry::shutdown(&handle);
    let lost = handle.dropped_spans();
    match flushed {
        Err(_) if lost == 0 => Err(fail("not every span may have been exported".into())),
        Err(_) => Err(fail(format!("{lost} span(s) could not be exported"))),
        Ok(()) if lost > 0 => Err(fail(format!("{lost} span(s) could not be exported"))),
        Ok(()) => Ok(()),
    }
}

/// A time `ns` nanoseconds after the epoch.
fn at(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

/// Emits the planned spans, parents first, each ended at its given time.
fn emit(plan: &plan::Plan, service: &str, tracer: &BoxedTracer) {
    let incoming = lens::propagation::context_from_env();
    let roots: Vec<usize> = plan.roots().collect();
    let top = if incoming.span().span_context().is_valid() || roots.len() < 2 {
        incoming
    } else {
        // several top-level spans: one root over them keeps one trace
        let start = roots.iter().map(|&i| plan.spans[i].start_ns).min();
        let end = roots.iter().map(|&i| plan.spans[i].end_ns).max();
        let (start, end) = (start.unwrap_or(0), end.unwrap_or(0));
        let root = tracer.build_with_context(
            SpanBuilder::from_name(service.to_owned()).with_start_time(at(start)),
            &incoming,
        );
        let cx = incoming.with_span(root);
        cx.span().end_with_timestamp(at(end));
        cx
    };
    let mut contexts: Vec<Context> = Vec::with_capacity(plan.spans.len());
    for (spec, parent) in plan.spans.iter().zip(&plan.parents) {
        // a parent always comes before its children in the plan
        let parent_cx = parent.and_then(|p| contexts.get(p)).unwrap_or(&top);
        let span = tracer.build_with_context(
            SpanBuilder::from_name(spec.name.clone()).with_start_time(at(spec.start_ns)),
            parent_cx,
        );
        let cx = parent_cx.with_span(span);
        cx.span().end_with_timestamp(at(spec.end_ns));
        contexts.push(cx);
    }
}
