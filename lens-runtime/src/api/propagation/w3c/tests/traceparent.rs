//! `traceparent`: parsing, flags, header names, injection.

use super::*;

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
