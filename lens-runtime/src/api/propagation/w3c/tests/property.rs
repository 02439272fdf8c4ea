//! Generated hostile input: never a panic, and valid contexts round-trip.

use super::*;
use crate::test_rng::Rng;

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
