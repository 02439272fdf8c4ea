//! Propagation over maps, env, bytes and collectives; linked spans.

mod common;

use common::{assert_child, fixture};
use lens::otel::trace::TraceContextExt;
use lens::propagation::{
    broadcast_trace_context, context_from_bytes, context_from_env_lookup, context_to_bytes,
    create_linked_span, env_for_child, extract_context, inject_context, pp_trace_carrier,
    set_pp_trace_carrier, Carrier, LocalCollective,
};
use lens::span_cm;

#[test]
fn map_round_trip_parents_the_receiver_on_the_sender() {
    let f = fixture("all");
    let carrier = {
        let _send = span_cm!("sender");
        inject_context()
    };
    assert!(carrier["traceparent"].starts_with("00-"));
    {
        let _g = extract_context(&carrier).attach();
        drop(span_cm!("receiver"));
    }
    assert_child(&f.span("receiver"), &f.span("sender"));
    assert!(inject_context().is_empty(), "no active span: empty carrier");
}

#[test]
fn baggage_travels_with_the_context() {
    let _f = fixture("all");
    use lens::otel::baggage::BaggageExt;
    use lens::otel::KeyValue;
    let cx = lens::otel::Context::current_with_baggage(vec![KeyValue::new("job", "pretrain")]);
    let _g = cx.attach();
    let _s = span_cm!("with.baggage");
    let carrier = inject_context();
    assert_eq!(
        carrier.get("baggage").map(String::as_str),
        Some("job=pretrain")
    );
    let back = extract_context(&carrier);
    assert_eq!(
        back.baggage().get("job").map(|v| v.to_string()),
        Some("pretrain".into())
    );
}

#[test]
fn environment_carrier_for_child_processes() {
    let f = fixture("all");
    let env = {
        let _launcher = span_cm!("launcher");
        env_for_child()
    };
    let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    assert!(names.contains(&"TRACEPARENT"), "{names:?}");
    let cx = context_from_env_lookup(|k| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()));
    {
        let _g = cx.attach();
        drop(span_cm!("child.rank"));
    }
    assert_child(&f.span("child.rank"), &f.span("launcher"));
    // nothing set: an empty context
    assert!(!context_from_env_lookup(|_| None)
        .span()
        .span_context()
        .is_valid());
}

#[test]
fn bytes_round_trip_and_garbage_gives_none() {
    let f = fixture("all");
    let bytes = {
        let s = span_cm!("tensor.send");
        context_to_bytes(s.context())
    };
    assert!(
        !bytes.is_empty() && bytes.len() < 128,
        "{} bytes",
        bytes.len()
    );
    let cx = context_from_bytes(&bytes).expect("round trip");
    {
        let _g = cx.attach();
        drop(span_cm!("tensor.recv"));
    }
    assert_child(&f.span("tensor.recv"), &f.span("tensor.send"));
    // hostile input while a span is active: None, never the current context
    let _active = span_cm!("active");
    let mut cases: Vec<Vec<u8>> = vec![
        vec![],
        b"LN1".to_vec(),
        b"LN1\x00".to_vec(),
        b"LN1\xff\xff".to_vec(),
        b"garbage".to_vec(),
        vec![0xff; 4096],
    ];
    for cut in 0..bytes.len() {
        cases.push(bytes[..cut].to_vec());
    }
    let mut extra = bytes.clone();
    extra.push(0);
    cases.push(extra);
    let mut flipped = bytes.clone();
    flipped[10] ^= 0x20; // uppercase hex / other char inside the traceparent
    cases.push(flipped);
    // (random and mutated input: the `fuzz` module)
    for c in &cases {
        if let Some(cx) = context_from_bytes(c) {
            // only a still-valid encoding may decode, and never to the active span
            assert_ne!(
                cx.span().span_context().span_id(),
                lens::otel::Context::current()
                    .span()
                    .span_context()
                    .span_id()
            );
        }
    }
}

#[test]
fn broadcast_gives_every_rank_the_same_carrier() {
    let f = fixture("all");
    let comms = LocalCollective::group(4);
    let root_span = span_cm!("step.rank0");
    let root_cx = lens::otel::Context::current();
    let carriers: Vec<Carrier> = std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .iter()
            .map(|c| {
                let root_cx = root_cx.clone();
                s.spawn(move || {
                    // only rank 0 has the step span current
                    let _g =
                        (lens::propagation::Collective::rank(c) == 0).then(|| root_cx.attach());
                    let carrier = broadcast_trace_context(c, 0).unwrap();
                    let _p = extract_context(&carrier).attach();
                    drop(span_cm!("step.worker"));
                    carrier
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    drop(root_span);
    assert!(carriers
        .iter()
        .all(|c| c == &carriers[0] && c.contains_key("traceparent")));
    let root = f.span("step.rank0");
    let workers: Vec<_> = f
        .spans()
        .into_iter()
        .filter(|s| s.name == "step.worker")
        .collect();
    assert_eq!(workers.len(), 4);
    for w in &workers {
        assert_child(w, &root);
    }
    // no active span on the root: everyone gets an empty carrier
    let comms = LocalCollective::group(2);
    let empty: Vec<Carrier> = std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .iter()
            .map(|c| s.spawn(move || broadcast_trace_context(c, 1).unwrap()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(empty.iter().all(Carrier::is_empty));
    assert!(broadcast_trace_context(&LocalCollective::group(1)[0], 3).is_err());
}

#[test]
fn linked_span_links_without_parenting() {
    let f = fixture("all");
    let sender_cx = {
        let s = span_cm!("send_forward");
        s.context().clone()
    };
    {
        let _stage = span_cm!("stage1.step");
        let recv = create_linked_span("recv_forward", &sender_cx, &[("microbatch", &2)]);
        drop(recv.enter());
    }
    let recv = f.span("recv_forward");
    let send = f.span("send_forward");
    assert_child(&recv, &f.span("stage1.step"));
    assert_eq!(recv.links.links.len(), 1);
    assert_eq!(
        recv.links.links[0].span_context.span_id(),
        send.span_context.span_id()
    );
    assert!(recv
        .attributes
        .iter()
        .any(|kv| kv.key.as_str() == "microbatch"));
    // no valid remote: no link
    drop(create_linked_span(
        "unlinked",
        &lens::otel::Context::new(),
        &[],
    ));
    assert!(f.span("unlinked").links.links.is_empty());
}

#[test]
fn pipeline_parallel_carrier_slot() {
    let _f = fixture("all");
    set_pp_trace_carrier(None);
    assert!(pp_trace_carrier().is_none());
    let _s = span_cm!("pp");
    set_pp_trace_carrier(Some(inject_context()));
    assert!(pp_trace_carrier().unwrap().contains_key("traceparent"));
    set_pp_trace_carrier(None);
}

#[test]
fn every_setup_path_installs_the_w3c_propagator() {
    let _f = fixture("all");
    // a disabled setup still installs it, so non-exporting ranks forward context
    let h = lens::setup_telemetry(lens::LensConfig::default(), 0, 1).unwrap();
    let _s = span_cm!("forwarded");
    let mut map = std::collections::HashMap::new();
    lens::otel::global::get_text_map_propagator(|p| {
        p.inject_context(&lens::otel::Context::current(), &mut map)
    });
    assert!(map.contains_key("traceparent"), "{map:?}");
    drop(h);
}

#[test]
fn hostile_carriers_never_panic_nor_yield_the_current_context() {
    let _f = fixture("all");
    let _active = span_cm!("active");
    let current = lens::otel::Context::current()
        .span()
        .span_context()
        .span_id();
    let good = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let many: Vec<String> = (0..40).map(|i| format!("k{i}=v{i}")).collect();
    let hostile: Vec<(String, String)> = vec![
        ("traceparent".into(), "x".repeat(100_000)),
        (
            "traceparent".into(),
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01é".into(),
        ),
        (
            "traceparent".into(),
            "00-0af7651916cd43dd8448eb211c8031-b7ad6b7169203331-01".into(),
        ),
        (
            "traceparent".into(),
            "00-00000000000000000000000000000000-b7ad6b7169203331-01".into(),
        ),
        (
            "traceparent".into(),
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01".into(),
        ),
        (
            "traceparent".into(),
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
        ),
        (
            "traceparent".into(),
            "0G-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
        ),
        ("traceparent".into(), good.to_uppercase()),
        ("traceparent".into(), "\u{0}\u{1}\u{2}".into()),
        ("traceparent".into(), String::new()),
    ];
    for (k, v) in &hostile {
        let mut c = Carrier::new();
        c.insert(k.clone(), v.clone());
        c.insert("tracestate".into(), many.join(","));
        c.insert("baggage".into(), "%%%,=,==,\u{7f}".repeat(1000));
        let cx = extract_context(&c);
        let sc = cx.span().span_context().clone();
        assert!(!sc.is_valid(), "{v:.80} must not parse");
        assert_ne!(sc.span_id(), current);
    }
    // a valid traceparent with 33+ tracestate members: parent kept, state dropped
    let mut c = Carrier::new();
    c.insert("traceparent".into(), good.into());
    c.insert("tracestate".into(), many.join(","));
    let cx = extract_context(&c);
    assert!(cx.span().span_context().is_valid());
    assert!(cx.span().span_context().trace_state().header().is_empty());
}

/// Bounded fuzzing of what a process reads from outside: the byte carrier
/// ([`context_from_bytes`]) and header extraction
/// ([`lens::propagation::extract_from`]). Each test runs `LENS_FUZZ_CASES`
/// cases (default 1,000,000) from a seeded xorshift generator
/// (`LENS_FUZZ_SEED`, default fixed), so every run is reproducible and a
/// failure names its case. Every case is checked against an independent
/// restatement of the rules: valid input gives the context it encodes,
/// anything else gives `None` (bytes) or a context without a span (headers),
/// never the caller's current context, never a panic. For 10 million cases:
///
/// ```text
/// LENS_FUZZ_CASES=10000000 cargo test --release -p tests --test propagation fuzz
/// ```
mod fuzz {
    use lens::otel::propagation::Extractor;
    use lens::otel::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use lens::otel::Context;
    use lens::propagation::{
        context_from_bytes, context_to_bytes, extract_context, extract_from, inject_into, Carrier,
    };

    /// The number of cases of each test.
    fn cases() -> u64 {
        std::env::var("LENS_FUZZ_CASES")
            .ok()
            .and_then(|v| v.replace('_', "").parse().ok())
            .unwrap_or(1_000_000)
    }

    fn seed() -> u64 {
        std::env::var("LENS_FUZZ_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0x9e37_79b9_7f4a_7c15)
    }

    /// xorshift64*: small, deterministic, no dependency.
    struct Rng(u64);

    impl Rng {
        fn new(seed: u64) -> Self {
            Rng(seed | 1)
        }
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
        fn one_in(&mut self, n: usize) -> bool {
            self.below(n) == 0
        }
        fn pick<T: Copy>(&mut self, items: &[T]) -> T {
            items[self.below(items.len())]
        }
        fn string(&mut self, len: usize, alphabet: &[char]) -> String {
            (0..len).map(|_| self.pick(alphabet)).collect()
        }
    }

    const HEX: &[char] = &[
        '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 'c', 'd', 'e', 'f',
    ];
    /// Characters that break a traceparent in the many ways the rules name.
    const HOSTILE: &[char] = &[
        'A', 'F', 'g', 'z', '-', '_', '.', ' ', '\t', '\n', '\0', '\u{7f}', 'é', '日', '0', 'f',
    ];

    /// An independent restatement of the traceparent rules.
    fn acceptable(value: &str) -> bool {
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
            && [2, 32, 16, 2]
                == [
                    parts[0].len(),
                    parts[1].len(),
                    parts[2].len(),
                    parts[3].len(),
                ]
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

    /// The trace id and parent id an acceptable traceparent carries.
    fn ids_of(value: &str) -> (TraceId, SpanId) {
        let v = value.trim_matches([' ', '\t']);
        (
            TraceId::from_hex(&v[3..35]).unwrap(),
            SpanId::from_hex(&v[36..52]).unwrap(),
        )
    }

    /// A valid traceparent, then up to three mutations of it.
    fn traceparent(r: &mut Rng) -> String {
        let version = match r.below(8) {
            0 => "cc".to_owned(),
            1 => "ff".to_owned(),
            2 => r.string(2, HEX),
            _ => "00".to_owned(),
        };
        let mut trace = r.string(32, HEX);
        let mut parent = r.string(16, HEX);
        if r.one_in(50) {
            trace = "0".repeat(32);
        }
        if r.one_in(50) {
            parent = "0".repeat(16);
        }
        let flags = r.string(2, HEX);
        let mut chars: Vec<char> = format!("{version}-{trace}-{parent}-{flags}")
            .chars()
            .collect();
        for _ in 0..r.pick(&[0, 0, 1, 1, 2, 3]) {
            let at = r.below(chars.len() + 1);
            match r.below(7) {
                0 if at < chars.len() => chars[at] = r.pick(HOSTILE),
                1 if at < chars.len() => {
                    chars.remove(at);
                }
                2 => chars.insert(at, r.pick(HOSTILE)),
                3 => chars.truncate(at),
                4 => {
                    let tail = r.pick(&["-", "-x", "-what-the-future-will-be-like", "x", "-é"]);
                    chars.extend(tail.chars());
                }
                5 => chars.iter_mut().for_each(|c| *c = c.to_ascii_uppercase()),
                _ => {
                    let ows = r.pick(&[" ", "\t", " \t", "\n"]);
                    chars.splice(0..0, ows.chars());
                    chars.extend(r.pick(&["", " ", "\t"]).chars());
                }
            }
        }
        chars.into_iter().collect()
    }

    /// A tracestate header: valid members mostly, some hostile ones,
    /// duplicated keys, occasionally more than 32 members or long ones.
    fn tracestate(r: &mut Rng) -> String {
        const KEY: &[char] = &[
            'a', 'z', '0', '9', '_', '-', '*', '/', '@', 'K', ' ', '.', 'é',
        ];
        const VALUE: &[char] = &['a', 'Z', '0', ' ', '!', '~', ',', '=', 'é', '\t', '\u{1}'];
        let n = match r.below(16) {
            0 => 30 + r.below(10),
            _ => r.below(6),
        };
        let members: Vec<String> = (0..n)
            .map(|i| {
                let key = match r.below(8) {
                    0 => {
                        let len = 1 + r.below(12);
                        r.string(len, KEY)
                    }
                    1 => "dup".to_owned(),
                    2 => format!("k{i}@vendor"),
                    _ => format!("k{i}"),
                };
                let value = match r.below(8) {
                    0 => {
                        let len = r.below(12);
                        r.string(len, VALUE)
                    }
                    1 => "v".repeat(250 + r.below(10)),
                    _ => format!("v{}", r.below(1000)),
                };
                match r.below(16) {
                    0 => String::new(),
                    1 => key,
                    _ => format!("{key}={value}"),
                }
            })
            .collect();
        members.join(r.pick(&[",", " , ", ",\t", ",,"]))
    }

    /// Headers as an HTTP server sees them: ordered, repeatable, names in
    /// any casing.
    struct Headers(Vec<(String, String)>);

    impl Extractor for Headers {
        fn get(&self, key: &str) -> Option<&str> {
            self.0
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v.as_str())
        }
        fn keys(&self) -> Vec<&str> {
            self.0.iter().map(|(k, _)| k.as_str()).collect()
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

    /// A remote context made current for the whole test: no result may be it.
    fn current() -> (lens::otel::ContextGuard, SpanId) {
        let id = SpanId::from(0x0123_4567_89ab_cdef);
        let sc = SpanContext::new(
            TraceId::from(0x42),
            id,
            TraceFlags::SAMPLED,
            true,
            TraceState::NONE,
        );
        (Context::new().with_remote_span_context(sc).attach(), id)
    }

    #[test]
    fn fuzz_header_extraction() {
        let (_current, current_id) = current();
        let mut r = Rng::new(seed());
        let mut accepted = 0u64;
        let n = cases();
        for case in 0..n {
            let tp = traceparent(&mut r);
            let mut headers = vec![("traceparent".to_owned(), tp.clone())];
            let duplicated = r.one_in(32);
            if duplicated {
                let name = r.pick(&["traceparent", "TraceParent"]);
                let value = if r.one_in(2) {
                    tp.clone()
                } else {
                    traceparent(&mut r)
                };
                headers.push((name.to_owned(), value));
            }
            for _ in 0..r.pick(&[0, 0, 1, 1, 1, 2, 3]) {
                let name = r.pick(&["tracestate", "TraceState"]);
                headers.push((name.to_owned(), tracestate(&mut r)));
            }
            if r.one_in(8) {
                let value = r.pick(&["k=v", "%%%,=,==", "a=1;p=2,b", "k=é", ""]);
                headers.push(("baggage".to_owned(), value.to_owned()));
            }
            if r.one_in(2) {
                // shuffle: the traceparent need not come first
                let i = r.below(headers.len());
                headers.swap(0, i);
            }
            let cx = extract_from(&Headers(headers));
            let span = cx.span();
            let sc = span.span_context();
            let expect = !duplicated && acceptable(&tp);
            assert_eq!(sc.is_valid(), expect, "case {case}: {tp:?}");
            assert_ne!(sc.span_id(), current_id, "case {case}");
            if !expect {
                continue;
            }
            accepted += 1;
            assert!(sc.is_remote());
            assert_eq!((sc.trace_id(), sc.span_id()), ids_of(&tp), "case {case}");
            let mut out = Carrier::new();
            inject_into(&cx, &mut out);
            assert!(acceptable(&out["traceparent"]), "case {case}");
            if let Some(state) = out.get("tracestate") {
                let members: Vec<&str> = state.split(',').collect();
                assert!(members.len() <= 32, "case {case}: {state}");
                for (i, m) in members.iter().enumerate() {
                    let key = m.split('=').next().unwrap_or_default();
                    assert!(
                        !members[..i]
                            .iter()
                            .any(|p| p.split('=').next() == Some(key)),
                        "case {case}: a key sent twice in {state}"
                    );
                }
            }
        }
        assert!(
            accepted * 10 > n,
            "the generator must also make valid input ({accepted} of {n})"
        );
    }

    /// Encodings of valid contexts: random ids and flags, tracestates from
    /// empty to over the 8,192-byte field limit, some baggage.
    fn seeds(r: &mut Rng) -> Vec<(Carrier, Vec<u8>)> {
        (0..256)
            .map(|i| {
                let mut c = Carrier::new();
                let trace = format!("{:016x}{:016x}", r.next(), r.next() | 1);
                let parent = format!("{:016x}", r.next() | 1);
                let flags = r.pick(&["00", "01", "02", "03"]);
                c.insert("traceparent".into(), format!("00-{trace}-{parent}-{flags}"));
                let n = if i % 16 == 0 { 32 } else { r.below(6) };
                let state: Vec<String> = (0..n)
                    .map(|k| {
                        let len = if i % 16 == 0 {
                            1 + r.below(256)
                        } else {
                            1 + r.below(20)
                        };
                        format!("k{k}={}", "v".repeat(len))
                    })
                    .collect();
                if !state.is_empty() {
                    c.insert("tracestate".into(), state.join(","));
                }
                if i % 4 == 0 {
                    c.insert("baggage".into(), format!("job=run{i},rank={}", r.below(64)));
                }
                let bytes = context_to_bytes(&extract_context(&c));
                (c, bytes)
            })
            .collect()
    }

    /// The three fields of a well-framed encoding (an independent
    /// restatement of the format).
    fn framed(bytes: &[u8]) -> Option<Vec<String>> {
        let mut rest = bytes.strip_prefix(b"LN1")?;
        let mut fields = Vec::new();
        for _ in 0..3 {
            let (len, tail) = rest.split_first_chunk::<2>()?;
            let len = usize::from(u16::from_be_bytes(*len));
            if len > 8192 || tail.len() < len {
                return None;
            }
            fields.push(String::from_utf8(tail[..len].to_vec()).ok()?);
            rest = &tail[len..];
        }
        rest.is_empty().then_some(fields)
    }

    #[test]
    fn fuzz_bytes_carrier() {
        let (_current, current_id) = current();
        let mut r = Rng::new(seed() ^ 0x5eed);
        let seeds = seeds(&mut r);
        // the seeds round-trip, tracestates cut to whole members
        for (carrier, bytes) in &seeds {
            let cx = context_from_bytes(bytes).expect("a seed decodes");
            let mut out = Carrier::new();
            inject_into(&cx, &mut out);
            assert_eq!(out["traceparent"], carrier["traceparent"]);
            let sent = carrier.get("tracestate").map_or("", String::as_str);
            let got = out.get("tracestate").map_or("", String::as_str);
            if sent.len() <= 8192 {
                assert_eq!(got, sent);
            } else {
                assert!(got.len() <= 8192 && sent.starts_with(got), "{got}");
                assert!(sent[got.len()..].starts_with(','), "whole members: {got}");
            }
            let members = |c: &Carrier| {
                let mut m: Vec<String> = c
                    .get("baggage")
                    .map(|b| b.split(',').map(str::to_owned).collect())
                    .unwrap_or_default();
                m.sort();
                m
            };
            assert_eq!(members(&out), members(carrier), "baggage, in any order");
        }
        let mut accepted = 0u64;
        let n = cases();
        for case in 0..n {
            let mut bytes = match r.below(8) {
                0 => {
                    // garbage, with or without the magic
                    let len = r.below(160);
                    let mut v = if r.one_in(2) {
                        b"LN1".to_vec()
                    } else {
                        Vec::new()
                    };
                    v.extend((0..len).map(|_| r.next() as u8));
                    v
                }
                _ => seeds[r.below(seeds.len())].1.clone(),
            };
            for _ in 0..r.pick(&[0, 1, 1, 1, 2, 3]) {
                let at = r.below(bytes.len() + 1);
                match r.below(8) {
                    0 if at < bytes.len() => bytes[at] ^= 1 << r.below(8),
                    1 if at < bytes.len() => bytes[at] = r.next() as u8,
                    2 => bytes.truncate(at),
                    3 => bytes.insert(at, r.next() as u8),
                    4 if at < bytes.len() => {
                        bytes.remove(at);
                    }
                    5 => {
                        let other = &seeds[r.below(seeds.len())].1;
                        let from = r.below(other.len());
                        bytes.truncate(at);
                        bytes.extend_from_slice(&other[from..]);
                    }
                    6 => {
                        // a length field: the first, or one in the middle
                        let at = if r.one_in(2) { 3 } else { at };
                        let len = r.pick(&[0u16, 1, 54, 55, 56, 8192, 8193, u16::MAX]);
                        if at + 2 <= bytes.len() {
                            bytes[at..at + 2].copy_from_slice(&len.to_be_bytes());
                        }
                    }
                    _ => bytes.extend((0..r.below(4)).map(|_| r.next() as u8)),
                }
            }
            let got = context_from_bytes(&bytes);
            let fields = framed(&bytes);
            let expect = fields.as_ref().is_some_and(|f| acceptable(&f[0]));
            assert_eq!(got.is_some(), expect, "case {case}: {bytes:?}");
            let (Some(cx), Some(fields)) = (got, fields) else {
                continue;
            };
            accepted += 1;
            let span = cx.span();
            let sc = span.span_context();
            assert!(sc.is_valid() && sc.is_remote(), "case {case}");
            assert_ne!(sc.span_id(), current_id, "case {case}");
            assert_eq!(
                (sc.trace_id(), sc.span_id()),
                ids_of(&fields[0]),
                "case {case}"
            );
        }
        assert!(
            accepted * 10 > n,
            "the mutations must leave some input valid ({accepted} of {n})"
        );
    }
}
