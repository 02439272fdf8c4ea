//! Context propagation: W3C TraceContext + Baggage over string maps, HTTP
//! headers, environment variables and bytes; a broadcast of the trace
//! context over a collective; linked spans; the pipeline-parallel carrier.
//!
//! Extraction always starts from an empty context, never from the caller's
//! current one: invalid input gives a context without a remote parent.

mod baggage;
mod bytes;
mod carrier;
#[cfg(feature = "reqwest")]
mod client;
mod collective;
mod json;
pub mod w3c;
mod wire;

pub use bytes::{context_from_bytes, context_to_bytes, context_to_json_bytes};
#[cfg(feature = "http")]
pub use carrier::http;
pub use carrier::{
    context_from_env, context_from_env_lookup, create_linked_span, env_for_child, extract_context,
    extract_from, inject_context, inject_into, pp_trace_carrier, set_pp_trace_carrier, Carrier,
    ENV_CARRIER_VARS,
};
#[cfg(feature = "mpi")]
pub use collective::mpi_collective;
pub use collective::{broadcast_trace_context, Collective, CollectiveError, LocalCollective};

#[cfg(feature = "sdk-core")]
use w3c::W3cPropagator;

/// Installs the global propagator: W3C TraceContext and / or Baggage, as
/// `OTEL_PROPAGATORS` chose (both by default; neither: one that carries
/// nothing). The Rust SDK's default global propagator does nothing.
#[cfg(feature = "sdk-core")]
pub(crate) fn install_global(trace_context: bool, baggage: bool) {
    use baggage::BaggagePropagator;
    use opentelemetry::propagation::TextMapCompositePropagator;
    use opentelemetry::propagation::TextMapPropagator;
    let mut parts: Vec<Box<dyn TextMapPropagator + Send + Sync>> = Vec::new();
    if trace_context {
        parts.push(Box::new(W3cPropagator::new()));
    }
    if baggage {
        parts.push(Box::new(BaggagePropagator::new()));
    }
    opentelemetry::global::set_text_map_propagator(TextMapCompositePropagator::new(parts));
}

#[cfg(test)]
mod tests {
    use super::bytes::*;
    use super::carrier::*;

    fn members(n: usize, value_len: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("k{i:02}={}", "v".repeat(value_len)))
            .collect()
    }

    #[test]
    fn short_fields_are_kept_as_they_are() {
        let exact = "x".repeat(MAX_FIELD);
        for name in ["traceparent", "tracestate", "baggage"] {
            assert_eq!(fit_field(name, "a=1 , b=2"), "a=1 , b=2");
            assert_eq!(fit_field(name, &exact), exact);
        }
    }

    #[test]
    fn members_are_dropped_from_the_end() {
        let all = members(32, 256); // 32 * 261 - 1 = 8351 bytes
        assert_eq!(fit_field("tracestate", &all.join(",")), all[..31].join(","));
        assert_eq!(fit_field("baggage", &all.join(",")), all[..31].join(","));
        // two members of 4,095 bytes (8,191 joined) fit, a third does not
        let a = format!("a={}", "v".repeat(4093));
        let b = format!("b={}", "v".repeat(4093));
        let c = "c=1".to_owned();
        let list = [a.as_str(), b.as_str(), c.as_str()].join(",");
        assert_eq!(
            fit_members(&list, MAX_FIELD, usize::MAX),
            format!("{a},{b}")
        );
        assert_eq!(format!("{a},{b}").len(), MAX_FIELD - 1);
    }

    #[test]
    fn long_tracestate_members_go_first_last_first() {
        let short: Vec<String> = (0..40).map(|i| format!("s{i:02}=1")).collect();
        let long: Vec<String> = (0..3)
            .map(|i| format!("l{i}={}", "v".repeat(200)))
            .collect();
        // short, long0, short, long1, short, long2, short
        let list = [
            &short[..10],
            &long[..1],
            &short[10..20],
            &long[1..2],
            &short[20..30],
            &long[2..3],
            &short[30..],
        ]
        .concat()
        .join(",");
        // needs 150 bytes: long2 goes (204 bytes), the rest stays in order
        let fitted = fit_members(&list, list.len() - 150, LONG_TRACESTATE_MEMBER);
        assert_eq!(fitted, list.replace(&format!(",{}", long[2]), ""));
        // needs 300 bytes: long2 and long1
        let fitted = fit_members(&list, list.len() - 300, LONG_TRACESTATE_MEMBER);
        assert_eq!(
            fitted,
            list.replace(&format!(",{}", long[2]), "")
                .replace(&format!(",{}", long[1]), "")
        );
        // needs more than all long members: then short ones from the end
        let without_long = [&short[..10], &short[10..20], &short[20..30], &short[30..]]
            .concat()
            .join(",");
        let fitted = fit_members(&list, without_long.len() - 10, LONG_TRACESTATE_MEMBER);
        assert_eq!(fitted, short[..38].join(","));
        // baggage has no long-member rule: strictly from the end
        let fitted = fit_members(&list, list.len() - 150, usize::MAX);
        assert!(list.starts_with(&fitted) && fitted.len() <= list.len() - 150);
        assert!(list[fitted.len()..].starts_with(','));
    }

    #[test]
    fn json_carrier_holds_the_w3c_fields_only() {
        let mut map = Carrier::new();
        map.insert("baggage".into(), "k=v".into());
        map.insert("other".into(), "x".into());
        map.insert("tracestate".into(), String::new());
        map.insert("traceparent".into(), "00-ab-01".into());
        let bytes = encode_json_carrier(&map);
        assert_eq!(
            bytes,
            br#"{"traceparent": "00-ab-01", "baggage": "k=v"}"#.to_vec()
        );
        let back = decode_json_carrier(br#"{"x":"1","baggage":"a","baggage":"b"}"#).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(
            back["baggage"], "b",
            "a later duplicate wins, as in json.loads"
        );
        let long = format!("{{\"baggage\":\"{}\"}}", "x".repeat(MAX_FIELD + 1));
        assert_eq!(decode_json_carrier(long.as_bytes()), None);
        // a list field over the limit loses whole members on the way out
        map.insert("baggage".into(), members(80, 200).join(","));
        let back = decode_json_carrier(&encode_json_carrier(&map)).unwrap();
        assert!(back["baggage"].len() <= MAX_FIELD);
    }

    #[test]
    fn blank_members_and_spaces_are_left_out() {
        assert_eq!(fit_members(" a=1 ,, \t,b=2\t", 100, 128), "a=1,b=2");
        assert_eq!(fit_members(",,,", 100, 128), "");
        assert_eq!(fit_members("a=1", 2, 128), "");
    }

    #[test]
    fn utf8_is_never_cut() {
        // baggage properties are not percent-encoded (W3C: they are sent as given)
        let member = |i: usize| format!("k{i}=v;p={}", "é".repeat(100));
        let list: Vec<String> = (0..60).map(member).collect();
        let joined = list.join(",");
        assert!(joined.len() > MAX_FIELD);
        let fitted = fit_field("baggage", &joined);
        assert!(fitted.len() <= MAX_FIELD);
        let kept: Vec<&str> = fitted.split(',').collect();
        assert_eq!(kept, list[..kept.len()]);
        // a too-long traceparent is left out, not cut
        assert_eq!(fit_field("traceparent", &"é".repeat(MAX_FIELD)), "");
    }

    #[test]
    fn encoded_fields_never_exceed_the_limit() {
        let mut map = Carrier::new();
        map.insert("traceparent".into(), "x".repeat(MAX_FIELD + 1));
        map.insert("tracestate".into(), members(40, 256).join(","));
        map.insert("baggage".into(), members(80, 200).join(","));
        let bytes = encode_carrier(&map);
        let back = decode_carrier(&bytes).expect("decodes");
        assert!(!back.contains_key("traceparent"));
        assert_eq!(back["tracestate"], members(31, 256).join(","));
        let baggage = &back["baggage"];
        assert!(baggage.len() <= MAX_FIELD);
        assert_eq!(
            baggage,
            &members(80, 200)[..baggage.split(',').count()].join(",")
        );
    }
}
