//! The `tower` layer on a hand-written service: a SERVER span per request,
//! a child of the request's `traceparent`, the status recorded, ERROR on
//! 5xx, nothing when its group is off.

mod common;

use common::{attr, fixture};
use lens::otel::trace::{SpanKind, Status};
use lens::otel::Value;
use lens::serving::ServerLayer;
use std::convert::Infallible;
use std::future::{ready, Ready};
use std::task::{Context, Poll};
use tower_layer::Layer as _;

/// Answers with the status in the `x-status` header, opening a lens span.
#[derive(Clone)]
struct Echo;

impl tower_service::Service<http::Request<()>> for Echo {
    type Response = http::Response<()>;
    type Error = Infallible;
    type Future = Ready<Result<http::Response<()>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<()>) -> Self::Future {
        let _handler = lens::span_cm!("handler");
        let status = req
            .headers()
            .get("x-status")
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(200);
        let mut resp = http::Response::new(());
        *resp.status_mut() = http::StatusCode::from_u16(status).unwrap();
        ready(Ok(resp))
    }
}

fn request(status: u16, traceparent: Option<&str>) -> http::Request<()> {
    let mut b = http::Request::builder()
        .method("GET")
        .uri("/users/42")
        .header("x-status", status.to_string());
    if let Some(tp) = traceparent {
        b = b.header("traceparent", tp);
    }
    let mut req = b.body(()).unwrap();
    req.extensions_mut().insert("/users/{id}");
    req
}

fn call<S>(svc: &mut S, req: http::Request<()>) -> u16
where
    S: tower_service::Service<http::Request<()>, Response = http::Response<()>, Error = Infallible>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(svc.call(req)).unwrap().status().as_u16()
}

#[test]
fn server_span_per_request_with_route_status_and_parent() {
    let f = fixture("job");
    let layer = ServerLayer::new(&lens::groups::JOB)
        .with_route(|ext| ext.get::<&'static str>().map(|r| (*r).to_owned()));
    let mut svc = layer.layer(Echo);
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    assert_eq!(call(&mut svc, request(200, Some(tp))), 200);
    assert_eq!(call(&mut svc, request(503, None)), 503);
    let spans: Vec<_> = f
        .spans()
        .into_iter()
        .filter(|s| s.name == "GET /users/{id}")
        .collect();
    assert_eq!(spans.len(), 2, "named by the route template, not the path");
    let ok = &spans[0];
    assert_eq!(ok.span_kind, SpanKind::Server);
    assert_eq!(ok.parent_span_id.to_string(), "00f067aa0ba902b7");
    assert_eq!(
        ok.span_context.trace_id().to_string(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(attr(ok, "http.route"), Some(Value::from("/users/{id}")));
    assert_eq!(attr(ok, "http.request.method"), Some(Value::from("GET")));
    assert_eq!(attr(ok, "http.response.status_code"), Some(Value::I64(200)));
    assert_eq!(ok.status, Status::Unset);
    let failed = &spans[1];
    assert_eq!(
        attr(failed, "http.response.status_code"),
        Some(Value::I64(503))
    );
    assert_eq!(failed.status, Status::error("503"));
    // the handler's spans are children of the request's span
    let handlers: Vec<_> = f
        .spans()
        .into_iter()
        .filter(|s| s.name == "handler")
        .collect();
    assert_eq!(handlers[0].parent_span_id, ok.span_context.span_id());
}

#[test]
fn no_route_names_the_span_by_method_and_an_off_group_records_nothing() {
    let f = fixture("job");
    let mut svc = ServerLayer::new(&lens::groups::JOB).layer(Echo);
    call(&mut svc, request(200, None));
    let mut off = ServerLayer::new(&lens::groups::STEP).layer(Echo);
    assert_eq!(call(&mut off, request(200, None)), 200, "still served");
    let names: Vec<_> = f.spans().iter().map(|s| s.name.to_string()).collect();
    assert_eq!(names, ["handler", "GET", "handler"]);
}

#[test]
fn a_generation_has_request_prefill_and_decode_spans() {
    use lens::metrics::{Generation, InferenceMetrics, InferenceRecord};
    let f = common::fixture_with("request,prefill,decode", &[&lens::inference_server::FAMILY]);
    let metrics = InferenceMetrics::new(&lens::otel::global::meter("test"));
    let record = {
        let _caller = lens::span_cm!("caller");
        let mut g = Generation::start(&metrics);
        for _ in 0..3 {
            g.token();
        }
        g.finish(InferenceRecord {
            input_tokens: Some(5),
            ..Default::default()
        })
    };
    assert_eq!(record.output_tokens, Some(3));
    assert!(record.time_to_first_token_s.is_some() && record.time_per_output_token_s.is_some());
    let request = f.span("request");
    common::assert_child(&request, &f.span("caller"));
    common::assert_child(&f.span("prefill"), &request);
    common::assert_child(&f.span("decode"), &request);
    assert_eq!(
        attr(&request, "gen_ai.usage.output_tokens"),
        Some(Value::I64(3))
    );
    let (prefill, decode) = (f.span("prefill"), f.span("decode"));
    assert!(
        prefill.end_time <= decode.start_time,
        "decode starts at the first token"
    );
}
