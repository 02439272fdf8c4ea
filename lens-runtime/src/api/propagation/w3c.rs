//! A strict W3C Trace Context (Level 2) propagator for the `traceparent` and
//! `tracestate` headers.
//!
//! It follows the rules the official validation suite (w3c/trace-context,
//! `test/`) checks, where the SDK's `TraceContextPropagator` is lenient or
//! lossy:
//!
//! * **traceparent**: `version-traceid-parentid-flags` with exactly 2/32/16/2
//!   lowercase hex digits, surrounded by optional spaces/tabs. Version `00`
//!   is exactly 55 characters; a higher version may be longer if the 55
//!   known characters are followed by `-` (its known prefix is parsed, the
//!   rest ignored); version `ff` is invalid. All-zero trace or parent ids are
//!   invalid. Two or more `traceparent` headers are invalid. An invalid
//!   `traceparent` restarts the trace: extraction returns the input context
//!   unchanged and `tracestate` is not looked at.
//! * **flags**: `sampled` (`0x01`) and `random-trace-id` (`0x02`) are kept on
//!   extraction and injection (so `03`, as sent by the Python SDK 1.45,
//!   continues the trace); unknown bits are cleared, as the specification
//!   requires of senders. A span that continues a remote trace keeps the
//!   remote random flag on injection even if the SDK dropped it (the SDK
//!   gives unsampled children flags `00`).
//! * **tracestate**: repeated headers are combined with `,` in order; empty
//!   and blank list members are ignored; keys are `[a-z0-9]` followed by up
//!   to 255 of `[a-z0-9_*/@-]` (the current grammar: `@` is an ordinary key
//!   character); values are 1 to 256 printable ASCII characters (0x20-0x7e)
//!   other than `,` and `=`, not ending in a space. A key that occurs more
//!   than once keeps its first member; the later ones are discarded (as the
//!   validation suite's `test_tracestate_duplicated_keys` allows), after
//!   being validated like any other member. More than 32 members (counted
//!   after discarding duplicates) or any malformed member drops the whole
//!   `tracestate` (the `traceparent` is kept).
//! * **header names** are matched case-insensitively: the extractor is asked
//!   for the lowercase name, and keys reported by [`Extractor::keys`] in any
//!   other casing are read as well.
//!
//! The SDK's `TraceState` validates keys with an older grammar (at most one
//! `@`, followed by at most 14 characters), so some valid list members cannot
//! be stored in it. The span context's `TraceState` then holds the members it
//! can represent, and the propagator keeps the complete list beside it in the
//! context, so a span continuing the trace injects all members unchanged.

#[cfg(test)]
mod tests;

use opentelemetry::propagation::{
    text_map_propagator::FieldIter, Extractor, Injector, TextMapPropagator,
};
use opentelemetry::trace::{SpanContext, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry::Context;
use std::sync::{Arc, OnceLock};

mod parse;
pub use parse::{parse_traceparent, parse_tracestate, MAX_TRACESTATE_MEMBERS};
use parse::{valid_key, valid_value, KNOWN_FLAGS};

/// Name of the `traceparent` header (lowercase, as it is sent).
///
/// ```
/// assert_eq!(lens::propagation::w3c::TRACEPARENT, "traceparent");
/// ```
pub const TRACEPARENT: &str = "traceparent";

/// Name of the `tracestate` header (lowercase, as it is sent).
///
/// ```
/// assert_eq!(lens::propagation::w3c::TRACESTATE, "tracestate");
/// ```
pub const TRACESTATE: &str = "tracestate";

/// The `random-trace-id` trace flag (`0x02`, W3C Trace Context Level 2): the
/// trace id's rightmost 7 bytes are random.
///
/// ```
/// use lens::propagation::w3c::RANDOM_TRACE_ID;
/// use opentelemetry::trace::TraceFlags;
/// let flags = TraceFlags::new(0x03);
/// assert!(flags.is_sampled());
/// assert_eq!(flags.to_u8() & RANDOM_TRACE_ID.to_u8(), 0x02);
/// ```
pub const RANDOM_TRACE_ID: TraceFlags = TraceFlags::new(0x02);

/// The W3C `traceparent` / `tracestate` propagator lens installs as part of
/// its global propagator. See the [module documentation](self) for the
/// rules it follows.
///
/// ```
/// use lens::propagation::w3c::W3cPropagator;
/// use opentelemetry::propagation::TextMapPropagator;
/// use opentelemetry::trace::TraceContextExt;
/// use std::collections::HashMap;
///
/// let propagator = W3cPropagator::new();
/// let mut carrier = HashMap::new();
/// carrier.insert(
///     "traceparent".to_string(),
///     "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03".to_string(),
/// );
/// carrier.insert("tracestate".to_string(), "congo=t61rcWkgMzE,a@b@c=1".to_string());
/// let cx = propagator.extract(&carrier);
/// let sc = cx.span().span_context().clone();
/// assert!(sc.is_remote() && sc.is_sampled());
/// assert_eq!(sc.trace_flags().to_u8(), 0x03); // the random flag is kept
///
/// let mut out = HashMap::new();
/// propagator.inject_context(&cx, &mut out);
/// assert_eq!(out["traceparent"], carrier["traceparent"]);
/// assert_eq!(out["tracestate"], "congo=t61rcWkgMzE,a@b@c=1");
///
/// // an uppercase trace id is invalid: the trace restarts (no remote parent)
/// carrier.insert(
///     "traceparent".to_string(),
///     "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01".to_string(),
/// );
/// assert!(!propagator.extract(&carrier).has_active_span());
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct W3cPropagator {
    _private: (),
}

impl W3cPropagator {
    /// A new propagator.
    ///
    /// ```
    /// use opentelemetry::propagation::TextMapPropagator;
    /// let p = lens::propagation::w3c::W3cPropagator::new();
    /// assert_eq!(p.fields().collect::<Vec<_>>(), ["traceparent", "tracestate"]);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }
}

/// What extraction saw, kept in the context beside the remote span context:
/// the complete validated `tracestate` (which the SDK's `TraceState` may not
/// be able to hold) and the remote random flag (which the SDK drops from
/// unsampled children).
#[derive(Debug, Clone)]
struct RemoteW3c {
    trace_id: TraceId,
    random: bool,
    /// The `TraceState` given to the remote span context.
    sdk_state: TraceState,
    /// Every validated member, in order.
    members: Arc<[(String, String)]>,
}

/// Every value of header `name` (ASCII case-insensitive): the extractor's
/// values for the lowercase name, then those of keys it reports in another
/// casing. A value the extractor returns under several names (a carrier that
/// is itself case-insensitive) is counted once: it is recognised by its
/// storage, so two headers with equal text still count twice.
fn header_values<'a>(extractor: &'a dyn Extractor, name: &str) -> Vec<&'a str> {
    let mut values = extractor.get_all(name).unwrap_or_default();
    for key in extractor.keys() {
        if key == name || !key.eq_ignore_ascii_case(name) {
            continue;
        }
        for value in extractor.get_all(key).unwrap_or_default() {
            let same = |seen: &&str| seen.as_ptr() == value.as_ptr() && seen.len() == value.len();
            if !values.iter().any(same) {
                values.push(value);
            }
        }
    }
    values
}

/// Builds the SDK `TraceState` holding the members its (older) key grammar
/// accepts, in order.
fn sdk_trace_state(members: &[(String, String)]) -> TraceState {
    let representable = members
        .iter()
        .filter(|(k, v)| TraceState::from_key_value([(k.as_str(), v.as_str())]).is_ok());
    TraceState::from_key_value(representable.map(|(k, v)| (k.as_str(), v.as_str())))
        .unwrap_or_default()
}

/// The `tracestate` header to send for `sc` from context `cx`, if any.
fn outgoing_tracestate(cx: &Context, sc: &SpanContext) -> Option<String> {
    if let Some(remote) = cx.get::<RemoteW3c>() {
        if remote.trace_id == sc.trace_id() && &remote.sdk_state == sc.trace_state() {
            let header = join_members(remote.members.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            return (!header.is_empty()).then_some(header);
        }
    }
    // A state built in this process: send the members that are valid on the
    // wire, each key once, at most 32.
    // (The SDK's `TraceState` rejects ',' and '=' in values, so its header
    // splits back into its members.)
    let local = sc.trace_state().header();
    let mut sent: Vec<(&str, &str)> = Vec::new();
    for (k, v) in local.split(',').filter_map(|m| m.split_once('=')) {
        if sent.len() < MAX_TRACESTATE_MEMBERS
            && valid_key(k)
            && valid_value(v)
            && !sent.iter().any(|(seen, _)| *seen == k)
        {
            sent.push((k, v));
        }
    }
    let header = join_members(sent.into_iter());
    (!header.is_empty()).then_some(header)
}

fn join_members<'a>(members: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let mut header = String::new();
    for (k, v) in members {
        if !header.is_empty() {
            header.push(',');
        }
        header.push_str(k);
        header.push('=');
        header.push_str(v);
    }
    header
}

impl TextMapPropagator for W3cPropagator {
    /// Sets `traceparent` (version `00`, flags sampled + random-trace-id) and,
    /// when non-empty, `tracestate`, for a valid span context in `cx`.
    fn inject_context(&self, cx: &Context, injector: &mut dyn Injector) {
        let span = cx.span();
        let sc = span.span_context();
        if !sc.is_valid() {
            return;
        }
        let mut flags = sc.trace_flags().to_u8() & KNOWN_FLAGS;
        if let Some(remote) = cx.get::<RemoteW3c>() {
            if remote.random && remote.trace_id == sc.trace_id() {
                flags |= RANDOM_TRACE_ID.to_u8();
            }
        }
        injector.set(
            TRACEPARENT,
            format!(
                "00-{:032x}-{:016x}-{:02x}",
                sc.trace_id(),
                sc.span_id(),
                flags
            ),
        );
        if let Some(state) = outgoing_tracestate(cx, sc) {
            injector.set(TRACESTATE, state);
        }
    }

    /// Returns `cx` with the remote span context of a valid `traceparent`
    /// (and its `tracestate`, if valid), or `cx` unchanged if there is no
    /// valid `traceparent` (the trace restarts).
    fn extract_with_context(&self, cx: &Context, extractor: &dyn Extractor) -> Context {
        let parents = header_values(extractor, TRACEPARENT);
        let [traceparent] = parents.as_slice() else {
            return cx.clone();
        };
        let Some((trace_id, span_id, flags)) = parse_traceparent(traceparent) else {
            return cx.clone();
        };
        let members = parse_tracestate(header_values(extractor, TRACESTATE)).unwrap_or_default();
        let sdk_state = sdk_trace_state(&members);
        let flags = TraceFlags::new(flags.to_u8() & KNOWN_FLAGS);
        let remote = RemoteW3c {
            trace_id,
            random: flags.to_u8() & RANDOM_TRACE_ID.to_u8() != 0,
            sdk_state: sdk_state.clone(),
            members: members.into(),
        };
        cx.with_remote_span_context(SpanContext::new(trace_id, span_id, flags, true, sdk_state))
            .with_value(remote)
    }

    fn fields(&self) -> FieldIter<'_> {
        static FIELDS: OnceLock<[String; 2]> = OnceLock::new();
        FieldIter::new(FIELDS.get_or_init(|| [TRACEPARENT.to_owned(), TRACESTATE.to_owned()]))
    }
}
