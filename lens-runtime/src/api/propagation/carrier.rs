//! Carriers: string maps, HTTP headers, environment variables; linked spans and the pipeline-parallel carrier slot.

pub(super) use super::wire::{extract_with, inject_with};
use crate::api::attr::AttributeValue;
use crate::api::span::{self, LensSpan};
use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::{Link, SpanBuilder, TraceContextExt};
use opentelemetry::Context;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Mutex;
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

/// Injects `cx` (its span and baggage) into any OpenTelemetry injector.
///
/// ```
/// let mut map = std::collections::HashMap::new();
/// lens::propagation::inject_into(&lens::otel::Context::current(), &mut map);
/// ```
pub fn inject_into(cx: &Context, injector: &mut dyn Injector) {
    inject_with(cx, injector);
}

/// Extracts a context from any OpenTelemetry extractor (starting from an
/// empty context).
///
/// ```
/// let map = std::collections::HashMap::new();
/// let cx = lens::propagation::extract_from(&map);
/// # let _ = cx;
/// ```
pub fn extract_from(extractor: &dyn Extractor) -> Context {
    extract_with(extractor)
}

/// The current context as a carrier: empty when no span is active.
///
/// ```
/// use lens::propagation::inject_context;
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
/// use lens::otel::trace::TraceContextExt;
/// use lens::{propagation::extract_context, propagation::Carrier};
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
/// cmd.envs(lens::propagation::env_for_child());
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
/// let _guard = lens::propagation::context_from_env().attach();
/// ```
pub fn context_from_env() -> Context {
    context_from_env_lookup(crate::vars::raw)
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
    use crate::api::propagation::carrier::*;

    /// Injects the current context into `headers`.
    ///
    /// ```
    /// let mut headers = http::HeaderMap::new();
    /// lens::propagation::http::inject_headers(&mut headers);
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
    /// let cx = lens::propagation::http::extract_headers(&headers);
    /// # let _ = cx;
    /// ```
    pub fn extract_headers(headers: &::http::HeaderMap) -> Context {
        extract_with(&opentelemetry_http::HeaderExtractor(headers))
    }

    #[cfg(feature = "reqwest")]
    pub use crate::api::propagation::client::ClientSpans;

    /// Client injection for `reqwest` (feature `reqwest`): a request that
    /// carries the current context (`traceparent`, `tracestate`, `baggage`).
    /// It makes no span; [`ClientSpans`] makes a CLIENT span per request
    /// and sends that span's context.
    ///
    /// ```
    /// use lens::propagation::http::InjectContext as _;
    /// let client = reqwest::Client::new();
    /// let _span = lens::span_cm!("call");
    /// let request = client.get("http://127.0.0.1:9/").inject_context();
    /// # drop(request);
    /// ```
    #[cfg(feature = "reqwest")]
    pub trait InjectContext {
        /// Adds the current context's headers.
        fn inject_context(self) -> Self;
    }

    #[cfg(feature = "reqwest")]
    impl InjectContext for reqwest::RequestBuilder {
        fn inject_context(self) -> Self {
            let mut headers = ::http::HeaderMap::new();
            inject_headers(&mut headers);
            self.headers(headers)
        }
    }
}

/// Starts a span, child of the current context, with a Link (not a parent)
/// to the span of `remote` — e.g. a pipeline stage's `recv_forward` linked
/// to the sender's span. A `remote` without a valid span gives no link.
///
/// ```
/// use lens::propagation::create_linked_span;
/// let sender = lens::detached_span("send_forward");
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
    span::start::start_detached_builder(builder)
}

static PP_CARRIER: Mutex<Option<Carrier>> = Mutex::new(None);

/// Stores a carrier for pipeline-parallel stages of this process to pick up
/// (`None` clears it).
///
/// ```
/// use lens::{propagation::pp_trace_carrier, propagation::set_pp_trace_carrier, propagation::inject_context};
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
