//! Wire formats against the Python OpenTelemetry SDK (1.45.2) as a peer: the
//! W3C carrier map and the byte carrier built the way the Python library
//! builds it for NCCL (`json.dumps(carrier).encode("utf-8")`), both ways,
//! with baggage values that need encoding.

use lens::otel::baggage::BaggageExt;
use lens::otel::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use lens::otel::{Context, KeyValue};
use lens::propagation::{context_from_bytes, context_to_json_bytes, extract_context, Carrier};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::Stdio;

const PEER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/python/carrier.py");

/// Values that a naive encoder corrupts: spaces, `+`, `%` (alone and before
/// hex digits), the list and property separators, `=`, non-ASCII text.
fn awkward() -> BTreeMap<String, String> {
    [
        ("space", "with spaces"),
        ("plus", "1+1=2"),
        ("percent", "100%"),
        ("escape_like", "%41%2B"),
        ("comma", "a,b"),
        ("semicolon", "a;b"),
        ("equals", "k=v"),
        ("non_ascii", "é ü 日本 😀"),
        ("all", "x +%,;= é"),
        ("plain", "run-7_a.b~c"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

fn python(args: &[&str], stdin: Option<&str>) -> Value {
    let mut child = tests::clean_command("python3")
        .arg(PEER)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs (.ci/run installs it with the OpenTelemetry SDK)");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the peer prints JSON")
}

fn baggage_of(cx: &Context) -> BTreeMap<String, String> {
    cx.baggage()
        .iter()
        .map(|(k, (v, _))| (k.to_string(), v.to_string()))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn python_to_rust_through_the_map_and_the_byte_carrier() {
    let sent = awkward();
    let py = python(&["inject", &serde_json::to_string(&sent).unwrap()], None);
    let carrier: Carrier = serde_json::from_value(py["http"].clone()).unwrap();
    // Python writes a space as `+` and a `+` as `%2B`
    assert!(
        carrier["baggage"].contains("space=with+spaces"),
        "{carrier:?}"
    );
    let bytes = unhex(py["bytes_hex"].as_str().unwrap());
    assert!(bytes.starts_with(b"{\"traceparent\": \"00-"), "{bytes:?}");
    for (how, cx) in [
        ("map", extract_context(&carrier)),
        (
            "bytes",
            context_from_bytes(&bytes).expect("the JSON carrier decodes"),
        ),
    ] {
        let sc = cx.span().span_context().clone();
        assert!(sc.is_remote(), "{how}");
        assert_eq!(sc.trace_id().to_string(), py["trace_id"], "{how}");
        assert_eq!(sc.span_id().to_string(), py["span_id"], "{how}");
        assert_eq!(baggage_of(&cx), sent, "{how}");
    }
}

#[test]
fn rust_to_python_through_the_map_and_the_byte_carrier() {
    let sent = awkward();
    let sc = SpanContext::new(
        TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap(),
        SpanId::from_hex("b7ad6b7169203331").unwrap(),
        TraceFlags::SAMPLED,
        true,
        TraceState::from_key_value([("ro", "1"), ("lens", "x")]).unwrap(),
    );
    let cx = Context::new().with_remote_span_context(sc).with_baggage(
        sent.iter()
            .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
            .collect::<Vec<_>>(),
    );
    let mut carrier = Carrier::new();
    lens::propagation::inject_into(&cx, &mut carrier);
    let bytes = context_to_json_bytes(&cx);
    let input = json!({"http": carrier, "bytes_hex": hex(&bytes)}).to_string();
    let py = python(&["extract"], Some(&input));
    for how in ["http", "bytes"] {
        let seen = &py[how];
        assert_eq!(seen["valid"], true, "{how}: {py}");
        assert_eq!(
            seen["trace_id"], "0af7651916cd43dd8448eb211c80319c",
            "{how}"
        );
        assert_eq!(seen["span_id"], "b7ad6b7169203331", "{how}");
        let got: BTreeMap<String, String> =
            serde_json::from_value(seen["baggage"].clone()).unwrap();
        assert_eq!(got, sent, "{how}");
    }
    // Python's json.loads reads the same map lens injects
    let map: Carrier = serde_json::from_value(py["bytes_map"].clone()).unwrap();
    assert_eq!(map, carrier);
    assert_eq!(map["tracestate"], "ro=1,lens=x");
}

/// The JSON form lens writes is byte for byte what Python's `json.dumps`
/// writes for the same context, so either side may compare or hash carriers.
#[test]
fn json_bytes_equal_pythons_for_the_same_context() {
    let mut carrier = Carrier::new();
    carrier.insert(
        "traceparent".into(),
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
    );
    carrier.insert("tracestate".into(), "ro=1,lens=x".into());
    // one member (the Rust API keeps baggage in a hash map, so the order of
    // several members differs; docs/PARITY.md), with a value both languages
    // encode alike (no space, which Python writes as `+`)
    carrier.insert("baggage".into(), "path=%2Fdata%2Fx%3Bv%3D1".into());
    let ours = context_to_json_bytes(&extract_context(&carrier));
    let py = python(
        &["reencode"],
        Some(&serde_json::to_string(&carrier).unwrap()),
    );
    let theirs = unhex(py["bytes_hex"].as_str().unwrap());
    assert_eq!(
        String::from_utf8(ours).unwrap(),
        String::from_utf8(theirs).unwrap()
    );
}
