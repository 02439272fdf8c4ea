//! `#[trace_fn]` options: `kind`, `ret`, `ret(Ok)`, `err(Debug)`, `parent`,
//! `links`; `%` / `?` fields in all three macros.

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

#[derive(Debug)]
enum Phase {
    Warmup,
}

struct Model {
    name: String,
}

impl std::fmt::Display for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "model {}", self.name)
    }
}

#[derive(Debug)]
struct Oops {
    code: u32,
}

impl std::fmt::Display for Oops {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "oops {}", self.code)
    }
}

#[trace_fn(group = "step", fields(%model, ?phase, upper = %model.name.to_uppercase(), dbg = ?[1, 2]))]
fn formatted(model: &Model, phase: Phase) {}

#[trace_fn(group = "step", err(Debug))]
fn fails_debug(code: u32) -> Result<(), Oops> {
    Err(Oops { code })
}

#[trace_fn(group = "step", err(Display))]
fn fails_display(code: u32) -> Result<(), Oops> {
    Err(Oops { code })
}

#[trace_fn(group = "step", err(Debug))]
async fn fails_debug_async(code: u32) -> Result<(), Oops> {
    Err(Oops { code })
}

#[trace_fn(group = "step", ret(Ok))]
fn ok_only(text: &str) -> Result<i64, std::num::ParseIntError> {
    text.parse()
}

#[trace_fn(group = "step", ret(Ok))]
async fn ok_only_async(text: &str) -> Result<i64, std::num::ParseIntError> {
    text.parse()
}

#[test]
fn percent_and_question_mark_record_display_and_debug_text() {
    let f = fixture("step");
    let model = Model {
        name: "llama".into(),
    };
    formatted(&model, Phase::Warmup);
    let s = f.span("formatted");
    assert_eq!(attr(&s, "model"), Some(Value::from("model llama")));
    assert_eq!(attr(&s, "phase"), Some(Value::from("Warmup")));
    assert_eq!(attr(&s, "upper"), Some(Value::from("LLAMA")));
    assert_eq!(attr(&s, "dbg"), Some(Value::from("[1, 2]")));
    {
        let _m = lens::managed_span!("step", "managed", %model, state = ?Phase::Warmup);
        let _c = span_cm!("cm", name = ?model.name, "shown" = %model);
    }
    let m = f.span("managed");
    assert_eq!(attr(&m, "model"), Some(Value::from("model llama")));
    assert_eq!(attr(&m, "state"), Some(Value::from("Warmup")));
    let c = f.span("cm");
    assert_eq!(attr(&c, "name"), Some(Value::from("\"llama\"")));
    assert_eq!(attr(&c, "shown"), Some(Value::from("model llama")));
}

#[test]
fn formatted_fields_under_a_redacted_key_are_redacted() {
    let f = fixture("step");
    let prompt = "tell me a secret";
    drop(span_cm!("r", %prompt, api_key = ?prompt));
    let r = f.span("r");
    assert_eq!(attr(&r, "prompt"), Some(Value::from("[REDACTED]")));
    assert_eq!(attr(&r, "api_key"), Some(Value::from("[REDACTED]")));
}

static FORMATTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

struct Counted;

impl std::fmt::Display for Counted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("counted")
    }
}

impl std::fmt::Debug for Counted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("counted")
    }
}

/// Counts its evaluations.
fn counted() -> Counted {
    FORMATTED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    Counted
}

#[trace_fn(group = "checkpoint", fields(a = %counted(), b = ?counted()))]
fn gated_formatted() {}

#[test]
fn formatted_fields_are_not_evaluated_when_the_group_is_off() {
    let f = fixture("step");
    FORMATTED.store(0, std::sync::atomic::Ordering::SeqCst);
    gated_formatted();
    let g = lens::managed_span!("checkpoint", "off", a = %counted(), b = ?counted());
    assert!(g.is_none());
    drop(g);
    assert_eq!(FORMATTED.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert!(f.spans().is_empty());
    // and they are when it is on: the counter can move
    drop(lens::managed_span!("step", "on", a = %counted()));
    assert_eq!(FORMATTED.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn err_debug_and_display_choose_the_message() {
    let f = fixture("step");
    assert!(fails_debug(7).is_err());
    assert!(fails_display(7).is_err());
    assert!(rt().block_on(fails_debug_async(8)).is_err());
    let status = |name: &str| match f.span(name).status {
        Status::Error { description } => description.to_string(),
        other => panic!("{name}: {other:?}"),
    };
    assert_eq!(status("fails_debug"), "Oops: Oops { code: 7 }");
    assert_eq!(status("fails_display"), "Oops: oops 7");
    assert_eq!(status("fails_debug_async"), "Oops: Oops { code: 8 }");
}

#[test]
fn ret_ok_records_only_the_ok_value() {
    let f = fixture("step");
    assert_eq!(ok_only("5").unwrap(), 5);
    assert!(ok_only("x").is_err());
    assert_eq!(rt().block_on(ok_only_async("6")).unwrap(), 6);
    let spans: Vec<_> = f
        .spans()
        .into_iter()
        .filter(|s| s.name == "ok_only")
        .collect();
    assert_eq!(attr(&spans[0], "return"), Some(Value::I64(5)));
    assert_eq!(attr(&spans[1], "return"), None);
    // without `err`, the error is not recorded
    assert_eq!(spans[1].status, Status::Unset);
    assert_eq!(
        attr(&f.span("ok_only_async"), "return"),
        Some(Value::I64(6))
    );
}
