//! `async fn` spans cover the whole future and stay correct across `.await`
//! on multi-thread and current-thread runtimes.

mod common;

use common::{assert_child, attr, fixture};
use lens::otel::trace::{Status, TraceContextExt};
use lens::otel::Value;
use lens::{managed_span, span_cm, trace_fn, Instrument};
use std::time::Duration;

#[trace_fn(group = "step", name = "rl.step", args(i))]
async fn rl_step(i: u32) -> u32 {
    let a = generate(i).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    let b = reward(a).await.unwrap();
    // the lens span is current after every `.await`
    let cur = lens::otel::Context::current();
    assert!(cur.span().span_context().is_valid());
    a + b
}

#[trace_fn(group = "forward_backward")]
async fn generate(i: u32) -> u32 {
    tokio::task::yield_now().await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    i * 2
}

#[trace_fn(group = "optimizer", err)]
async fn reward(x: u32) -> Result<u32, String> {
    tokio::task::yield_now().await;
    if x > 100 {
        Err(format!("reward overflow {x}"))?;
    }
    Ok(x + 1)
}

async fn run() {
    assert_eq!(rl_step(3).await, 13);
    assert!(reward(500).await.is_err());
    // nothing leaked into the caller's context
    assert!(!lens::otel::Context::current()
        .span()
        .span_context()
        .is_valid());
}

fn check(f: &common::Fixture) {
    let step = f.span("rl.step");
    let gen = f.span("generate");
    let rew = f.span("reward");
    assert_child(&gen, &step);
    assert_child(&rew, &step);
    assert_eq!(attr(&step, "i"), Some(Value::I64(3)));
    // the span covers the whole future, sleeps included
    let dur = step.end_time.duration_since(step.start_time).unwrap();
    assert!(dur >= Duration::from_millis(35), "span lasted only {dur:?}");
    let failed = f
        .spans()
        .into_iter()
        .rev()
        .find(|s| s.name == "reward")
        .unwrap();
    assert_eq!(failed.status, Status::error("String: reward overflow 500"));
}

fn assert_send<T: Send>(t: T) -> T {
    t
}

#[test]
fn async_fn_multi_thread_runtime() {
    let f = fixture("per_step");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // run on a worker so polls may hop threads
        tokio::spawn(assert_send(run())).await.unwrap();
    });
    check(&f);
}

#[test]
fn async_fn_current_thread_runtime() {
    let f = fixture("per_step");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run());
    check(&f);
}

#[test]
fn interleaved_tasks_keep_their_own_parents() {
    let f = fixture("per_step");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let a = rl_step(1);
        let b = rl_step(2);
        let (x, y) = tokio::join!(a, b);
        assert_eq!((x, y), (5, 9));
    });
    let spans = f.spans();
    let steps: Vec<_> = spans.iter().filter(|s| s.name == "rl.step").collect();
    assert_eq!(steps.len(), 2);
    for s in &steps {
        let kids = spans
            .iter()
            .filter(|c| c.parent_span_id == s.span_context.span_id())
            .count();
        assert_eq!(kids, 2, "each step has exactly its own generate + reward");
    }
}

#[test]
fn future_combinator_with_gated_and_detached_spans() {
    let f = fixture("step");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let out = async {
            tokio::time::sleep(Duration::from_millis(2)).await;
            let _c = span_cm!("inside");
            7
        }
        .instrument(managed_span!("step", "rollout"))
        .await;
        assert_eq!(out, 7);
        // disabled group: the future still runs, nothing is recorded
        let out = async { 8 }.instrument(managed_span!("job", "never")).await;
        assert_eq!(out, 8);
        async {}.instrument(lens::detached_span("detached")).await;
    });
    assert_child(&f.span("inside"), &f.span("rollout"));
    assert!(f.spans().iter().all(|s| s.name != "never"));
    assert_eq!(f.span("detached").name, "detached");
}

#[test]
fn dropped_future_ends_its_span() {
    let f = fixture("step");
    let fut = rl_step(1);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // poll once, then cancel
        let _ = tokio::time::timeout(Duration::from_millis(1), fut).await;
    });
    assert_eq!(f.span("rl.step").name, "rl.step");
}
