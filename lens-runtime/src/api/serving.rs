//! Server middleware (feature `tower`): a `tower` layer that makes one
//! SERVER span per HTTP request, a child of the caller's W3C context, gated
//! by a span group. Works with axum, tonic and hyper services.

use crate::api::groups::SpanGroup;
use crate::api::span::opts::start_detached_with;
use crate::api::span::{LensSpan, SpanStatus};
use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;
use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

/// The route template of a request, read from its extensions (e.g. axum's
/// `MatchedPath`); `None` when unknown.
pub type RouteFn = fn(&http::Extensions) -> Option<String>;

/// A `tower` layer: one SERVER span per request, when `group` is enabled.
///
/// * **Parent**: the W3C `traceparent` / `tracestate` / `baggage` of the
///   request's headers (a new trace without them).
/// * **Name and attributes**, by the HTTP semantic conventions:
///   `{method} {route}` with the route *template* (`/users/{id}`, never the
///   raw path) when [`with_route`](Self::with_route) tells it, else
///   `{method}`; `http.request.method`, `http.route`,
///   `http.response.status_code`.
/// * **Status**: ERROR on a 5xx response or a service error.
/// * **Context**: the span is current while the service's future is polled,
///   so spans of the handler are its children.
///
/// ```
/// use lens::serving::ServerLayer;
/// let layer = ServerLayer::new(&lens::nemo_gym::SERVER)
///     // with axum: .route_layer(layer) and
///     // .with_route(|ext| ext.get::<axum::extract::MatchedPath>().map(|m| m.as_str().to_owned()))
///     .with_route(|_ext| None);
/// # drop(layer);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ServerLayer {
    group: &'static SpanGroup,
    route: Option<RouteFn>,
}

impl ServerLayer {
    /// Spans gated by `group`.
    ///
    /// ```
    /// let layer = lens::serving::ServerLayer::new(&lens::groups::JOB);
    /// # drop(layer);
    /// ```
    pub fn new(group: &'static SpanGroup) -> Self {
        ServerLayer { group, route: None }
    }

    /// Reads the route template from the request's extensions.
    ///
    /// ```
    /// let layer = lens::serving::ServerLayer::new(&lens::groups::JOB)
    ///     .with_route(|ext| ext.get::<&'static str>().map(|r| r.to_string()));
    /// # drop(layer);
    /// ```
    pub fn with_route(mut self, route: RouteFn) -> Self {
        self.route = Some(route);
        self
    }
}

impl<S> tower_layer::Layer<S> for ServerLayer {
    type Service = ServerService<S>;

    fn layer(&self, inner: S) -> ServerService<S> {
        ServerService {
            inner,
            layer: *self,
        }
    }
}

/// The service [`ServerLayer`] wraps around yours.
///
/// ```
/// use lens::serving::{ServerLayer, ServerService};
/// fn wrap<S>(svc: S) -> ServerService<S> {
///     tower_layer::Layer::layer(&ServerLayer::new(&lens::groups::JOB), svc)
/// }
/// # let _ = wrap::<()>;
/// ```
#[derive(Debug, Clone)]
pub struct ServerService<S> {
    inner: S,
    layer: ServerLayer,
}

impl ServerLayer {
    fn start<B>(&self, req: &http::Request<B>) -> LensSpan {
        let parent = crate::api::propagation::http::extract_headers(req.headers());
        let method = req.method().as_str().to_owned();
        let route = self.route.and_then(|f| f(req.extensions()));
        let name = match &route {
            Some(r) => format!("{method} {r}"),
            None => method.clone(),
        };
        let mut attrs = vec![KeyValue::new("http.request.method", method)];
        if let Some(r) = route {
            attrs.push(KeyValue::new("http.route", r));
        }
        start_detached_with(name, attrs, SpanKind::Server, Some(parent), Vec::new())
    }
}

impl<S, B, RB> tower_service::Service<http::Request<B>> for ServerService<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<RB>>,
    S::Error: Display,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = ServerFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if !self.layer.group.is_enabled() {
            return ServerFuture {
                inner: self.inner.call(req),
                span: None,
            };
        }
        let span = self.layer.start(&req);
        let inner = {
            let _current = span.context().clone().attach();
            self.inner.call(req)
        };
        ServerFuture {
            inner,
            span: Some(span),
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of a [`ServerService`]: the request's span is current
    /// while it is polled, and ends with the response.
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct ServerFuture<F> {
        #[pin]
        inner: F,
        span: Option<LensSpan>,
    }
}

impl<F, RB, E> Future for ServerFuture<F>
where
    F: Future<Output = Result<http::Response<RB>, E>>,
    E: Display,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        let this = self.project();
        let Some(span) = this.span.as_ref() else {
            return this.inner.poll(cx);
        };
        let attached = span.context().clone().attach();
        let out = this.inner.poll(cx);
        drop(attached);
        if let Poll::Ready(result) = &out {
            match result {
                Ok(resp) => {
                    let code = resp.status().as_u16();
                    span.set_attribute("http.response.status_code", i64::from(code));
                    if code >= 500 {
                        span.set_status(SpanStatus::Error(code.to_string().into()));
                    }
                }
                Err(e) => span.record_error(e),
            }
            this.span.take();
        }
        out
    }
}
