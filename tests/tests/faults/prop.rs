//! Propagation: the byte carrier's field size limit and duplicated
//! `tracestate` keys.

use lens::otel::baggage::BaggageExt;
use lens::otel::propagation::Extractor;
use lens::otel::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use lens::otel::{Context, KeyValue};
use lens::propagation::{
    context_from_bytes, context_from_env_lookup, context_to_bytes, extract_context, extract_from,
    inject_into, Carrier,
};

const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/// The context of a carrier holding [`TRACEPARENT`] and `tracestate`.
fn with_tracestate(tracestate: &str) -> Context {
    let mut c = Carrier::new();
    c.insert("traceparent".into(), TRACEPARENT.into());
    c.insert("tracestate".into(), tracestate.into());
    extract_context(&c)
}

/// The `tracestate` a process sends after receiving `cx`.
fn sent_tracestate(cx: &Context) -> Option<String> {
    let mut out = Carrier::new();
    inject_into(cx, &mut out);
    assert_eq!(out["traceparent"], TRACEPARENT);
    out.remove("tracestate")
}

/// `cx` through the byte carrier.
fn through_bytes(cx: &Context) -> Context {
    context_from_bytes(&context_to_bytes(cx)).expect("a valid context decodes")
}

/// A tracestate over the 8,192-byte field limit lost its last member
/// whole; before, it was cut at byte 8,192, which left a shortened (and
/// still valid-looking) value in the last member.
#[test]
fn byte_carrier_drops_whole_tracestate_members_from_the_end() {
    let members: Vec<String> = (0..32)
        .map(|i| format!("k{i:02}={}", "v".repeat(256)))
        .collect();
    let all = members.join(",");
    assert_eq!(all.len(), 8351);
    let cx = with_tracestate(&all);
    assert_eq!(sent_tracestate(&cx).as_deref(), Some(all.as_str()));
    let back = through_bytes(&cx);
    assert_eq!(sent_tracestate(&back), Some(members[..31].join(",")));
    // what fits is kept as it is
    let fits = members[..31].join(",");
    assert_eq!(
        sent_tracestate(&through_bytes(&with_tracestate(&fits))),
        Some(fits)
    );
}

/// W3C Trace Context: members longer than 128 characters are the first to
/// go, the last of them first, then members from the end.
#[test]
fn byte_carrier_drops_long_tracestate_members_first() {
    let long: Vec<String> = (0..30)
        .map(|i| format!("l{i:02}{}={}", "k".repeat(20), "v".repeat(256)))
        .collect();
    let all = format!("first=1,{},last=1", long.join(","));
    assert!(all.len() > 8192 && all.len() - 8192 < long[29].len());
    let back = through_bytes(&with_tracestate(&all));
    assert_eq!(
        sent_tracestate(&back),
        Some(format!("first=1,{},last=1", long[..29].join(",")))
    );
}

/// Baggage over the limit loses whole members too: every entry that
/// arrives has its value intact.
#[test]
fn byte_carrier_drops_whole_baggage_members() {
    let sc = SpanContext::new(
        TraceId::from(7),
        SpanId::from(9),
        TraceFlags::SAMPLED,
        true,
        TraceState::NONE,
    );
    // spaces are percent-encoded: about 170 bytes each on the wire, 10,000 in all
    let value = "x y".repeat(33);
    let entries: Vec<KeyValue> = (0..60)
        .map(|i| KeyValue::new(format!("k{i:02}"), value.clone()))
        .collect();
    let cx = Context::new()
        .with_remote_span_context(sc)
        .with_baggage(entries);
    // the header itself keeps the W3C / Python limit: whole members, at
    // most 8,192 bytes
    let mut out = Carrier::new();
    inject_into(&cx, &mut out);
    let header = &out["baggage"];
    assert!(
        (8192 - 170..=8192).contains(&header.len()),
        "{}",
        header.len()
    );
    assert!(header.split(',').all(|m| m.len() > 160), "{header}");

    let back = through_bytes(&cx);
    let baggage = back.baggage();
    assert!(
        (40..60).contains(&baggage.len()),
        "{} entries",
        baggage.len()
    );
    for (key, (v, _)) in baggage.iter() {
        assert!(key.as_str().starts_with('k'), "{key}");
        assert_eq!(v.as_str(), value, "{key} arrived whole");
    }
}

/// HTTP-like headers: repeatable, names in any casing.
struct Headers(Vec<(&'static str, &'static str)>);

impl Extractor for Headers {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| *v)
    }
    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|(k, _)| *k).collect()
    }
    fn get_all(&self, key: &str) -> Option<Vec<&str>> {
        let all: Vec<&str> = self
            .0
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| *v)
            .collect();
        (!all.is_empty()).then_some(all)
    }
}

/// The W3C validation suite's `test_tracestate_duplicated_keys`: the
/// tracestate is inherited; the first member of a key is kept. Before, the
/// whole tracestate was dropped.
#[test]
fn duplicated_tracestate_keys_keep_the_first_member() {
    for (states, want) in [
        (&["foo=1,foo=1"][..], "foo=1"),
        (&["foo=1,foo=2"], "foo=1"),
        (&["foo=1", "foo=2"], "foo=1"),
        (&["foo=1,bar=2", "foo=3,baz=4"], "foo=1,bar=2,baz=4"),
    ] {
        let mut headers = vec![("traceparent", TRACEPARENT)];
        headers.extend(states.iter().map(|s| ("tracestate", *s)));
        let cx = extract_from(&Headers(headers));
        assert_eq!(sent_tracestate(&cx).as_deref(), Some(want), "{states:?}");
        // and the state survives the byte carrier
        assert_eq!(sent_tracestate(&through_bytes(&cx)).as_deref(), Some(want));
    }
    // the environment carrier of a child process
    let cx = context_from_env_lookup(|var| match var {
        "TRACEPARENT" => Some(TRACEPARENT.to_owned()),
        "TRACESTATE" => Some("rojo=1,congo=2,rojo=3".to_owned()),
        _ => None,
    });
    assert_eq!(sent_tracestate(&cx).as_deref(), Some("rojo=1,congo=2"));
    // a malformed duplicate still drops the list, the trace continues
    let cx = with_tracestate("foo=1,foo=bar=baz");
    assert!(cx.span().span_context().is_valid());
    assert_eq!(sent_tracestate(&cx), None);
}
