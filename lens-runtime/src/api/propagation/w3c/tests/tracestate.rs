//! `tracestate`: combining, limits, key and value grammar, what the SDK cannot hold.

use super::*;

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
