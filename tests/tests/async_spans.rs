//! `async fn` spans cover the whole future and stay correct across `.await`
//! on multi-thread and current-thread runtimes.

mod common;

use common::{assert_child, attr, fixture};
use lens::otel::trace::{Status, TraceContextExt};
use lens::otel::Value;
use lens::{managed_span, span_cm, trace_fn, InSpan};
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
        .in_span(managed_span!("step", "rollout"))
        .await;
        assert_eq!(out, 7);
        // disabled group: the future still runs, nothing is recorded
        let out = async { 8 }.in_span(managed_span!("job", "never")).await;
        assert_eq!(out, 8);
        async {}.in_span(lens::detached_span("detached")).await;
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

// --- the span is made at call time: the caller's context is kept ---------

#[trace_fn(group = "step", name = "rl.handle", args(i))]
async fn handle(i: u32) -> u32 {
    tokio::task::yield_now().await;
    let _inner = span_cm!("handle.inner");
    i
}

/// The `rl.handle` spans, each a child of `parent` with its own
/// `handle.inner` child.
fn check_children_of(f: &common::Fixture, parent: &str, n: usize) {
    let spans = f.spans();
    let parent = f.span(parent);
    let handles: Vec<_> = spans.iter().filter(|s| s.name == "rl.handle").collect();
    assert_eq!(handles.len(), n);
    for h in handles {
        assert_child(h, &parent);
        let inner = spans
            .iter()
            .filter(|s| s.name == "handle.inner" && s.parent_span_id == h.span_context.span_id())
            .count();
        assert_eq!(inner, 1);
    }
}

#[test]
fn spawned_async_fn_keeps_the_callers_trace() {
    let f = fixture("step");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let tasks: Vec<_> = {
            let _req = span_cm!("request");
            // made here, inside `request`; polled later on a worker
            (0..4).map(|i| tokio::spawn(handle(i))).collect()
        };
        for (i, t) in tasks.into_iter().enumerate() {
            assert_eq!(t.await.unwrap(), i as u32);
        }
    });
    check_children_of(&f, "request", 4);
}

#[test]
fn join_all_of_async_fns_keeps_the_callers_trace() {
    let f = fixture("step");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let futs = {
        let _batch = span_cm!("batch");
        (0..3).map(handle).collect::<Vec<_>>()
    };
    // polled outside `batch`, all together
    let out = rt.block_on(futures_util::future::join_all(futs));
    assert_eq!(out, [0, 1, 2]);
    check_children_of(&f, "batch", 3);
}

#[test]
fn future_first_polled_on_another_thread_keeps_the_callers_trace() {
    let f = fixture("step");
    let fut = {
        let _caller = span_cm!("caller");
        handle(9)
    };
    let out = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(fut)
    })
    .join()
    .unwrap();
    assert_eq!(out, 9);
    check_children_of(&f, "caller", 1);
    assert_eq!(attr(&f.span("rl.handle"), "i"), Some(Value::I64(9)));
}

#[test]
fn async_fn_with_its_group_off_records_nothing_and_still_runs() {
    let f = fixture("job");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    assert_eq!(rt.block_on(handle(3)), 3);
    let names: Vec<_> = f.spans().iter().map(|s| s.name.to_string()).collect();
    assert_eq!(names, ["handle.inner"]);
}

struct Corpus {
    docs: Vec<String>,
}

impl Corpus {
    /// Borrows `self` into its output, across the call-time span.
    #[trace_fn(group = "step", name = "corpus.longest")]
    async fn longest(&self, min: &usize) -> &str {
        tokio::task::yield_now().await;
        self.docs
            .iter()
            .filter(|d| d.len() >= *min)
            .max_by_key(|d| d.len())
            .map_or("", String::as_str)
    }
}

#[trace_fn(group = "step", name = "strip")]
async fn strip<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.strip_prefix(prefix).unwrap_or(text)
}

#[test]
fn borrowing_async_fns_keep_their_lifetimes() {
    let f = fixture("step");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let c = Corpus {
        docs: vec!["ab".to_owned(), "abcd".to_owned()],
    };
    let prefix = String::from("v1-");
    let (longest, stripped) = {
        let _p = span_cm!("parent");
        (c.longest(&1), strip("v1-model", &prefix))
    };
    assert_eq!(rt.block_on(longest), "abcd");
    assert_eq!(rt.block_on(stripped), "model");
    assert_child(&f.span("corpus.longest"), &f.span("parent"));
    assert_child(&f.span("strip"), &f.span("parent"));
}
