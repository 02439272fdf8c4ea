//! `ClientSpans` on a `reqwest-middleware` client calling an axum server
//! behind `ServerLayer`: a CLIENT span per request, child of the caller's
//! span and parent of the server's SERVER span, with the HTTP client
//! attributes, ERROR on 4xx/5xx and on a refused connection; with its group
//! off no span, but the current context still travels. In memory, and end
//! to end through the real collector (a child process set up from the
//! environment).

mod common;

use axum::extract::MatchedPath;
use axum::http::StatusCode;
use axum::routing::get;
use common::{attr, fixture};
use lens::otel::trace::{SpanKind, Status};
use lens::otel::Value;
use lens::propagation::http::ClientSpans;
use lens::serving::ServerLayer;
use lens::{InSpan, SpanGroup};
use reqwest_middleware::ClientWithMiddleware;
use std::net::SocketAddr;
use std::time::Duration;
use tests::{free_port, get as attr_of, lens_command, run_ok, Rotel};

/// An axum server on a free port: `/ok` (200), `/fail` (500), anything
/// else 404; SERVER spans named by the route, gated by `JOB`.
async fn serve() -> SocketAddr {
    let app = axum::Router::new()
        .route("/ok", get(|| async { "ok" }))
        .route(
            "/fail",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "no") }),
        )
        .route_layer(
            ServerLayer::new(&lens::groups::JOB)
                .with_route(|ext| ext.get::<MatchedPath>().map(|m| m.as_str().to_owned())),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

fn client(group: &'static SpanGroup) -> ClientWithMiddleware {
    reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(ClientSpans::new(group))
        .build()
}

/// Statuses of `GET {url}` for each url, inside a `caller` span; `0` for a
/// transport error.
async fn call_all(client: &ClientWithMiddleware, urls: &[String]) -> Vec<u16> {
    async {
        let mut statuses = Vec::new();
        for url in urls {
            statuses.push(match client.get(url).send().await {
                Ok(r) => r.status().as_u16(),
                Err(_) => 0,
            });
        }
        statuses
    }
    .in_span(lens::detached_span("caller"))
    .await
}

/// `/ok` with credentials and a query, `/fail`, `/missing`, a closed port.
fn urls(addr: SocketAddr, closed: u16) -> Vec<String> {
    vec![
        format!("http://user:pw@{addr}/ok?token=secret&page=2"),
        format!("http://{addr}/fail"),
        format!("http://{addr}/missing"),
        format!("http://127.0.0.1:{closed}/?key=secret"),
    ]
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn client_span_per_request_parent_of_the_server_span() {
    let f = fixture("job");
    let closed = free_port();
    let (addr, statuses) = runtime().block_on(async {
        let addr = serve().await;
        let client = client(&lens::groups::JOB);
        (addr, call_all(&client, &urls(addr, closed)).await)
    });
    assert_eq!(statuses, [200, 500, 404, 0]);
    let spans = f.spans();
    let caller = f.span("caller");
    let clients: Vec<_> = spans
        .iter()
        .filter(|s| s.span_kind == SpanKind::Client)
        .collect();
    assert_eq!(clients.len(), 4, "one CLIENT span per request");
    for c in &clients {
        assert_eq!(c.name, "GET");
        assert_eq!(c.parent_span_id, caller.span_context.span_id());
        assert_eq!(c.span_context.trace_id(), caller.span_context.trace_id());
        assert_eq!(attr(c, "http.request.method"), Some(Value::from("GET")));
        assert_eq!(attr(c, "server.address"), Some(Value::from("127.0.0.1")));
    }
    let (ok, fail, missing, refused) = (clients[0], clients[1], clients[2], clients[3]);
    // the server's span is a child of the CLIENT span, whose context was sent
    let server_ok = f.span("GET /ok");
    assert_eq!(server_ok.span_kind, SpanKind::Server);
    assert_eq!(server_ok.parent_span_id, ok.span_context.span_id());
    assert_eq!(
        server_ok.span_context.trace_id(),
        ok.span_context.trace_id()
    );
    assert_eq!(
        f.span("GET /fail").parent_span_id,
        fail.span_context.span_id()
    );
    assert_eq!(
        attr(ok, "server.port"),
        Some(Value::I64(i64::from(addr.port())))
    );
    // reqwest moves the URL's credentials to an `Authorization` header; the
    // query's values are redacted
    assert_eq!(
        attr(ok, "url.full"),
        Some(Value::from(format!(
            "http://{addr}/ok?token=REDACTED&page=REDACTED"
        )))
    );
    assert_eq!(attr(ok, "http.response.status_code"), Some(Value::I64(200)));
    assert_eq!(
        attr(ok, "network.protocol.version"),
        Some(Value::from("1.1"))
    );
    assert_eq!(ok.status, Status::Unset);
    assert_eq!(attr(ok, "error.type"), None);
    // 5xx and 4xx are errors for a client
    assert_eq!(
        attr(fail, "http.response.status_code"),
        Some(Value::I64(500))
    );
    assert_eq!(attr(fail, "error.type"), Some(Value::from("500")));
    assert_eq!(fail.status, Status::error("500"));
    assert_eq!(attr(missing, "error.type"), Some(Value::from("404")));
    assert_eq!(missing.status, Status::error("404"));
    // a refused connection: ERROR, `error.type`, the exception, no status code
    assert_eq!(attr(refused, "error.type"), Some(Value::from("connect")));
    assert_eq!(
        attr(refused, "server.port"),
        Some(Value::I64(closed.into()))
    );
    assert_eq!(attr(refused, "http.response.status_code"), None);
    // the message with its causes, the URL in it redacted
    let Status::Error { description } = &refused.status else {
        panic!("{:?}", refused.status)
    };
    assert!(description.starts_with("Error: error sending request for url"));
    assert!(description.contains(&format!("127.0.0.1:{closed}/?key=REDACTED")));
    assert!(!description.contains("secret"), "{description}");
    let ev = &refused.events.events[0];
    assert_eq!(ev.name, "exception");
    assert!(ev
        .attributes
        .iter()
        .any(|kv| kv.key.as_str() == "exception.type" && kv.value.as_str() == "reqwest::Error"));
}

#[test]
fn an_off_group_makes_no_span_but_the_context_still_travels() {
    let f = fixture("job");
    let statuses = runtime().block_on(async {
        let addr = serve().await;
        let client = client(&lens::groups::STEP);
        call_all(&client, &[format!("http://{addr}/ok")]).await
    });
    assert_eq!(statuses, [200]);
    let spans = f.spans();
    assert!(spans.iter().all(|s| s.span_kind != SpanKind::Client));
    assert_eq!(
        f.span("GET /ok").parent_span_id,
        f.span("caller").span_context.span_id(),
        "the server's span is a child of the caller's current span"
    );
}

// ---------------------------------------------------- against the collector

const CHILD_ENV: &str = "LENS_HTTP_CLIENT_TEST_CHILD";
const CLOSED_PORT_ENV: &str = "LENS_HTTP_CLIENT_TEST_CLOSED_PORT";

/// Run only as the child of `client_and_server_spans_reach_the_collector`:
/// sets lens up from the environment, serves and calls, shuts down.
#[test]
#[ignore = "child process of client_and_server_spans_reach_the_collector"]
fn collector_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let closed: u16 = std::env::var(CLOSED_PORT_ENV).unwrap().parse().unwrap();
    let telemetry = lens::setup_telemetry(lens::LensConfig::from_env().unwrap(), 0, 1).unwrap();
    assert!(telemetry.is_exporting());
    let statuses = runtime().block_on(async {
        let addr = serve().await;
        call_all(&client(&lens::groups::JOB), &urls(addr, closed)).await
    });
    assert_eq!(statuses, [200, 500, 404, 0]);
    telemetry
        .shutdown(Duration::from_secs(10))
        .into_result()
        .unwrap();
}

#[test]
fn client_and_server_spans_reach_the_collector() {
    let rotel = Rotel::start();
    let closed = free_port();
    let mut cmd = lens_command(std::env::current_exe().unwrap());
    cmd.args([
        "collector_child",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ENV, "1")
    .env(CLOSED_PORT_ENV, closed.to_string())
    .env("OTEL_EXPORTER_OTLP_ENDPOINT", rotel.grpc_endpoint())
    .env("NEMO_LENS_RUN_ID", "http-client");
    run_ok(&mut cmd);
    let r = rotel.wait_for(Duration::from_secs(20), "client and server spans", |r| {
        r.spans_named("GET").len() == 4
            && !r.spans_named("GET /ok").is_empty()
            && !r.spans_named("GET /fail").is_empty()
            && !r.spans_named("caller").is_empty()
    });
    let caller = r.span("caller");
    let clients = r.spans_named("GET");
    for c in &clients {
        assert_eq!(c.kind, "SPAN_KIND_CLIENT");
        assert_eq!(c.trace_id, caller.trace_id, "one trace");
        assert_eq!(c.parent_id, caller.span_id);
        assert_eq!(attr_of(&c.attributes, "http.request.method"), Some("GET"));
    }
    let by_url = |suffix: &str| {
        *clients
            .iter()
            .find(|c| attr_of(&c.attributes, "url.full").is_some_and(|u| u.ends_with(suffix)))
            .unwrap_or_else(|| panic!("no CLIENT span for {suffix}: {clients:?}"))
    };
    let ok = by_url("/ok?token=REDACTED&page=REDACTED");
    let server = r.span("GET /ok");
    assert_eq!(server.kind, "SPAN_KIND_SERVER");
    assert_eq!(server.trace_id, ok.trace_id);
    assert_eq!(server.parent_id, ok.span_id, "SERVER is a child of CLIENT");
    assert_eq!(
        attr_of(&ok.attributes, "http.response.status_code"),
        Some("200")
    );
    assert!(!ok.status_code.contains("ERROR"), "{ok:?}");
    let fail = by_url("/fail");
    assert_eq!(r.span("GET /fail").parent_id, fail.span_id);
    assert_eq!(
        attr_of(&fail.attributes, "http.response.status_code"),
        Some("500")
    );
    assert_eq!(fail.status_code, "STATUS_CODE_ERROR");
    assert_eq!(attr_of(&fail.attributes, "error.type"), Some("500"));
    let missing = by_url("/missing");
    assert_eq!(missing.status_code, "STATUS_CODE_ERROR");
    assert_eq!(attr_of(&missing.attributes, "error.type"), Some("404"));
    let refused = by_url(&format!("127.0.0.1:{closed}/?key=REDACTED"));
    assert_eq!(refused.status_code, "STATUS_CODE_ERROR");
    assert_eq!(attr_of(&refused.attributes, "error.type"), Some("connect"));
    assert_eq!(
        attr_of(&refused.attributes, "http.response.status_code"),
        None
    );
    assert!(refused.events.iter().any(|e| e.name == "exception"));
}
