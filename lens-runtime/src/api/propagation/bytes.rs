//! The byte carrier: a context as a few hundred bytes for tensor and NCCL transfers; garbage in gives `None`, never a panic.

use super::carrier::*;
use super::json;
use opentelemetry::trace::TraceContextExt;
use opentelemetry::Context;
use std::borrow::Cow;
pub(super) const MAGIC: &[u8; 3] = b"LN1";
/// The most bytes of one field (traceparent, tracestate, baggage) in the
/// byte carrier; a decoder rejects a longer one.
pub(super) const MAX_FIELD: usize = 8192;
/// `tracestate` members longer than this are the first dropped to fit (W3C
/// Trace Context, "tracestate Limits").
pub(super) const LONG_TRACESTATE_MEMBER: usize = 128;

/// Serialises `cx` (traceparent, tracestate, baggage) to a few bytes, e.g.
/// to piggy-back on a tensor transfer. Empty when `cx` has no valid span.
///
/// Each field holds at most 8,192 bytes, and a field is never cut inside a
/// list member (nor inside a UTF-8 character): a longer `tracestate` loses
/// whole members, as the W3C Trace Context text recommends for size
/// limits — members longer than 128 characters first (the last of them
/// first), then members from the end — and a longer `baggage` loses whole
/// members from the end. What is kept is a valid list.
///
/// ```
/// use lens::{propagation::context_from_bytes, propagation::context_to_bytes, propagation::extract_context, propagation::inject_into, propagation::Carrier};
/// assert!(context_to_bytes(&lens::otel::Context::new()).is_empty());
/// assert!(context_from_bytes(b"\xff\x00garbage").is_none());
///
/// // 32 members of 260 characters: 8,351 bytes, too long by one member
/// let state: Vec<String> = (0..32).map(|i| format!("k{i:02}={}", "v".repeat(256))).collect();
/// let mut carrier = Carrier::new();
/// carrier.insert(
///     "traceparent".into(),
///     "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
/// );
/// carrier.insert("tracestate".into(), state.join(","));
/// let bytes = context_to_bytes(&extract_context(&carrier));
/// let mut out = Carrier::new();
/// inject_into(&context_from_bytes(&bytes).unwrap(), &mut out);
/// assert_eq!(out["tracestate"], state[..31].join(",")); // the last member dropped
/// inject_into(&context_from_bytes(&bytes).unwrap(), &mut out);
/// assert_eq!(out["tracestate"], state[..31].join(",")); // the last member dropped
/// ```
pub fn context_to_bytes(cx: &Context) -> Vec<u8> {
    if !cx.span().span_context().is_valid() {
        return Vec::new();
    }
    let mut map = Carrier::new();
    inject_with(cx, &mut map);
    encode_carrier(&map)
}

pub(super) fn encode_carrier(map: &Carrier) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    for (k, _) in ENV_CARRIER_VARS {
        let v = fit_field(k, map.get(k).map_or("", String::as_str));
        let len = u16::try_from(v.len()).unwrap_or(0);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&v.as_bytes()[..usize::from(len)]);
    }
    out
}

/// The value of carrier field `name` made to fit in [`MAX_FIELD`] bytes:
/// list fields lose whole members (see [`context_to_bytes`]); a
/// `traceparent` that does not fit (never sent by lens) is left out.
pub(super) fn fit_field<'a>(name: &str, value: &'a str) -> Cow<'a, str> {
    if value.len() <= MAX_FIELD {
        return Cow::Borrowed(value);
    }
    match name {
        "tracestate" => Cow::Owned(fit_members(value, MAX_FIELD, LONG_TRACESTATE_MEMBER)),
        "baggage" => Cow::Owned(fit_members(value, MAX_FIELD, usize::MAX)),
        _ => Cow::Borrowed(""),
    }
}

/// The `,`-separated list `value` joined again (blank members and the
/// spaces and tabs around members left out) without the members that must
/// go for it to fit in `max` bytes: members longer than `long` first, the
/// last of them first, then members from the end. Members are never cut.
pub(super) fn fit_members(value: &str, max: usize, long: usize) -> String {
    let mut members: Vec<&str> = value
        .split(',')
        .map(|m| m.trim_matches([' ', '\t']))
        .filter(|m| !m.is_empty())
        .collect();
    // the joined length, kept up to date as members go
    let mut len = members
        .iter()
        .map(|m| m.len() + 1)
        .sum::<usize>()
        .saturating_sub(1);
    let mut i = members.len();
    while len > max && i > 0 {
        i -= 1;
        if members[i].len() > long {
            len = len.saturating_sub(members.remove(i).len() + 1);
        }
    }
    while len > max {
        match members.pop() {
            Some(m) => len = len.saturating_sub(m.len() + 1),
            None => break,
        }
    }
    members.join(",")
}

pub(super) fn decode_carrier(bytes: &[u8]) -> Option<Carrier> {
    let mut rest = bytes.strip_prefix(MAGIC)?;
    let mut map = Carrier::new();
    for (k, _) in ENV_CARRIER_VARS {
        let (len, tail) = rest.split_first_chunk::<2>()?;
        let len = usize::from(u16::from_be_bytes(*len));
        if len > MAX_FIELD || tail.len() < len {
            return None;
        }
        let value = std::str::from_utf8(&tail[..len]).ok()?;
        if !value.is_empty() {
            map.insert(k.to_owned(), value.to_owned());
        }
        rest = &tail[len..];
    }
    rest.is_empty().then_some(map)
}

/// The context serialised by [`context_to_bytes`] (the compact binary
/// form) or by [`context_to_json_bytes`] / the Python library (the W3C
/// carrier map as UTF-8 JSON, e.g. `{"traceparent": "00-…", "baggage":
/// "k=v"}`); any other input (garbage, truncation, JSON that is not a flat
/// object of strings, a field over 8,192 bytes, an invalid traceparent)
/// gives `None`, never a panic and never the caller's current context.
///
/// ```
/// use lens::otel::trace::TraceContextExt as _;
/// use lens::propagation::{context_from_bytes, context_to_bytes};
/// let span = lens::detached_span("send");
/// let bytes = context_to_bytes(span.context());
/// # let _ = context_from_bytes(&bytes);
/// // what a Python rank sends
/// let json = br#"{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}"#;
/// let cx = context_from_bytes(json).unwrap();
/// assert_eq!(cx.span().span_context().span_id().to_string(), "b7ad6b7169203331");
/// assert!(context_from_bytes(br#"{"traceparent": 7}"#).is_none());
/// ```
pub fn context_from_bytes(bytes: &[u8]) -> Option<Context> {
    let map = if bytes.starts_with(MAGIC) {
        decode_carrier(bytes)?
    } else {
        decode_json_carrier(bytes)?
    };
    let cx = extract_with(&map);
    cx.span().span_context().is_valid().then_some(cx)
}

/// Serialises `cx` as the Python library's NCCL carrier does: the W3C
/// carrier map (`traceparent`, `tracestate`, `baggage`, each only when
/// present) as UTF-8 JSON in the form of Python's `json.dumps`, so a Python
/// rank reads it with `json.loads` and `propagate.extract`. `{}` when `cx`
/// carries nothing. Fields are fitted to 8,192 bytes as in
/// [`context_to_bytes`]. [`context_from_bytes`] reads it back.
///
/// ```
/// use lens::otel::trace::TraceContextExt as _;
/// use lens::propagation::{context_from_bytes, context_to_json_bytes, extract_context, Carrier};
/// let mut c = Carrier::new();
/// c.insert("traceparent".into(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into());
/// let bytes = context_to_json_bytes(&extract_context(&c));
/// assert_eq!(
///     bytes,
///     br#"{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}"#
/// );
/// assert!(context_from_bytes(&bytes).unwrap().span().span_context().is_valid());
/// assert_eq!(context_to_json_bytes(&lens::otel::Context::new()), b"{}");
/// ```
pub fn context_to_json_bytes(cx: &Context) -> Vec<u8> {
    let mut map = Carrier::new();
    inject_with(cx, &mut map);
    encode_json_carrier(&map)
}

/// `map`'s W3C fields in carrier order, fitted to [`MAX_FIELD`], absent
/// and empty ones left out, as JSON.
pub(super) fn encode_json_carrier(map: &Carrier) -> Vec<u8> {
    let fitted: Vec<(&str, Cow<'_, str>)> = ENV_CARRIER_VARS
        .iter()
        .map(|(k, _)| (*k, fit_field(k, map.get(*k).map_or("", String::as_str))))
        .filter(|(_, v)| !v.is_empty())
        .collect();
    json::encode(fitted.iter().map(|(k, v)| (*k, v.as_ref())))
}

/// The W3C fields of a JSON carrier (later duplicates win, as in Python's
/// `json.loads`; other keys are ignored); `None` unless `bytes` is a flat
/// JSON object of strings of at most [`MAX_FIELD`] bytes each.
pub(super) fn decode_json_carrier(bytes: &[u8]) -> Option<Carrier> {
    let pairs = json::decode(bytes, MAX_FIELD)?;
    Some(
        pairs
            .into_iter()
            .filter(|(k, _)| ENV_CARRIER_VARS.iter().any(|(name, _)| name == k))
            .collect(),
    )
}
