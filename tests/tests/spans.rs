//! Behaviour of the three primitives on an in-memory exporter.

mod common;

use common::{assert_child, attr, fixture};
use lens::otel::trace::{Status, TraceContextExt};
use lens::otel::Value;
use lens::{managed_span, span_cm, trace_fn};
use std::sync::atomic::{AtomicUsize, Ordering};

#[trace_fn(group = "step", name = "train.step", fields(iteration = it, "nv.dl.rank" = 3), args(it))]
fn step(it: u64) -> u64 {
    forward_backward();
    it + 1
}

#[trace_fn(group = "forward_backward")]
fn forward_backward() {
    let _g = managed_span!("optimizer", "optimizer.step", lr = 0.1);
}

#[test]
fn names_attributes_and_nesting_across_primitives() {
    let f = fixture("per_step");
    {
        let _job = span_cm!("job", "nemo.run.id" = "r1");
        assert_eq!(step(7), 8);
    }
    let job = f.span("job");
    let st = f.span("train.step");
    let fb = f.span("forward_backward");
    let opt = f.span("optimizer.step");
    assert_child(&st, &job);
    assert_child(&fb, &st);
    assert_child(&opt, &fb);
    assert_eq!(attr(&st, "iteration"), Some(Value::I64(7)));
    assert_eq!(attr(&st, "it"), Some(Value::I64(7)));
    assert_eq!(attr(&st, "nv.dl.rank"), Some(Value::I64(3)));
    assert_eq!(attr(&opt, "lr"), Some(Value::F64(0.1)));
    assert_eq!(attr(&job, "nemo.run.id"), Some(Value::from("r1")));
    assert_eq!(job.instrumentation_scope.name(), "nemo.lens");
}

#[test]
fn default_name_is_the_function_name() {
    let f = fixture("forward_backward");
    forward_backward();
    assert_eq!(f.spans().len(), 1);
    assert_eq!(f.spans()[0].name, "forward_backward");
}

static EVALUATED: AtomicUsize = AtomicUsize::new(0);
fn counted(v: u64) -> u64 {
    EVALUATED.fetch_add(1, Ordering::SeqCst);
    v
}

#[trace_fn(group = "step", fields(x = counted(1)))]
fn gated_step() {
    let _g = managed_span!("optimizer", "opt", y = counted(2));
}

#[test]
fn disabled_groups_record_nothing_and_evaluate_nothing() {
    let f = fixture("");
    EVALUATED.store(0, Ordering::SeqCst);
    for _ in 0..10 {
        gated_step();
        assert!(managed_span!("checkpoint", "ckpt", z = counted(3)).is_none());
    }
    assert_eq!(
        EVALUATED.load(Ordering::SeqCst),
        0,
        "attribute expressions ran"
    );
    assert!(f.spans().is_empty());
    // span_cm! is always on
    drop(span_cm!("always"));
    assert_eq!(f.spans().len(), 1);
}

#[test]
fn runtime_override_of_groups() {
    let f = fixture("default");
    EVALUATED.store(0, Ordering::SeqCst);
    gated_step();
    assert!(f.spans().is_empty());
    assert!(!lens::is_span_group_enabled("step"));
    lens::set_enabled_span_groups(&lens::SpanGroupSet::resolve("step", &[]).unwrap());
    assert!(lens::is_span_group_enabled("STEP"));
    assert!(!lens::is_span_group_enabled("job"));
    gated_step();
    assert_eq!(f.spans().len(), 1);
    assert_eq!(f.spans()[0].name, "gated_step");
    assert_eq!(EVALUATED.load(Ordering::SeqCst), 1);
    lens::set_enabled_span_groups(&lens::SpanGroupSet::none());
    gated_step();
    assert_eq!(f.spans().len(), 1);
}

#[test]
fn redaction_literal_and_runtime_keys() {
    let f = fixture("all");
    let secret = String::from("hunter2");
    {
        let g = span_cm!(
            "redact",
            prompt = "tell me",
            password = secret.as_str(),
            "gen_ai.prompt" = "x",
            token = 42,
            tokens = "kept",
            text = Some("t"),
            key = vec!["a", "b"]
        );
        g.set_attribute("output_text", String::from("answer"));
        let dynamic_key = format!("api.{}", "secret");
        g.set_attribute(dynamic_key, "s3cr3t");
        g.set_attribute("output_tokens", 12);
        g.add_event("generated", &[("input_text", &"q"), ("len", &3)]);
    }
    let s = f.span("redact");
    let redacted = Some(Value::from("[REDACTED]"));
    for k in [
        "prompt",
        "password",
        "gen_ai.prompt",
        "text",
        "key",
        "output_text",
        "api.secret",
    ] {
        assert_eq!(attr(&s, k), redacted, "{k} not redacted");
    }
    assert_eq!(
        attr(&s, "token"),
        Some(Value::I64(42)),
        "non-string values are kept"
    );
    assert_eq!(attr(&s, "tokens"), Some(Value::from("kept")));
    assert_eq!(attr(&s, "output_tokens"), Some(Value::I64(12)));
    let ev = &s.events.events[0];
    assert_eq!(ev.name, "generated");
    assert!(ev
        .attributes
        .iter()
        .any(|kv| kv.key.as_str() == "input_text" && kv.value == Value::from("[REDACTED]")));
}

/// `safe_set_span_attributes`: dynamic sets with caller-chosen extra keys,
/// on every kind of target (guard, detached span, `Context`, the `SpanRef`
/// of `get_active_span`); defaults stay redacted; `None` skipped.
#[test]
fn safe_set_span_attributes_redacts_extra_and_default_keys() {
    let f = fixture("all");
    let email = String::from("a@b.c");
    let attrs: [(&str, &dyn lens::AttributeValue); 5] = [
        ("user.Email", &email),
        ("prompt", &"p"),
        ("http.status", &200),
        ("ssn", &123),
        ("retry", &None::<u32>),
    ];
    {
        let g = span_cm!("guard");
        lens::safe_set_span_attributes(&g, &attrs, &["email", "ssn"]);
        lens::otel::trace::get_active_span(|s| {
            lens::safe_set_span_attributes(&s, &[("active.email", &"x")], &["EMAIL"]);
        });
        lens::safe_set_span_attributes(&lens::otel::Context::current(), &[("cx", &1)], &[]);
        let detached = span_cm!("detached")
            .into_span()
            .expect("span_cm! holds a span");
        lens::safe_set_span_attributes(&detached, &attrs, &[]);
    }
    let g = f.span("guard");
    let redacted = Some(Value::from("[REDACTED]"));
    assert_eq!(
        attr(&g, "user.Email"),
        redacted,
        "extra key, last segment, any case"
    );
    assert_eq!(attr(&g, "prompt"), redacted, "default keys always apply");
    assert_eq!(attr(&g, "http.status"), Some(Value::I64(200)));
    assert_eq!(
        attr(&g, "ssn"),
        Some(Value::I64(123)),
        "only strings are redacted"
    );
    assert_eq!(attr(&g, "retry"), None, "None is skipped");
    assert_eq!(attr(&g, "active.email"), redacted);
    assert_eq!(attr(&g, "cx"), Some(Value::I64(1)));
    let d = f.span("detached");
    assert_eq!(
        attr(&d, "user.Email"),
        Some(Value::from("a@b.c")),
        "no extra keys here"
    );
    assert_eq!(attr(&d, "prompt"), redacted);
}

#[test]
fn value_types_and_none_skipped() {
    let f = fixture("all");
    let none: Option<u32> = None;
    {
        let _g = span_cm!(
            "values",
            b = true,
            i = -3i8,
            u = 300u16,
            big = u64::MAX,
            f = 1.5f32,
            s = String::from("x"),
            v = vec![1i64, 2],
            a = [0.5, 1.5],
            sl = &["p", "q"][..],
            some = Some(5u32),
            none = none,
            bools = vec![true, false]
        );
    }
    let s = f.span("values");
    assert_eq!(attr(&s, "b"), Some(Value::Bool(true)));
    assert_eq!(attr(&s, "i"), Some(Value::I64(-3)));
    assert_eq!(attr(&s, "u"), Some(Value::I64(300)));
    assert_eq!(attr(&s, "big"), Some(Value::from(u64::MAX.to_string())));
    assert_eq!(attr(&s, "f"), Some(Value::F64(1.5)));
    assert_eq!(attr(&s, "s"), Some(Value::from("x")));
    assert_eq!(attr(&s, "v"), Some(Value::Array(vec![1i64, 2].into())));
    assert_eq!(attr(&s, "a"), Some(Value::Array(vec![0.5, 1.5].into())));
    assert_eq!(attr(&s, "some"), Some(Value::I64(5)));
    assert_eq!(attr(&s, "none"), None);
    assert_eq!(
        attr(&s, "bools"),
        Some(Value::Array(vec![true, false].into()))
    );
    assert!(attr(&s, "sl").is_some());
}

#[derive(Debug)]
struct DiskFull;
impl std::fmt::Display for DiskFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("disk full")
    }
}

#[trace_fn(group = "checkpoint", err)]
fn save(fail: bool) -> Result<u32, DiskFull> {
    if fail {
        return Err(DiskFull);
    }
    Ok(1)
}

#[trace_fn(group = "checkpoint", name = "save_q", err)]
fn save_question(fail: bool) -> Result<u32, String> {
    let v: u32 = if fail {
        "x".parse().map_err(|_| "bad number".to_owned())?
    } else {
        2
    };
    Ok(v)
}

#[test]
fn err_return_sets_error_status_and_exception_event() {
    let f = fixture("checkpoint");
    assert_eq!(save(false).unwrap(), 1);
    assert!(save(true).is_err());
    assert!(save_question(true).is_err());
    let spans = f.spans();
    assert_eq!(spans[0].status, Status::Unset);
    // as the Python library writes it: `TypeName: message`
    assert_eq!(spans[1].status, Status::error("DiskFull: disk full"));
    let ev = &spans[1].events.events[0];
    assert_eq!(ev.name, "exception");
    assert!(ev
        .attributes
        .iter()
        .any(|kv| kv.key.as_str() == "exception.message" && kv.value == Value::from("disk full")));
    assert!(
        ev.attributes
            .iter()
            .any(|kv| kv.key.as_str() == "exception.type"
                && kv.value.as_str().ends_with("::DiskFull"))
    );
    assert_eq!(spans[2].name, "save_q");
    assert_eq!(spans[2].status, Status::error("String: bad number"));
}

#[trace_fn(group = "step")]
fn panicking_step() {
    let _inner = span_cm!("inner");
    panic!("loss is NaN");
}

#[test]
fn panic_unwinding_through_a_guard_marks_error_with_message() {
    let f = fixture("step");
    let r = std::panic::catch_unwind(panicking_step);
    assert!(r.is_err());
    let outer = f.span("panicking_step");
    let inner = f.span("inner");
    assert_eq!(outer.status, Status::error("panic: loss is NaN"));
    assert_eq!(inner.status, Status::error("panic: loss is NaN"));
    assert_child(&inner, &outer);
    // context restored after the unwind
    assert!(!lens::otel::Context::current()
        .span()
        .span_context()
        .is_valid());
}

#[test]
fn guard_methods_set_status_and_record_error() {
    let f = fixture("all");
    {
        let g = managed_span!("step", "s");
        g.set_attribute("loss", 0.5);
        g.set_status(lens::SpanStatus::Ok);
        let g2 = span_cm!("e");
        g2.record_error(&"boom");
    }
    assert_eq!(f.span("s").status, Status::Ok);
    assert_eq!(attr(&f.span("s"), "loss"), Some(Value::F64(0.5)));
    assert_eq!(f.span("e").status, Status::error("str: boom"));
}

/// `lens::tracer` is the Python library's `get_tracer`: scope `nemo.lens`
/// by default, with lens's version, on the installed provider.
#[test]
fn free_tracer_defaults_to_the_nemo_lens_scope() {
    use lens::otel::trace::Tracer as _;
    let f = fixture("all");
    lens::tracer("").in_span("free.default", |_| {});
    lens::tracer("my.component").in_span("free.named", |_| {});
    let d = f.span("free.default");
    assert_eq!(d.instrumentation_scope.name(), lens::SCOPE_NAME);
    assert_eq!(d.instrumentation_scope.name(), "nemo.lens");
    assert_eq!(
        d.instrumentation_scope.version(),
        Some(env!("CARGO_PKG_VERSION"))
    );
    let n = f.span("free.named");
    assert_eq!(n.instrumentation_scope.name(), "my.component");
}

#[test]
fn otel_get_active_span_and_raw_otel_children_see_lens_span() {
    use lens::otel::trace::{Tracer, TracerProvider};
    let f = fixture("all");
    let tracer = f.provider.tracer("raw");
    {
        let g = managed_span!("step", "lens.parent");
        let active = lens::otel::trace::get_active_span(|s| s.span_context().clone());
        assert_eq!(&active, g.context().span().span_context());
        tracer.in_span("raw.child", |_| {
            let _lens_grandchild = span_cm!("lens.grandchild");
        });
    }
    let parent = f.span("lens.parent");
    let child = f.span("raw.child");
    assert_child(&child, &parent);
    assert_child(&f.span("lens.grandchild"), &child);
}

#[test]
fn tracing_opentelemetry_spans_get_the_lens_parent() {
    use lens::otel::trace::TracerProvider;
    use tracing_subscriber::layer::SubscriberExt;
    let f = fixture("all");
    let layer = tracing_opentelemetry::layer().with_tracer(f.provider.tracer("tracing"));
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        let _g = managed_span!("step", "lens.step");
        let s = tracing::info_span!("tracing.child");
        let _e = s.enter();
    });
    let parent = f.span("lens.step");
    let child = f.span("tracing.child");
    assert_child(&child, &parent);
}

#[test]
fn consumer_family_groups_gate_sites() {
    let f = common::fixture_with("default", &[&lens::megatron::FAMILY]);
    assert!(lens::megatron::INFERENCE.is_enabled());
    assert!(!lens::megatron::LAYER.is_enabled());
    assert!(managed_span!(lens::megatron::LAYER, "layer").is_none());
    drop(managed_span!(lens::megatron::INFERENCE, "gen"));
    assert_eq!(f.spans().len(), 1);
    assert!(lens::is_span_group_enabled("megatron.inference"));
}

#[test]
fn dynamic_span_names() {
    let f = fixture("all");
    for layer in 0..2 {
        let _g = managed_span!("step", format!("layer.{layer}"));
    }
    assert_eq!(f.span("layer.1").name, "layer.1");
}

#[test]
fn an_inert_guard_ignores_every_method() {
    use lens::InSpan as _;
    let f = fixture("step");
    {
        let _outer = managed_span!("step", "outer");
        let g = managed_span!("checkpoint", "ckpt.off");
        assert!(g.is_none() && !g.is_recording());
        g.set_attribute("loss", 0.5);
        g.add_event("ev", &[("k", &1)]);
        g.record_error("boom");
        g.set_status(lens::SpanStatus::Ok);
        assert!(!g.context().has_active_span());
        assert_eq!(format!("{g:?}"), "SpanGuard(inert)");
        // the outer span is still the current one, untouched
        assert!(lens::otel::Context::current()
            .span()
            .span_context()
            .is_valid());
        assert!(g.into_span().is_none());
        // an inert guard instruments nothing: the future runs in the
        // current context
        let fut = async { 1 }.in_span(managed_span!("checkpoint", "ckpt.fut"));
        assert_eq!(futures_lite_block_on(fut), 1);
    }
    let spans = f.spans();
    assert_eq!(spans.len(), 1, "only `outer`: {spans:?}");
    let outer = f.span("outer");
    assert!(outer.attributes.is_empty() && outer.events.is_empty());
    assert_eq!(outer.status, Status::Unset);
}

#[test]
fn an_enabled_guard_is_recording_and_takes_attributes_without_if_let() {
    let f = fixture("step");
    {
        let g = managed_span!("step", "on");
        assert!(!g.is_none() && g.is_recording());
        g.set_attribute("loss", 0.5);
        g.add_event("ev", &[("k", &1)]);
        assert!(!lens::SpanGuard::none().is_recording());
        assert!(!lens::SpanGuard::default().is_recording());
    }
    let on = f.span("on");
    assert_eq!(attr(&on, "loss"), Some(Value::F64(0.5)));
    assert_eq!(on.events.len(), 1);
}

/// Polls a future that never waits to completion.
fn futures_lite_block_on<F: std::future::Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("the future waited"),
    }
}
