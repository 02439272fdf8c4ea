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
    // a deterministic pseudo-random sweep
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % 96) as usize;
        let mut v = b"LN1".to_vec();
        for i in 0..len {
            v.push((x.rotate_left(i as u32 % 64) & 0xff) as u8);
        }
        cases.push(v);
    }
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
