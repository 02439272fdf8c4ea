//! Unit tests of the W3C propagator, including the official validation
//! suite's cases.

use super::*;
use opentelemetry::trace::{SpanId, Tracer as _, TracerProvider as _};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use std::collections::HashMap;

const TRACE: &str = "12345678901234567890123456789012";
const PARENT: &str = "1234567890123456";
const VALID: &str = "00-12345678901234567890123456789012-1234567890123456-01";

/// An HTTP-like carrier: ordered headers, names matched case-insensitively,
/// `keys()` lowercase (like `http::HeaderMap`).
#[derive(Default)]
struct Headers(Vec<(String, String)>);

impl Headers {
    fn new(pairs: &[(&str, &str)]) -> Self {
        Headers(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }
}

impl Extractor for Headers {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    }
    fn keys(&self) -> Vec<&str> {
        // like http::HeaderMap: names are stored lowercase, listed once
        let mut keys: Vec<&str> = Vec::new();
        for (k, _) in &self.0 {
            if !keys.iter().any(|seen| seen.eq_ignore_ascii_case(k)) {
                keys.push(k.as_str());
            }
        }
        keys
    }
    fn get_all(&self, key: &str) -> Option<Vec<&str>> {
        let all: Vec<&str> = self
            .0
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
            .collect();
        (!all.is_empty()).then_some(all)
    }
}

/// A carrier that matches names exactly (case-sensitively) and reports
/// them as stored, e.g. a list of pairs read from a message queue.
struct ExactPairs(Vec<(String, String)>);

impl Extractor for ExactPairs {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|(k, _)| k.as_str()).collect()
    }
    fn get_all(&self, key: &str) -> Option<Vec<&str>> {
        let all: Vec<&str> = self
            .0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect();
        (!all.is_empty()).then_some(all)
    }
}

fn extract(pairs: &[(&str, &str)]) -> Context {
    W3cPropagator::new().extract(&Headers::new(pairs))
}

/// The remote span context extracted from `traceparent: value`, if any.
fn parent_of(value: &str) -> Option<SpanContext> {
    let cx = extract(&[("traceparent", value)]);
    cx.has_active_span()
        .then(|| cx.span().span_context().clone())
}

fn assert_restarts(value: &str) {
    assert!(
        parent_of(value).is_none(),
        "{value:?} must be rejected (restart the trace)"
    );
}

fn assert_continues(value: &str) -> SpanContext {
    let sc = parent_of(value).unwrap_or_else(|| panic!("{value:?} must be accepted"));
    assert!(sc.is_valid() && sc.is_remote());
    assert_eq!(format!("{:032x}", sc.trace_id()), TRACE);
    assert_eq!(format!("{:016x}", sc.span_id()), PARENT);
    sc
}

/// The `tracestate` injected after extracting a valid traceparent with
/// these `tracestate` headers (`None`: no tracestate sent).
fn tracestate_after(headers: &[&str]) -> Option<String> {
    let mut pairs = vec![("traceparent", VALID)];
    pairs.extend(headers.iter().map(|h| ("tracestate", *h)));
    let cx = extract(&pairs);
    assert!(
        cx.has_active_span(),
        "the traceparent is kept whatever the tracestate"
    );
    let mut out = HashMap::new();
    W3cPropagator::new().inject_context(&cx, &mut out);
    out.remove("tracestate")
}

fn members(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("bar{i:02}={i:02}")).collect()
}

// --- traceparent ---------------------------------------------------------

#[test]
fn accepts_valid_traceparent() {
    let sc = assert_continues(VALID);
    assert!(sc.is_sampled());
    assert_eq!(sc.trace_state(), &TraceState::NONE);
}

#[test]
fn missing_traceparent_returns_input_context() {
    let cx = extract(&[]);
    assert!(!cx.has_active_span());
    // tracestate without traceparent is ignored
    let cx = extract(&[("tracestate", "foo=1")]);
    assert!(!cx.has_active_span());
    assert!(cx.get::<RemoteW3c>().is_none());
}

#[test]
fn invalid_traceparent_keeps_the_callers_context() {
    let provider = SdkTracerProvider::builder().build();
    let span = provider.tracer("t").start("local");
    let local = Context::new().with_span(span);
    let cx = W3cPropagator::new()
        .extract_with_context(&local, &Headers::new(&[("traceparent", "garbage")]));
    assert_eq!(cx.span().span_context(), local.span().span_context());
    assert!(!cx.span().span_context().is_remote());
}

#[test]
fn rejects_uppercase_trace_id() {
    assert_restarts("00-ABCDEF78901234567890123456789012-1234567890123456-01");
}

#[test]
fn rejects_uppercase_parent_id() {
    assert_restarts("00-12345678901234567890123456789012-ABCDEF7890123456-01");
}

#[test]
fn rejects_uppercase_version_and_flags() {
    assert_restarts("0A-12345678901234567890123456789012-1234567890123456-01");
    assert_restarts("00-12345678901234567890123456789012-1234567890123456-0A");
}

#[test]
fn rejects_version_wrong_length() {
    assert_restarts("0-12345678901234567890123456789012-1234567890123456-01");
    assert_restarts("000-12345678901234567890123456789012-1234567890123456-01");
    assert_restarts("0000-12345678901234567890123456789012-1234567890123456-01");
}

#[test]
fn rejects_trace_id_wrong_length() {
    assert_restarts("00-1234567890123456789012345678901-1234567890123456-01");
    assert_restarts("00-123456789012345678901234567890123-1234567890123456-01");
}

#[test]
fn rejects_parent_id_wrong_length() {
    assert_restarts("00-12345678901234567890123456789012-123456789012345-01");
    assert_restarts("00-12345678901234567890123456789012-12345678901234567-01");
}

#[test]
fn rejects_flags_wrong_length() {
    assert_restarts("00-12345678901234567890123456789012-1234567890123456-1");
    assert_restarts("00-12345678901234567890123456789012-1234567890123456-001");
}

#[test]
fn rejects_illegal_characters() {
    for bad in [
        ".0-12345678901234567890123456789012-1234567890123456-01",
        "0.-12345678901234567890123456789012-1234567890123456-01",
        "00-.2345678901234567890123456789012-1234567890123456-01",
        "00-1234567890123456789012345678901.-1234567890123456-01",
        "00-12345678901234567890123456789012-.234567890123456-01",
        "00-12345678901234567890123456789012-123456789012345.-01",
        "00-12345678901234567890123456789012-1234567890123456-.0",
        "00-12345678901234567890123456789012-1234567890123456-0.",
        "00-1234567890123456789012345678901g-1234567890123456-01",
        "00-12345678901234567890123456789012_1234567890123456-01",
        "00-12345678901234567890123456789012-1234567890123456_01",
        "00_12345678901234567890123456789012-1234567890123456-01",
    ] {
        assert_restarts(bad);
    }
}

#[test]
fn rejects_non_ascii() {
    assert_restarts("00-1234567890123456789012345678901é-1234567890123456-01");
    assert_restarts("00-12345678901234567890123456789012-1234567890123456-0é");
    assert_restarts("ü0-12345678901234567890123456789012-1234567890123456-01");
}

#[test]
fn rejects_zero_trace_id() {
    assert_restarts("00-00000000000000000000000000000000-1234567890123456-01");
}

#[test]
fn rejects_zero_parent_id() {
    assert_restarts("00-12345678901234567890123456789012-0000000000000000-01");
}

#[test]
fn rejects_version_ff() {
    assert_restarts("ff-12345678901234567890123456789012-1234567890123456-01");
    assert_restarts("ff-12345678901234567890123456789012-1234567890123456-01-future");
}

#[test]
fn version_00_must_be_exactly_55_chars() {
    assert_restarts("00-12345678901234567890123456789012-1234567890123456-01.");
    assert_restarts("00-12345678901234567890123456789012-1234567890123456-01-");
    assert_restarts(
        "00-12345678901234567890123456789012-1234567890123456-01-what-the-future-will-be-like",
    );
}

#[test]
fn future_version_is_parsed() {
    let sc = assert_continues("cc-12345678901234567890123456789012-1234567890123456-01");
    assert!(sc.is_sampled());
}

#[test]
fn future_version_with_extra_fields() {
    assert_continues(
        "cc-12345678901234567890123456789012-1234567890123456-01-what-the-future-will-be-like",
    );
    assert_continues("01-12345678901234567890123456789012-1234567890123456-00-");
    // the extra fields must follow a dash
    assert_restarts(
        "cc-12345678901234567890123456789012-1234567890123456-01.what-the-future-will-be-like",
    );
    // and a future version still needs the known prefix
    assert_restarts("cc-12345678901234567890123456789012-1234567890123456-1");
}

#[test]
fn future_version_injects_version_00() {
    let cx = extract(&[(
        "traceparent",
        "cc-12345678901234567890123456789012-1234567890123456-01-xyz",
    )]);
    let mut out = HashMap::new();
    W3cPropagator::new().inject_context(&cx, &mut out);
    assert_eq!(out["traceparent"], VALID);
}

#[test]
fn optional_whitespace_around_traceparent() {
    for v in [
        " 00-12345678901234567890123456789012-1234567890123456-01",
        "\t00-12345678901234567890123456789012-1234567890123456-01",
        "00-12345678901234567890123456789012-1234567890123456-01 ",
        "00-12345678901234567890123456789012-1234567890123456-01\t",
        "\t 00-12345678901234567890123456789012-1234567890123456-01 \t",
    ] {
        assert_continues(v);
    }
    // only spaces and tabs
    assert_restarts("\n00-12345678901234567890123456789012-1234567890123456-01");
}

#[test]
fn empty_and_short_traceparent_invalid() {
    for v in [
        "",
        " ",
        "00",
        "00-",
        "00-12345678901234567890123456789012-1234567890123456-",
    ] {
        assert_restarts(v);
    }
}

#[test]
fn duplicate_traceparent_invalid() {
    let cx = extract(&[
        (
            "traceparent",
            "00-12345678901234567890123456789011-1234567890123456-01",
        ),
        (
            "traceparent",
            "00-12345678901234567890123456789012-1234567890123456-01",
        ),
    ]);
    assert!(!cx.has_active_span());
    // also when both carry the same value
    let cx = extract(&[("traceparent", VALID), ("traceparent", VALID)]);
    assert!(!cx.has_active_span());
    // and when they differ only in the header name's casing
    let cx = extract(&[("traceparent", VALID), ("TraceParent", VALID)]);
    assert!(!cx.has_active_span());
}

#[test]
fn duplicate_traceparent_invalid_in_case_sensitive_carrier() {
    let carrier = ExactPairs(vec![
        ("traceparent".into(), VALID.into()),
        ("TRACEPARENT".into(), VALID.into()),
    ]);
    assert!(!W3cPropagator::new().extract(&carrier).has_active_span());
}

#[test]
fn header_name_casing() {
    for name in ["traceparent", "TraceParent", "TrAcEpArEnT", "TRACEPARENT"] {
        let cx = extract(&[(name, VALID), ("TraceState", "foo=1")]);
        assert!(cx.has_active_span(), "{name}");
        assert_eq!(cx.span().span_context().trace_state().get("foo"), Some("1"));
    }
}

#[test]
fn header_name_casing_in_case_sensitive_carrier() {
    // a carrier that only answers the exact name: found through keys()
    for name in ["TraceParent", "TRACEPARENT"] {
        let carrier = ExactPairs(vec![
            (name.into(), VALID.into()),
            ("TRACESTATE".into(), "foo=1".into()),
        ]);
        let cx = W3cPropagator::new().extract(&carrier);
        assert!(cx.has_active_span(), "{name}");
        assert_eq!(cx.span().span_context().trace_state().get("foo"), Some("1"));
    }
    // tracestate split over two casings is combined
    let carrier = ExactPairs(vec![
        ("traceparent".into(), VALID.into()),
        ("tracestate".into(), "foo=1".into()),
        ("TraceState".into(), "bar=2".into()),
    ]);
    let sc = W3cPropagator::new()
        .extract(&carrier)
        .span()
        .span_context()
        .clone();
    assert_eq!(sc.trace_state().header(), "foo=1,bar=2");
}

#[test]
fn wrong_header_names_ignored() {
    for name in [
        "trace-parent",
        "trace.parent",
        "traceparent ",
        "traceparentx",
    ] {
        assert!(!extract(&[(name, VALID)]).has_active_span(), "{name}");
    }
    let cx = extract(&[
        ("traceparent", VALID),
        ("trace-state", "foo=1"),
        ("trace.state", "bar=1"),
    ]);
    assert_eq!(cx.span().span_context().trace_state(), &TraceState::NONE);
}

// --- flags ---------------------------------------------------------------

#[test]
fn sampled_flag_extracted() {
    assert!(assert_continues(VALID).is_sampled());
    assert!(
        !assert_continues("00-12345678901234567890123456789012-1234567890123456-00").is_sampled()
    );
}

#[test]
fn random_flag_kept_on_extract() {
    for (flags, byte) in [("02", 0x02), ("03", 0x03)] {
        let sc = assert_continues(&format!("00-{TRACE}-{PARENT}-{flags}"));
        assert_eq!(sc.trace_flags().to_u8(), byte);
    }
}

#[test]
fn python_sdk_flags_03_continue_the_trace() {
    let sc = assert_continues("00-12345678901234567890123456789012-1234567890123456-03");
    assert!(sc.is_sampled());
}

#[test]
fn unknown_flags_cleared() {
    let sc = assert_continues("00-12345678901234567890123456789012-1234567890123456-ff");
    assert_eq!(sc.trace_flags().to_u8(), 0x03);
    let sc = assert_continues("00-12345678901234567890123456789012-1234567890123456-08");
    assert_eq!(sc.trace_flags().to_u8(), 0x00);
}

#[test]
fn random_flag_round_trips() {
    for flags in ["00", "01", "02", "03"] {
        let value = format!("00-{TRACE}-{PARENT}-{flags}");
        let cx = extract(&[("traceparent", &value)]);
        let mut out = HashMap::new();
        W3cPropagator::new().inject_context(&cx, &mut out);
        assert_eq!(out["traceparent"], value);
    }
}

#[test]
fn random_flag_kept_for_children() {
    // parent-based sampling: a sampled child keeps the parent's flags;
    // an unsampled child gets flags 00 from the SDK, and the propagator
    // restores the random flag of the trace it continues.
    let provider = SdkTracerProvider::builder()
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)))
        .build();
    let tracer = provider.tracer("t");
    for (flags, expected) in [("00", "00"), ("01", "01"), ("02", "02"), ("03", "03")] {
        let parent = extract(&[("traceparent", &format!("00-{TRACE}-{PARENT}-{flags}"))]);
        let child = parent.with_span(tracer.start_with_context("child", &parent));
        let mut out = HashMap::new();
        W3cPropagator::new().inject_context(&child, &mut out);
        let sent = &out["traceparent"];
        assert!(sent.starts_with(&format!("00-{TRACE}-")), "{sent}");
        assert_ne!(&sent[36..52], PARENT, "a new parent id: {sent}");
        assert!(
            sent.ends_with(&format!("-{expected}")),
            "flags {flags} -> {sent}"
        );
        child.span().end();
    }
}

#[test]
fn random_flag_not_added_to_other_traces() {
    let provider = SdkTracerProvider::builder().build();
    let parent = extract(&[("traceparent", &format!("00-{TRACE}-{PARENT}-02"))]);
    // a new root span in a context that still holds the remote values
    let root = tracer_root(&provider, &parent);
    let mut out = HashMap::new();
    W3cPropagator::new().inject_context(&root, &mut out);
    assert!(
        out["traceparent"].ends_with("-01"),
        "{}",
        out["traceparent"]
    );
}

fn tracer_root(provider: &SdkTracerProvider, cx: &Context) -> Context {
    use opentelemetry::trace::SpanBuilder;
    let tracer = provider.tracer("t");
    let span = tracer.build_with_context(SpanBuilder::from_name("root"), &Context::new());
    cx.with_span(span)
}

#[test]
fn inject_nothing_without_valid_span() {
    let mut out: HashMap<String, String> = HashMap::new();
    W3cPropagator::new().inject_context(&Context::new(), &mut out);
    assert!(out.is_empty());
}

#[test]
fn injected_traceparent_is_lowercase_hex() {
    let sc = SpanContext::new(
        TraceId::from_hex("ABCDEF78901234567890123456789012").unwrap(),
        SpanId::from_hex("ABCDEF7890123456").unwrap(),
        TraceFlags::new(0xfd),
        false,
        TraceState::NONE,
    );
    let mut out = HashMap::new();
    W3cPropagator::new().inject_context(&Context::new().with_remote_span_context(sc), &mut out);
    assert_eq!(
        out["traceparent"],
        "00-abcdef78901234567890123456789012-abcdef7890123456-01"
    );
}

// --- tracestate ----------------------------------------------------------

#[test]
fn tracestate_kept_with_traceparent() {
    assert_eq!(
        tracestate_after(&["foo=1,bar=2"]).as_deref(),
        Some("foo=1,bar=2")
    );
    let cx = extract(&[("traceparent", VALID), ("tracestate", "foo=1,bar=2")]);
    let state = cx.span().span_context().trace_state().clone();
    assert_eq!((state.get("foo"), state.get("bar")), (Some("1"), Some("2")));
}

#[test]
fn tracestate_repeated_headers_combined_in_order() {
    assert_eq!(
        tracestate_after(&["foo=1,bar=2", "rojo=1,congo=2", "baz=3"]).as_deref(),
        Some("foo=1,bar=2,rojo=1,congo=2,baz=3")
    );
}

#[test]
fn tracestate_empty_members_ignored() {
    assert_eq!(tracestate_after(&[""]), None);
    assert_eq!(tracestate_after(&["foo=1", ""]).as_deref(), Some("foo=1"));
    assert_eq!(tracestate_after(&["", "foo=1"]).as_deref(), Some("foo=1"));
    assert_eq!(
        tracestate_after(&[",, ,\t,foo=1,,"]).as_deref(),
        Some("foo=1")
    );
}

#[test]
fn tracestate_optional_whitespace() {
    for h in [
        "foo=1 \t , \t bar=2, \t baz=3",
        "foo=1\t \t,\t \tbar=2,\t \tbaz=3",
    ] {
        assert_eq!(tracestate_after(&[h]).as_deref(), Some("foo=1,bar=2,baz=3"));
    }
    for h in [" foo=1", "\tfoo=1", "foo=1 ", "foo=1\t", "\t foo=1 \t"] {
        assert_eq!(tracestate_after(&[h]).as_deref(), Some("foo=1"));
    }
    // leading spaces of a value are part of it
    assert_eq!(tracestate_after(&["foo= 1"]).as_deref(), Some("foo= 1"));
}

/// `tracestate` after extracting `all` spread over four repeated headers
/// (10, 10, 10 and the rest), which combine into one list.
fn tracestate_in_four_headers(all: &[String]) -> Option<String> {
    let headers = [
        all[..10].join(","),
        all[10..20].join(","),
        all[20..30].join(","),
        all[30..].join(","),
    ];
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    tracestate_after(&headers)
}

#[test]
fn tracestate_32_members_kept() {
    let all = members(32);
    assert_eq!(tracestate_in_four_headers(&all), Some(all.join(",")));
}

#[test]
fn tracestate_33_members_dropped() {
    assert_eq!(tracestate_in_four_headers(&members(33)), None);
    // empty members do not count
    let sparse = format!("{},,,", members(32).join(", ,"));
    assert_eq!(tracestate_after(&[&sparse]), Some(members(32).join(",")));
}

#[test]
fn tracestate_duplicate_keys_keep_the_first_member() {
    // test_tracestate_duplicated_keys: the tracestate is inherited
    for headers in [
        &["foo=1,foo=1"][..],
        &["foo=1,foo=2"],
        &["foo=1", "foo=1"],
        &["foo=1", "foo=2"],
        &["foo=1 , foo=2 ,\tfoo=3"],
    ] {
        assert_eq!(
            tracestate_after(headers).as_deref(),
            Some("foo=1"),
            "{headers:?}"
        );
    }
    // the order of the other members is kept
    assert_eq!(
        tracestate_after(&["foo=1,bar=2", "foo=3,baz=4,bar=5"]).as_deref(),
        Some("foo=1,bar=2,baz=4")
    );
    // the SDK's TraceState holds the same members
    let cx = extract(&[("traceparent", VALID), ("tracestate", "foo=1,bar=2,foo=2")]);
    assert_eq!(
        cx.span().span_context().trace_state().header(),
        "foo=1,bar=2"
    );
}

#[test]
fn tracestate_duplicate_members_are_still_validated() {
    for bad in ["foo=", "foo=a=b", "foo=é", "foo"] {
        assert_eq!(tracestate_after(&["foo=1", bad]), None, "{bad:?}");
    }
}

#[test]
fn tracestate_duplicates_do_not_count_towards_32() {
    let mut all = members(32);
    all.insert(5, "bar01=again".to_owned());
    all.push("bar32=again".to_owned());
    assert_eq!(
        tracestate_after(&[&all.join(",")]),
        Some(members(32).join(","))
    );
    // a 33rd distinct key still drops the list
    all.push("bar33=33".to_owned());
    assert_eq!(tracestate_after(&[&all.join(",")]), None);
}

#[test]
fn tracestate_key_illegal_characters() {
    for h in [
        "foo =1",
        "FOO=1",
        "foo.bar=1",
        "Foo=1",
        "_foo=1",
        "-foo=1",
        "*foo=1",
        "/foo=1",
        "fo o=1",
        "föo=1",
    ] {
        assert_eq!(tracestate_after(&[h, "bar=2"]), None, "{h}");
    }
}

#[test]
fn tracestate_at_sign_is_an_ordinary_key_character() {
    for key in [
        "foo@",
        "foo@@bar",
        "foo@bar@baz",
        "t@vvvvvvvvvvvvvvv",
        "0@-_*/",
        "tenant@vendor",
    ] {
        let h = format!("{key}=1,bar=2");
        assert_eq!(tracestate_after(&[&h]), Some(h.clone()), "{key}");
    }
    let long = format!("{}@v=1", "t".repeat(242));
    assert_eq!(tracestate_after(&[&long]), Some(long.clone()));
    // but a key must start with a lowercase letter or a digit
    assert_eq!(tracestate_after(&["@foo=1,bar=2"]), None);
}

#[test]
fn tracestate_members_the_sdk_cannot_hold_are_propagated() {
    // the SDK's TraceState rejects these keys; they still travel
    let cx = extract(&[
        ("traceparent", VALID),
        ("tracestate", "a@b@c=1,foo=2,t@vvvvvvvvvvvvvvv=3"),
    ]);
    let sc = cx.span().span_context().clone();
    assert_eq!(sc.trace_state().header(), "foo=2");
    let provider = SdkTracerProvider::builder().build();
    let child = cx.with_span(provider.tracer("t").start_with_context("child", &cx));
    let mut out = HashMap::new();
    W3cPropagator::new().inject_context(&child, &mut out);
    assert_eq!(out["tracestate"], "a@b@c=1,foo=2,t@vvvvvvvvvvvvvvv=3");
}

#[test]
fn tracestate_mutated_by_sdk_is_sent_as_mutated() {
    let cx = extract(&[("traceparent", VALID), ("tracestate", "foo=1,bar=2")]);
    let sc = cx.span().span_context().clone();
    let state = sc.trace_state().insert("lens", "x").unwrap();
    let mutated = SpanContext::new(
        sc.trace_id(),
        SpanId::from(7u64),
        sc.trace_flags(),
        false,
        state,
    );
    let mut out = HashMap::new();
    W3cPropagator::new().inject_context(&cx.with_remote_span_context(mutated), &mut out);
    assert_eq!(out["tracestate"], "lens=x,foo=1,bar=2");
}

#[test]
fn tracestate_all_allowed_characters() {
    let key: String = ('a'..='z')
        .chain('0'..='9')
        .chain("_-*/@".chars())
        .collect();
    let value: String = (0x20u8..=0x7e)
        .filter(|&b| b != b',' && b != b'=')
        .map(char::from)
        .collect();
    let h = format!("{key}={value}");
    assert_eq!(tracestate_after(&[&h]), Some(h.clone()));
}

#[test]
fn tracestate_key_length_limit() {
    let ok = format!("{}=1", "z".repeat(256));
    assert_eq!(
        tracestate_after(&["foo=1", &ok]),
        Some(format!("foo=1,{ok}"))
    );
    let too_long = format!("{}=1", "z".repeat(257));
    assert_eq!(tracestate_after(&["foo=1", &too_long]), None);
    let vendor = format!("{}@{}=1", "t".repeat(241), "v".repeat(14));
    assert_eq!(
        tracestate_after(&["foo=1", &vendor]),
        Some(format!("foo=1,{vendor}"))
    );
}

#[test]
fn tracestate_value_length_limit() {
    let ok = format!("foo={}", "v".repeat(256));
    assert_eq!(tracestate_after(&[&ok]), Some(ok.clone()));
    let too_long = format!("foo={}", "v".repeat(257));
    assert_eq!(tracestate_after(&[&too_long, "bar=1"]), None);
}

#[test]
fn tracestate_value_illegal_characters() {
    for h in [
        "foo=bar=baz",
        "foo=,bar=3",
        "foo",
        "foo=a\tb",
        "foo=a\u{7f}",
        "foo=é",
        "foo=\u{1}",
        "=1",
    ] {
        assert_eq!(tracestate_after(&[h, "bar=3"]), None, "{h:?}");
    }
}

#[test]
fn tracestate_invalid_keeps_traceparent() {
    let cx = extract(&[("traceparent", VALID), ("tracestate", "FOO=1")]);
    let sc = cx.span().span_context().clone();
    assert_eq!(format!("{:032x}", sc.trace_id()), TRACE);
    assert_eq!(sc.trace_state(), &TraceState::NONE);
}

#[test]
fn tracestate_ignored_when_traceparent_invalid() {
    let cx = extract(&[("traceparent", "garbage"), ("tracestate", "foo=1")]);
    assert!(!cx.has_active_span());
    assert!(cx.get::<RemoteW3c>().is_none());
}

#[test]
fn local_tracestate_sanitised_on_inject() {
    let state = TraceState::from_key_value([("foo", "1"), ("bad", "a\nb"), ("bar", "2 ")]).unwrap();
    let sc = SpanContext::new(
        TraceId::from(1u128),
        SpanId::from(1u64),
        TraceFlags::SAMPLED,
        false,
        state,
    );
    let mut out = HashMap::new();
    W3cPropagator::new().inject_context(&Context::new().with_remote_span_context(sc), &mut out);
    assert_eq!(out["tracestate"], "foo=1");
}

#[test]
fn fields_are_lowercase_header_names() {
    let p = W3cPropagator::new();
    assert_eq!(p.fields().collect::<Vec<_>>(), [TRACEPARENT, TRACESTATE]);
}

// --- hostile input -------------------------------------------------------

/// A small deterministic generator (xorshift64*), so the property test
/// needs no extra dependency and every failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    fn hex(&mut self, n: usize, alphabet: &str) -> String {
        let a: Vec<char> = alphabet.chars().collect();
        (0..n).map(|_| a[self.below(a.len())]).collect()
    }
}

/// A traceparent, valid or broken in one or more of many ways.
fn hostile_traceparent(r: &mut Rng) -> String {
    const HEX: &str = "0123456789abcdef";
    const ANY: &str = "0123456789abcdefABCDEF-.gz é\t\u{0}\u{7f}ü日";
    let field = |r: &mut Rng, len: usize| -> String {
        match r.below(12) {
            0 => r.hex(len, ANY),
            1 => {
                let n = len + 1 + r.below(3);
                r.hex(n, HEX)
            }
            2 => {
                let n = len.saturating_sub(1 + r.below(2));
                r.hex(n, HEX)
            }
            3 => "0".repeat(len),
            _ => r.hex(len, HEX),
        }
    };
    let version = match r.below(5) {
        0 => "ff".to_string(),
        1 => field(r, 2),
        2 => r.hex(2, HEX),
        _ => "00".to_string(),
    };
    let mut s = format!(
        "{version}-{}-{}-{}",
        field(r, 32),
        field(r, 16),
        field(r, 2)
    );
    match r.below(12) {
        0 => {
            let n = r.below(40);
            s.push_str(&r.hex(n, ANY))
        }
        1 => s.push_str(&"-x".repeat(r.below(5000))),
        2 => s = s.replace('-', r.pick(&["", "--", "_", "é"])),
        3 => {
            let mut end = r.below(s.len() + 1);
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s.truncate(end);
        }
        _ => {}
    }
    if r.below(4) == 0 {
        s = format!(
            "{}{s}{}",
            r.pick(&[" ", "\t", "", "\n"]),
            r.pick(&[" ", "\t", ""])
        );
    }
    s
}

/// A tracestate header, valid or hostile (up to 100 members, long keys
/// and values, non-ASCII, duplicates).
fn hostile_tracestate(r: &mut Rng) -> String {
    const KEYS: &str = "abz09_-*/@AZ .=é\t";
    const VALUES: &str = "abz09 !~,=é\t\u{7f}\u{1}";
    let n = match r.below(4) {
        0 => 33 + r.below(70),
        1 => 32,
        _ => r.below(8),
    };
    let mut members = Vec::new();
    for i in 0..n {
        let key = match r.below(5) {
            0 => {
                let n = 1 + r.below(300);
                r.hex(n, KEYS)
            }
            1 => "dup".to_string(),
            _ => format!("k{i}"),
        };
        let value = match r.below(5) {
            0 => {
                let n = r.below(300);
                r.hex(n, VALUES)
            }
            _ => format!("v{}", r.below(1000)),
        };
        members.push(match r.below(10) {
            0 => String::new(),
            1 => key,
            _ => format!("{key}={value}"),
        });
    }
    members.join(r.pick(&[",", " , ", ",\t", ",,"]))
}

/// Whether `value` is a traceparent the rules accept (an independent
/// restatement of them, for the property test).
fn acceptable(value: &str) -> bool {
    // unknown fields of a future version are not looked at (any bytes)
    let v = value.trim_matches([' ', '\t']).as_bytes();
    let lower_hex = |s: &[u8]| {
        s.iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    };
    if v.len() < 55 {
        return false;
    }
    let (head, rest) = v.split_at(55);
    let parts: Vec<&[u8]> = head.split(|&b| b == b'-').collect();
    parts.len() == 4
        && parts[0].len() == 2
        && parts[1].len() == 32
        && parts[2].len() == 16
        && parts[3].len() == 2
        && parts.iter().all(|p| lower_hex(p))
        && parts[0] != b"ff"
        && parts[1].iter().any(|&b| b != b'0')
        && parts[2].iter().any(|&b| b != b'0')
        && if parts[0] == b"00" {
            rest.is_empty()
        } else {
            rest.is_empty() || rest[0] == b'-'
        }
}

#[test]
fn hostile_input_never_panics() {
    let propagator = W3cPropagator::new();
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let mut accepted = 0;
    for case in 0..20_000 {
        let traceparent = hostile_traceparent(&mut r);
        let mut headers = vec![("traceparent".to_string(), traceparent.clone())];
        let duplicated = r.below(20) == 0;
        if duplicated {
            headers.push(("TraceParent".to_string(), hostile_traceparent(&mut r)));
        }
        let mut states = Vec::new();
        for _ in 0..r.below(4) {
            let state = hostile_tracestate(&mut r);
            states.push(state.clone());
            headers.push((r.pick(&["tracestate", "TRACESTATE"]).to_string(), state));
        }
        let cx = propagator.extract(&Headers(headers));
        let expect = !duplicated && acceptable(&traceparent);
        assert_eq!(cx.has_active_span(), expect, "case {case}: {traceparent:?}");
        if !expect {
            continue;
        }
        accepted += 1;
        let mut out = HashMap::new();
        propagator.inject_context(&cx, &mut out);
        let sent = &out["traceparent"];
        assert!(
            acceptable(sent) && sent.starts_with("00-") && sent.len() == 55,
            "{sent}"
        );
        let parsed = parse_tracestate(states.iter().map(String::as_str));
        match out.get("tracestate") {
            Some(state) => {
                let again = parse_tracestate([state.as_str()]).expect("what is sent parses");
                assert!(!again.is_empty() && again.len() <= MAX_TRACESTATE_MEMBERS);
                assert_eq!(Some(again), parsed, "case {case}");
            }
            None => assert!(parsed.is_none_or(|m| m.is_empty()), "case {case}"),
        }
    }
    assert!(
        accepted > 1_000,
        "the generator must also produce valid input ({accepted})"
    );
}

#[test]
fn valid_contexts_round_trip() {
    let propagator = W3cPropagator::new();
    let mut r = Rng(42);
    for _ in 0..2_000 {
        let trace_id = TraceId::from((u128::from(r.next()) << 64) | u128::from(r.next()) | 1);
        let span_id = SpanId::from(r.next() | 1);
        let flags = TraceFlags::new(r.below(4) as u8);
        let n = r.below(MAX_TRACESTATE_MEMBERS + 1);
        let state =
            TraceState::from_key_value((0..n).map(|i| (format!("k{i}"), format!("v{}", r.next()))))
                .unwrap();
        let sc = SpanContext::new(trace_id, span_id, flags, false, state);
        let mut out = HashMap::new();
        propagator.inject_context(
            &Context::new().with_remote_span_context(sc.clone()),
            &mut out,
        );
        let back = propagator.extract(&out);
        let span = back.span();
        let got = span.span_context();
        assert_eq!(
            (
                got.trace_id(),
                got.span_id(),
                got.trace_flags(),
                got.trace_state()
            ),
            (trace_id, span_id, flags, sc.trace_state())
        );
    }
}
