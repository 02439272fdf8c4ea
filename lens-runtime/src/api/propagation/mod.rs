//! Context propagation: W3C TraceContext + Baggage over string maps, HTTP
//! headers, environment variables and bytes; a broadcast of the trace
//! context over a collective; linked spans; the pipeline-parallel carrier.
//!
//! Extraction always starts from an empty context, never from the caller's
//! current one: invalid input gives a context without a remote parent.

pub mod w3c;

use crate::api::attr::AttributeValue;
use crate::api::span::{self, LensSpan};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{Link, SpanBuilder, TraceContextExt};
use opentelemetry::Context;
use opentelemetry_sdk::propagation::BaggagePropagator;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use w3c::W3cPropagator;

/// A string-map carrier (`traceparent`, `tracestate`, `baggage`).
pub type Carrier = HashMap<String, String>;

/// Environment variables that carry a context to a child process, as the
/// OpenTelemetry "environment variables as context propagation carriers"
/// specification names them.
pub const ENV_CARRIER_VARS: [(&str, &str); 3] = [
    ("traceparent", "TRACEPARENT"),
    ("tracestate", "TRACESTATE"),
    ("baggage", "BAGGAGE"),
];

fn inject_with(cx: &Context, injector: &mut dyn Injector) {
    W3cPropagator::new().inject_context(cx, injector);
    BaggagePropagator::new().inject_context(cx, injector);
}

fn extract_with(extractor: &dyn Extractor) -> Context {
    let cx = W3cPropagator::new().extract_with_context(&Context::new(), extractor);
    BaggagePropagator::new().extract_with_context(&cx, extractor)
}

/// Injects `cx` (its span and baggage) into any OpenTelemetry injector.
///
/// ```
/// let mut map = std::collections::HashMap::new();
/// lens_runtime::propagation::inject_into(&lens_runtime::otel::Context::current(), &mut map);
/// ```
pub fn inject_into(cx: &Context, injector: &mut dyn Injector) {
    inject_with(cx, injector);
}

/// Extracts a context from any OpenTelemetry extractor (starting from an
/// empty context).
///
/// ```
/// let map = std::collections::HashMap::new();
/// let cx = lens_runtime::propagation::extract_from(&map);
/// # let _ = cx;
/// ```
pub fn extract_from(extractor: &dyn Extractor) -> Context {
    extract_with(extractor)
}

/// The current context as a carrier: empty when no span is active.
///
/// ```
/// use lens_runtime::propagation::inject_context;
/// assert!(inject_context().is_empty()); // no active span
/// ```
pub fn inject_context() -> Carrier {
    let mut map = Carrier::new();
    inject_with(&Context::current(), &mut map);
    map
}

/// The context of a carrier; a carrier without a valid `traceparent` gives
/// a context without a remote parent (never the caller's current context).
///
/// ```
/// use lens_runtime::otel::trace::TraceContextExt;
/// use lens_runtime::propagation::{extract_context, Carrier};
/// let mut c = Carrier::new();
/// c.insert("traceparent".into(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into());
/// assert!(extract_context(&c).span().span_context().is_remote());
/// c.insert("traceparent".into(), "garbage".into());
/// assert!(!extract_context(&c).span().span_context().is_valid());
/// ```
pub fn extract_context(carrier: &Carrier) -> Context {
    extract_with(carrier)
}

/// `(name, value)` environment pairs (`TRACEPARENT`, `TRACESTATE`,
/// `BAGGAGE`) carrying the current context to a child process, e.g. through
/// `Command::envs`, `srun` or `mpirun -x`.
///
/// ```
/// let mut cmd = std::process::Command::new("true");
/// cmd.envs(lens_runtime::propagation::env_for_child());
/// ```
pub fn env_for_child() -> Vec<(String, String)> {
    let carrier = inject_context();
    ENV_CARRIER_VARS
        .iter()
        .filter_map(|(k, var)| carrier.get(*k).map(|v| ((*var).to_owned(), v.clone())))
        .collect()
}

struct EnvCarrier(Carrier);

impl Extractor for EnvCarrier {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(&key.to_ascii_lowercase()).map(String::as_str)
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// The context a launcher handed to this process through `TRACEPARENT`,
/// `TRACESTATE` and `BAGGAGE` (an empty context if absent or invalid).
/// Attach it to parent this process's spans on the launcher's trace.
///
/// ```
/// let _guard = lens_runtime::propagation::context_from_env().attach();
/// ```
pub fn context_from_env() -> Context {
    context_from_env_lookup(|v| std::env::var(v).ok())
}

/// [`context_from_env`] reading variables through `lookup`.
pub fn context_from_env_lookup(lookup: impl Fn(&str) -> Option<String>) -> Context {
    let map = ENV_CARRIER_VARS
        .iter()
        .filter_map(|(k, var)| lookup(var).map(|v| ((*k).to_owned(), v)))
        .collect();
    extract_with(&EnvCarrier(map))
}

/// An `http::HeaderMap` carrier (feature `http`).
#[cfg(feature = "http")]
pub mod http {
    use super::*;

    /// Injects the current context into `headers`.
    ///
    /// ```
    /// let mut headers = http::HeaderMap::new();
    /// lens_runtime::propagation::http::inject_headers(&mut headers);
    /// ```
    pub fn inject_headers(headers: &mut ::http::HeaderMap) {
        inject_with(
            &Context::current(),
            &mut opentelemetry_http::HeaderInjector(headers),
        );
    }

    /// The context of `headers` (repeated `tracestate` headers are combined;
    /// duplicated `traceparent` headers are invalid).
    ///
    /// ```
    /// let headers = http::HeaderMap::new();
    /// let cx = lens_runtime::propagation::http::extract_headers(&headers);
    /// # let _ = cx;
    /// ```
    pub fn extract_headers(headers: &::http::HeaderMap) -> Context {
        extract_with(&opentelemetry_http::HeaderExtractor(headers))
    }
}

const MAGIC: &[u8; 3] = b"LN1";
/// The most bytes of one field (traceparent, tracestate, baggage) in the
/// byte carrier; a decoder rejects a longer one.
const MAX_FIELD: usize = 8192;
/// `tracestate` members longer than this are the first dropped to fit (W3C
/// Trace Context, "tracestate Limits").
const LONG_TRACESTATE_MEMBER: usize = 128;

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
/// use lens_runtime::propagation::{
///     context_from_bytes, context_to_bytes, extract_context, inject_into, Carrier,
/// };
/// assert!(context_to_bytes(&lens_runtime::otel::Context::new()).is_empty());
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
/// ```
pub fn context_to_bytes(cx: &Context) -> Vec<u8> {
    if !cx.span().span_context().is_valid() {
        return Vec::new();
    }
    let mut map = Carrier::new();
    inject_with(cx, &mut map);
    encode_carrier(&map)
}

fn encode_carrier(map: &Carrier) -> Vec<u8> {
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
fn fit_field<'a>(name: &str, value: &'a str) -> Cow<'a, str> {
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
fn fit_members(value: &str, max: usize, long: usize) -> String {
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

fn decode_carrier(bytes: &[u8]) -> Option<Carrier> {
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

/// The context serialised by [`context_to_bytes`]; any other input
/// (garbage, truncation, an invalid traceparent) gives `None`, never a panic
/// and never the caller's current context.
///
/// ```
/// use lens_runtime::propagation::{context_from_bytes, context_to_bytes};
/// let span = lens_runtime::span::start_detached("send", Vec::new());
/// let bytes = context_to_bytes(span.context());
/// # let _ = context_from_bytes(&bytes);
/// ```
pub fn context_from_bytes(bytes: &[u8]) -> Option<Context> {
    let map = decode_carrier(bytes)?;
    let cx = extract_with(&map);
    cx.span().span_context().is_valid().then_some(cx)
}

/// Starts a span, child of the current context, with a Link (not a parent)
/// to the span of `remote` — e.g. a pipeline stage's `recv_forward` linked
/// to the sender's span. A `remote` without a valid span gives no link.
///
/// ```
/// use lens_runtime::propagation::create_linked_span;
/// let sender = lens_runtime::span::start_detached("send_forward", Vec::new());
/// let recv = create_linked_span("recv_forward", sender.context(), &[("microbatch", &3)]);
/// # drop(recv);
/// ```
pub fn create_linked_span(
    name: impl Into<Cow<'static, str>>,
    remote: &Context,
    attributes: &[(&str, &dyn AttributeValue)],
) -> LensSpan {
    let attrs = crate::api::attr::collect(attributes);
    let sc = remote.span().span_context().clone();
    let mut builder = SpanBuilder::from_name(name).with_attributes(attrs);
    if sc.is_valid() {
        builder = builder.with_links(vec![Link::with_context(sc)]);
    }
    span::start_detached_builder(builder)
}

static PP_CARRIER: Mutex<Option<Carrier>> = Mutex::new(None);

/// Stores a carrier for pipeline-parallel stages of this process to pick up
/// (`None` clears it).
///
/// ```
/// use lens_runtime::propagation::{pp_trace_carrier, set_pp_trace_carrier, inject_context};
/// set_pp_trace_carrier(Some(inject_context()));
/// assert!(pp_trace_carrier().is_some());
/// set_pp_trace_carrier(None);
/// ```
pub fn set_pp_trace_carrier(carrier: Option<Carrier>) {
    *PP_CARRIER.lock().unwrap_or_else(|e| e.into_inner()) = carrier;
}

/// The carrier stored by [`set_pp_trace_carrier`].
pub fn pp_trace_carrier() -> Option<Carrier> {
    PP_CARRIER.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// A failed collective operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectiveError(pub String);

impl fmt::Display for CollectiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "collective failed: {}", self.0)
    }
}

impl std::error::Error for CollectiveError {}

/// The one collective lens needs: broadcast bytes from a root rank.
/// Implemented for MPI (feature `mpi`) and in-process threads
/// ([`LocalCollective`]); implement it for your own communicator (NCCL,
/// Gloo, a key-value store) to use [`broadcast_trace_context`].
pub trait Collective {
    /// This process's rank in the communicator.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn size(&self) -> usize;
    /// Every rank calls this; every rank returns `root`'s `data` (the
    /// `data` of other ranks is ignored).
    fn broadcast_bytes(&self, root: usize, data: Vec<u8>) -> Result<Vec<u8>, CollectiveError>;
}

/// Broadcasts `src_rank`'s current trace context to every rank: **a
/// collective — every rank must call it**. Every rank gets the same carrier
/// (empty when `src_rank` has no active span; fields that do not fit lose
/// whole list members, as in [`context_to_bytes`]). Attach
/// `extract_context(&carrier)` to parent spans on the shared trace.
///
/// ```
/// use lens_runtime::propagation::{broadcast_trace_context, LocalCollective};
/// let comms = LocalCollective::group(2);
/// let got: Vec<_> = std::thread::scope(|s| {
///     let hs: Vec<_> = comms.iter().map(|c| s.spawn(move || broadcast_trace_context(c, 0).unwrap())).collect();
///     hs.into_iter().map(|h| h.join().unwrap()).collect()
/// });
/// assert_eq!(got[0], got[1]);
/// ```
pub fn broadcast_trace_context(
    comm: &dyn Collective,
    src_rank: usize,
) -> Result<Carrier, CollectiveError> {
    if src_rank >= comm.size() {
        return Err(CollectiveError(format!(
            "src_rank {src_rank} is not below the world size {}",
            comm.size()
        )));
    }
    let payload = if comm.rank() == src_rank {
        encode_carrier(&inject_context())
    } else {
        Vec::new()
    };
    let bytes = comm.broadcast_bytes(src_rank, payload)?;
    Ok(decode_carrier(&bytes).unwrap_or_default())
}

/// An in-process [`Collective`] over threads, for tests and single-process
/// simulations of a job.
#[derive(Debug, Clone)]
pub struct LocalCollective {
    rank: usize,
    shared: std::sync::Arc<LocalShared>,
}

#[derive(Debug)]
struct LocalShared {
    size: usize,
    barrier: std::sync::Barrier,
    slot: Mutex<Vec<u8>>,
}

impl LocalCollective {
    /// `size` communicators, one per thread-rank.
    pub fn group(size: usize) -> Vec<LocalCollective> {
        let shared = std::sync::Arc::new(LocalShared {
            size,
            barrier: std::sync::Barrier::new(size),
            slot: Mutex::new(Vec::new()),
        });
        (0..size)
            .map(|rank| LocalCollective {
                rank,
                shared: shared.clone(),
            })
            .collect()
    }
}

impl Collective for LocalCollective {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.shared.size
    }
    fn broadcast_bytes(&self, root: usize, data: Vec<u8>) -> Result<Vec<u8>, CollectiveError> {
        if self.rank == root {
            *self.shared.slot.lock().unwrap_or_else(|e| e.into_inner()) = data;
        }
        self.shared.barrier.wait();
        let out = self
            .shared
            .slot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        self.shared.barrier.wait();
        Ok(out)
    }
}

/// [`Collective`] over an MPI communicator (feature `mpi`).
#[cfg(feature = "mpi")]
pub mod mpi_collective {
    use super::{Collective, CollectiveError};
    use mpi::topology::Communicator;
    use mpi::traits::Root;

    /// Wraps any rsmpi communicator (e.g. `universe.world()`).
    #[derive(Debug)]
    pub struct MpiCollective<C: Communicator>(pub C);

    impl<C: Communicator> Collective for MpiCollective<C> {
        fn rank(&self) -> usize {
            self.0.rank() as usize
        }
        fn size(&self) -> usize {
            self.0.size() as usize
        }
        fn broadcast_bytes(&self, root: usize, data: Vec<u8>) -> Result<Vec<u8>, CollectiveError> {
            let root_i32 = i32::try_from(root)
                .map_err(|_| CollectiveError(format!("root {root} out of range")))?;
            let proc = self.0.process_at_rank(root_i32);
            let mut len = data.len() as u64;
            proc.broadcast_into(&mut len);
            let mut buf = if self.rank() == root {
                data
            } else {
                vec![0u8; len as usize]
            };
            proc.broadcast_into(&mut buf[..]);
            Ok(buf)
        }
    }
}

/// Installs the W3C TraceContext + Baggage propagator as the global
/// propagator (the Rust SDK's default global propagator does nothing).
pub(crate) fn install_global() {
    use opentelemetry::propagation::TextMapCompositePropagator;
    use opentelemetry_sdk::propagation::BaggagePropagator;
    opentelemetry::global::set_text_map_propagator(TextMapCompositePropagator::new(vec![
        Box::new(W3cPropagator::new()),
        Box::new(BaggagePropagator::new()),
    ]));
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn blank_members_and_spaces_are_left_out() {
        assert_eq!(fit_members(" a=1 ,, \t,b=2\t", 100, 128), "a=1,b=2");
        assert_eq!(fit_members(",,,", 100, 128), "");
        assert_eq!(fit_members("a=1", 2, 128), "");
    }

    #[test]
    fn utf8_is_never_cut() {
        // baggage properties are not percent-encoded by the SDK
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
