//! Client spans for `reqwest` (feature `reqwest`): a `reqwest-middleware`
//! middleware that makes one CLIENT span per request and sends its context.

use crate::api::groups::SpanGroup;
use crate::api::span::exception::record_exception;
use crate::api::span::opts::start_detached_with;
use crate::api::span::{LensSpan, SpanStatus};
use opentelemetry::context::FutureExt as _;
use opentelemetry::trace::SpanKind;
use opentelemetry::{Context, KeyValue};
use reqwest::{Request, Response, Url};
use reqwest_middleware::{Middleware, Next};

/// A `reqwest-middleware` middleware: one CLIENT span per request sent
/// through a `reqwest_middleware::ClientWithMiddleware`, when `group` is
/// enabled (the group is checked per request, as `lens::serving::ServerLayer`
/// does).
///
/// * **Parent**: the current context when the request is sent; the request
///   carries the CLIENT span's context (`traceparent`, `tracestate`,
///   `baggage`), so the server's span is its child. With the group off
///   there is no span and the request carries the current context, as
///   [`InjectContext`](super::carrier::http::InjectContext) does.
/// * **Name and attributes**, by the HTTP client semantic conventions:
///   `{method}` (`HTTP` for a method outside the standard ones);
///   `http.request.method` (`_OTHER` plus `http.request.method_original`
///   for those), `server.address`, `server.port`, `url.full`,
///   `http.response.status_code`, `network.protocol.version`.
/// * **`url.full` is redacted**: user name and password become
///   `REDACTED:REDACTED`, every query value becomes `REDACTED` (the keys
///   stay) and the fragment is dropped. Query strings often carry
///   credentials (signed URLs, API keys) and nothing in the middleware can
///   tell which do; the same redaction applies to the URL in an error's
///   message.
/// * **Status**: ERROR, with `error.type` set to the status code, on a 4xx
///   or 5xx response (a client's view, per the conventions); on a transport
///   error ERROR with an `exception` event and `error.type` one of
///   `timeout`, `connect`, `redirect`, `body`, `decode`, `request`,
///   `builder` (from `reqwest::Error`'s kind), or `_OTHER` (an error from
///   another middleware).
/// * **Context**: the span is current while the rest of the chain runs.
///   Add `ClientSpans` after a retry middleware, so that each try gets its
///   own span as the conventions ask.
///
/// Needs `reqwest-middleware = "0.5"` (the line for `reqwest` 0.13) in the
/// application's dependencies; [`InjectContext`](super::carrier::http::InjectContext)
/// is the choice for a plain `reqwest::Client` (context only, no span).
///
/// ```no_run
/// use lens::propagation::http::ClientSpans;
/// # async fn call() -> Result<(), reqwest_middleware::Error> {
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(ClientSpans::new(&lens::nemo_gym::ROLLOUT_COLLECTION))
///     .build();
/// let _job = lens::span_cm!("rollout");
/// // a CLIENT span "POST", child of `rollout`, parent of the server's span
/// let response = client.post("http://127.0.0.1:8000/run").body("{}").send().await?;
/// # drop(response);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ClientSpans {
    group: &'static SpanGroup,
}

impl ClientSpans {
    /// Spans gated by `group`.
    ///
    /// ```
    /// let spans = lens::propagation::http::ClientSpans::new(&lens::groups::JOB);
    /// # drop(spans);
    /// ```
    pub fn new(group: &'static SpanGroup) -> Self {
        ClientSpans { group }
    }
}

/// The methods the HTTP semantic conventions know; any other is `_OTHER`.
const KNOWN_METHODS: [&str; 9] = [
    "CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE",
];

/// `url` for `url.full`: credentials and query values replaced by
/// `REDACTED`, no fragment.
pub(crate) fn redact_url(url: &Url) -> String {
    let mut u = url.clone();
    u.set_fragment(None);
    if !u.username().is_empty() || u.password().is_some() {
        // only fails for URLs that cannot have credentials (then none are set)
        let _ = u.set_username("REDACTED");
        let _ = u.set_password(Some("REDACTED"));
    }
    if let Some(query) = url.query() {
        let redacted: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) => format!("{key}=REDACTED"),
                None => pair.to_owned(),
            })
            .collect();
        u.set_query(Some(&redacted.join("&")));
    }
    u.into()
}

/// `error.type` for a transport error: the kind `reqwest` reports.
pub(crate) fn error_type(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect"
    } else if e.is_redirect() {
        "redirect"
    } else if e.is_body() {
        "body"
    } else if e.is_decode() {
        "decode"
    } else if e.is_builder() {
        "builder"
    } else if e.is_request() {
        "request"
    } else {
        "_OTHER"
    }
}

/// The span's name and its attributes known before sending.
fn request_attributes(req: &Request) -> (String, Vec<KeyValue>) {
    let method = req.method().as_str();
    let url = req.url();
    let (name, mut attrs) = if KNOWN_METHODS.contains(&method) {
        (
            method.to_owned(),
            vec![KeyValue::new("http.request.method", method.to_owned())],
        )
    } else {
        (
            "HTTP".to_owned(),
            vec![
                KeyValue::new("http.request.method", "_OTHER"),
                KeyValue::new("http.request.method_original", method.to_owned()),
            ],
        )
    };
    if let Some(host) = url.host_str() {
        attrs.push(KeyValue::new("server.address", host.to_owned()));
    }
    if let Some(port) = url.port_or_known_default() {
        attrs.push(KeyValue::new("server.port", i64::from(port)));
    }
    attrs.push(KeyValue::new("url.full", redact_url(url)));
    (name, attrs)
}

fn protocol_version(v: reqwest::Version) -> Option<&'static str> {
    Some(match v {
        reqwest::Version::HTTP_09 => "0.9",
        reqwest::Version::HTTP_10 => "1.0",
        reqwest::Version::HTTP_11 => "1.1",
        reqwest::Version::HTTP_2 => "2",
        reqwest::Version::HTTP_3 => "3",
        _ => return None,
    })
}

/// Sets the headers of `cx` on `req` (replacing any already there).
fn inject(cx: &Context, req: &mut Request) {
    super::wire::inject_with(
        cx,
        &mut opentelemetry_http::HeaderInjector(req.headers_mut()),
    );
}

fn record_response(span: &LensSpan, resp: &Response) {
    let code = resp.status().as_u16();
    span.set_attribute("http.response.status_code", i64::from(code));
    if let Some(v) = protocol_version(resp.version()) {
        span.set_attribute("network.protocol.version", v);
    }
    if code >= 400 {
        span.set_attribute("error.type", code.to_string());
        span.set_status(SpanStatus::Error(code.to_string().into()));
    }
}

fn record_failure(span: &LensSpan, err: &reqwest_middleware::Error, url: &Url) {
    let (ty, exception) = match err {
        reqwest_middleware::Error::Reqwest(e) => (error_type(e), "reqwest::Error"),
        reqwest_middleware::Error::Middleware(_) => ("_OTHER", "reqwest_middleware::Error"),
    };
    span.set_attribute("error.type", ty);
    // the message with its causes, without the credentials of any URL in it
    let mut message = format!("{err}");
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    for u in [Some(url), err.url()].into_iter().flatten() {
        message = message.replace(u.as_str(), &redact_url(u));
    }
    record_exception(&span.handle(), exception, message, None);
}

#[async_trait::async_trait]
impl Middleware for ClientSpans {
    async fn handle(
        &self,
        mut req: Request,
        extensions: &mut http::Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        if !self.group.is_enabled() {
            inject(&Context::current(), &mut req);
            return next.run(req, extensions).await;
        }
        let (name, attrs) = request_attributes(&req);
        let url = req.url().clone();
        let span = start_detached_with(name, attrs, SpanKind::Client, None, Vec::new());
        inject(span.context(), &mut req);
        let out = next
            .run(req, extensions)
            .with_context(span.context().clone())
            .await;
        match &out {
            Ok(resp) => record_response(&span, resp),
            Err(e) => record_failure(&span, e, &url),
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redacted(s: &str) -> String {
        redact_url(&Url::parse(s).unwrap())
    }

    #[test]
    fn credentials_and_query_values_are_redacted() {
        assert_eq!(redacted("http://h:8/a/b"), "http://h:8/a/b");
        assert_eq!(
            redacted("https://user:pw@h/x?sig=abc&key=1&flag#frag"),
            "https://REDACTED:REDACTED@h/x?sig=REDACTED&key=REDACTED&flag"
        );
        assert_eq!(redacted("http://user@h/"), "http://REDACTED:REDACTED@h/");
        assert_eq!(redacted("http://h/?"), "http://h/?");
        assert_eq!(redacted("http://h/p#only-fragment"), "http://h/p");
    }

    #[test]
    fn name_and_attributes_follow_the_conventions() {
        let req = Request::new(
            reqwest::Method::GET,
            Url::parse("https://api.example.com/v1?token=t").unwrap(),
        );
        let (name, attrs) = request_attributes(&req);
        assert_eq!(name, "GET");
        let get = |k: &str| {
            attrs
                .iter()
                .find(|kv| kv.key.as_str() == k)
                .map(|kv| kv.value.to_string())
        };
        assert_eq!(get("http.request.method").as_deref(), Some("GET"));
        assert_eq!(get("server.address").as_deref(), Some("api.example.com"));
        assert_eq!(get("server.port").as_deref(), Some("443"));
        assert_eq!(
            get("url.full").as_deref(),
            Some("https://api.example.com/v1?token=REDACTED")
        );
        let other = Request::new(
            reqwest::Method::from_bytes(b"PURGE").unwrap(),
            Url::parse("http://h:81/").unwrap(),
        );
        let (name, attrs) = request_attributes(&other);
        assert_eq!(name, "HTTP");
        assert!(attrs.contains(&KeyValue::new("http.request.method", "_OTHER")));
        assert!(attrs.contains(&KeyValue::new("http.request.method_original", "PURGE")));
        assert!(attrs.contains(&KeyValue::new("server.port", 81_i64)));
    }
}
