//! `#[trace_fn]` options: `kind`, `ret`, `parent`, `links`.

mod common;

use common::{assert_child, attr, fixture};
use lens::otel::trace::{SpanKind, Status, TraceContextExt as _};
use lens::otel::Value;
use lens::{span_cm, trace_fn, LensSpan};

#[trace_fn(group = "step", kind = server)]
fn serve() {}

#[trace_fn(group = "step", kind = client, ret)]
async fn call(x: u64) -> u64 {
    tokio::task::yield_now().await;
    x + 1
}

#[trace_fn(group = "step", ret)]
fn answer() -> u64 {
    42
}

#[trace_fn(group = "step", ret, err)]
fn parse(text: &str) -> Result<i64, std::num::ParseIntError> {
    text.parse()
}

#[trace_fn(group = "step", ret, err)]
async fn parse_async(text: &str) -> Result<i64, std::num::ParseIntError> {
    text.parse()
}

#[trace_fn(group = "step", parent = parent)]
fn child_of(parent: &LensSpan) {
    let _inner = span_cm!("child.inner");
}

#[trace_fn(group = "step", kind = consumer, parent = remote)]
async fn remote_child(remote: Option<&lens::otel::Context>) {}

#[trace_fn(group = "step", links(a, b, None::<&LensSpan>))]
fn linked(a: &LensSpan, b: &lens::otel::trace::SpanContext) {}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn kind_sets_the_span_kind() {
    let f = fixture("step");
    serve();
    assert_eq!(rt().block_on(call(1)), 2);
    assert_eq!(f.span("serve").span_kind, SpanKind::Server);
    assert_eq!(f.span("call").span_kind, SpanKind::Client);
    assert_eq!(attr(&f.span("call"), "return"), Some(Value::I64(2)));
}

#[test]
fn ret_records_the_return_value_and_only_ok_with_err() {
    let f = fixture("step");
    assert_eq!(answer(), 42);
    assert_eq!(parse("7").unwrap(), 7);
    assert!(parse("x").is_err());
    assert_eq!(rt().block_on(parse_async("-3")).unwrap(), -3);
    assert_eq!(attr(&f.span("answer"), "return"), Some(Value::I64(42)));
    let parses: Vec<_> = f
        .spans()
        .into_iter()
        .filter(|s| s.name == "parse")
        .collect();
    assert_eq!(attr(&parses[0], "return"), Some(Value::I64(7)));
    assert_eq!(attr(&parses[1], "return"), None, "no Ok value");
    assert!(matches!(parses[1].status, Status::Error { .. }));
    assert_eq!(attr(&f.span("parse_async"), "return"), Some(Value::I64(-3)));
}

#[test]
fn ret_records_nothing_when_the_group_is_off() {
    let f = fixture("job");
    let _outer = span_cm!("outer");
    assert_eq!(rt().block_on(call(1)), 2);
    drop(_outer);
    // the outer span was current: `ret` must not land on it
    assert_eq!(attr(&f.span("outer"), "return"), None);
}

#[test]
fn parent_is_followed_instead_of_the_current_span() {
    let f = fixture("step");
    let job = lens::detached_span("job");
    {
        let _current = span_cm!("current");
        child_of(&job);
    }
    drop(job);
    assert_child(&f.span("child_of"), &f.span("job"));
    assert_child(&f.span("child.inner"), &f.span("child_of"));
    // a remote context from a W3C carrier; `None` is the current context
    let mut carrier = std::collections::HashMap::new();
    carrier.insert(
        "traceparent".to_owned(),
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned(),
    );
    let remote = lens::propagation::extract_from(&carrier);
    rt().block_on(remote_child(Some(&remote)));
    let s = f.span("remote_child");
    assert_eq!(s.parent_span_id.to_string(), "00f067aa0ba902b7");
    assert_eq!(
        s.span_context.trace_id().to_string(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(s.span_kind, SpanKind::Consumer);
    {
        let _current = span_cm!("current.2");
        rt().block_on(remote_child(None));
    }
    let spans = f.spans();
    let second = spans
        .iter()
        .rev()
        .find(|s| s.name == "remote_child")
        .unwrap();
    assert_child(second, &f.span("current.2"));
}

#[test]
fn links_are_added() {
    let f = fixture("step");
    let a = lens::detached_span("a");
    let b = lens::detached_span("b");
    let b_cx = b.context().span().span_context().clone();
    linked(&a, &b_cx);
    let s = f.span("linked");
    let linked: Vec<_> = s
        .links
        .links
        .iter()
        .map(|l| l.span_context.span_id())
        .collect();
    assert_eq!(
        linked,
        [a.context().span().span_context().span_id(), b_cx.span_id()]
    );
}
