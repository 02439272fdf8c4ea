//! The `tracing` bridge: `tracing` spans become lens spans in lens's own
//! pipeline (an in-memory exporter here), gated by span groups, with
//! parents both ways across threads and `.await`s.

mod common;

use common::{assert_child, attr, fixture};
use lens::otel::trace::Status;
use lens::otel::Value;
use lens::otel_sdk::trace::SpanData;
use lens::tracing::TracingBridge;
use lens::{groups, managed_span, span_cm, InSpan as _};
use std::time::Duration;
use tracing::Instrument as _;
use tracing_subscriber::layer::SubscriberExt as _;

/// A dispatcher holding only the bridge.
fn dispatch(bridge: TracingBridge) -> tracing::Dispatch {
    tracing::Dispatch::new(tracing_subscriber::registry().with(bridge.layer()))
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn by_id(spans: &[SpanData], id: lens::otel::trace::SpanId) -> &SpanData {
    spans
        .iter()
        .find(|s| s.span_context.span_id() == id)
        .unwrap_or_else(|| panic!("no span with id {id}"))
}

// --- candle-shaped: spans made once at load, entered on every forward ----

mod candle_transformers {
    pub(crate) mod models {
        /// candle's own target (this module's path starts with the test's
        /// crate name).
        const T: &str = "candle_transformers::models::llama";

        /// One transformer block, instrumented the way candle does it: the
        /// spans are created in the constructor and entered in `forward`.
        pub(crate) struct Block {
            span: tracing::Span,
            attn: tracing::Span,
            mlp: tracing::Span,
        }

        impl Block {
            pub(crate) fn load(i: usize) -> Block {
                Block {
                    span: tracing::span!(target: T, tracing::Level::TRACE, "block", index = i),
                    attn: tracing::span!(target: T, tracing::Level::TRACE, "attn"),
                    mlp: tracing::span!(target: T, tracing::Level::TRACE, "mlp"),
                }
            }

            pub(crate) fn forward(&self, x: f32) -> f32 {
                let _enter = self.span.enter();
                let y = {
                    let _a = self.attn.enter();
                    x * 2.0
                };
                let _m = self.mlp.enter();
                y + 1.0
            }
        }
    }
}

#[test]
fn per_entry_spans_made_once_entered_n_times() {
    use candle_transformers::models::Block;
    let f = fixture("forward_backward,step");
    let bridge =
        TracingBridge::new().route_per_entry("candle_transformers", &groups::FORWARD_BACKWARD);
    tracing::dispatcher::with_default(&dispatch(bridge), || {
        // load: the spans exist from here on, nothing is recorded yet
        let blocks: Vec<Block> = (0..2).map(Block::load).collect();
        for step in 0..3u64 {
            let _s = managed_span!("step", "train.step", "dl.iteration" = step);
            let mut x = 1.0;
            for b in &blocks {
                x = b.forward(x);
            }
        }
        drop(blocks);
    });
    let spans = f.spans();
    let steps = named(&spans, "train.step");
    assert_eq!(steps.len(), 3);
    let blocks = named(&spans, "block");
    assert_eq!(blocks.len(), 6, "2 blocks x 3 forwards");
    for b in &blocks {
        let step = by_id(&spans, b.parent_span_id);
        assert_eq!(
            step.name, "train.step",
            "a block entry is a child of its step"
        );
        assert_child(b, step);
        assert!(attr(b, "index").is_some(), "fields recorded at creation");
    }
    for (name, n) in [("attn", 6), ("mlp", 6)] {
        let kids = named(&spans, name);
        assert_eq!(kids.len(), n, "{name}");
        for k in kids {
            assert_eq!(by_id(&spans, k.parent_span_id).name, "block", "{name}");
        }
    }
    // each block entry holds exactly its own attn + mlp
    for b in &blocks {
        let kids = spans
            .iter()
            .filter(|s| s.parent_span_id == b.span_context.span_id())
            .count();
        assert_eq!(kids, 2);
    }
}

#[test]
fn per_entry_group_is_tested_at_each_entry() {
    use candle_transformers::models::Block;
    let f = fixture("step");
    let bridge =
        TracingBridge::new().route_per_entry("candle_transformers", &groups::FORWARD_BACKWARD);
    tracing::dispatcher::with_default(&dispatch(bridge), || {
        // made while the group is off, entered once it is on
        let block = Block::load(0);
        block.forward(1.0);
        lens::set_enabled_span_groups(
            &lens::SpanGroupSet::resolve("forward_backward", &[]).unwrap(),
        );
        block.forward(1.0);
        lens::set_enabled_span_groups(&lens::SpanGroupSet::none());
        block.forward(1.0);
    });
    let spans = f.spans();
    assert_eq!(named(&spans, "block").len(), 1);
    assert_eq!(named(&spans, "attn").len(), 1);
}

// --- async: one span however often it is polled --------------------------

mod my_server {
    use std::time::Duration;

    #[tracing::instrument(target = "my_server::handlers", fields(prompt_tokens = 3))]
    pub(crate) async fn handle(polls: u32) -> u32 {
        for _ in 0..polls {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        let _inner = lens::span_cm!("lens.inside.handler");
        polls
    }
}

#[test]
fn instrumented_async_fn_polled_many_times_is_one_span() {
    let f = fixture("job");
    let bridge = TracingBridge::new().route("my_server", &groups::JOB);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let d = dispatch(bridge);
    tracing::dispatcher::with_default(&d, || {
        rt.block_on(async {
            let _root = span_cm!("caller");
            assert_eq!(my_server::handle(50).await, 50);
        })
    });
    let spans = f.spans();
    let handle = named(&spans, "handle");
    assert_eq!(handle.len(), 1, "one span for 50+ polls");
    let handle = handle[0];
    assert_child(handle, &f.span("caller"));
    assert_child(&f.span("lens.inside.handler"), handle);
    assert_eq!(attr(handle, "polls"), Some(Value::I64(50)));
    assert_eq!(attr(handle, "prompt_tokens"), Some(Value::I64(3)));
    let dur = handle.end_time.duration_since(handle.start_time).unwrap();
    assert!(
        dur >= Duration::from_millis(5),
        "covers the whole future: {dur:?}"
    );
}

// --- gating ---------------------------------------------------------------

#[test]
fn gating_by_target_group_and_level() {
    let f = fixture("step");
    let bridge = TracingBridge::new()
        .route("app", &groups::STEP)
        .route_off("app::noisy")
        .route("app::ckpt", &groups::CHECKPOINT)
        .level(tracing::Level::DEBUG);
    tracing::dispatcher::with_default(&dispatch(bridge), || {
        tracing::info_span!(target: "app::train", "kept").in_scope(|| {});
        tracing::info_span!(target: "app::noisy", "off.target").in_scope(|| {});
        tracing::info_span!(target: "app::ckpt", "group.off").in_scope(|| {});
        tracing::info_span!(target: "other", "no.route").in_scope(|| {});
        tracing::trace_span!(target: "app", "below.floor").in_scope(|| {});
        tracing::info_span!(target: "apps", "not.a.module.below").in_scope(|| {});
        lens::set_enabled_span_groups(&lens::SpanGroupSet::resolve("checkpoint", &[]).unwrap());
        tracing::info_span!(target: "app::ckpt", "group.on").in_scope(|| {});
        tracing::info_span!(target: "app::train", "step.now.off").in_scope(|| {});
    });
    let names: Vec<String> = f.spans().iter().map(|s| s.name.to_string()).collect();
    assert_eq!(names, ["kept", "group.on"]);
}

/// Counts the spans another layer of the subscriber sees.
#[derive(Clone, Default)]
struct Seen(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Seen {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        self.0
            .lock()
            .unwrap()
            .push(attrs.metadata().name().to_owned());
    }
}

#[test]
fn other_layers_see_what_the_bridge_does_not_route() {
    for global in [false, true] {
        let f = fixture("step");
        let seen = Seen::default();
        let subscriber = tracing_subscriber::registry().with(seen.clone()).with(
            TracingBridge::new()
                .route("app", &groups::CHECKPOINT)
                .global_filter(global)
                .layer(),
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::info_span!(target: "elsewhere", "unrouted").in_scope(|| {});
            // routed to a group that is off: hidden from lens alone, or
            // (global) not created for any layer
            tracing::info_span!(target: "app", "routed.off").in_scope(|| {});
        });
        let expect: &[&str] = if global {
            &["unrouted"]
        } else {
            &["unrouted", "routed.off"]
        };
        assert_eq!(*seen.0.lock().unwrap(), expect, "global_filter({global})");
        assert!(f.spans().is_empty());
    }
}

// --- side by side with `fmt` ---------------------------------------------

/// What a `fmt` layer writes, shared with the test.
#[derive(Clone, Default)]
struct Buf(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Buf {
    type Writer = Buf;
    fn make_writer(&'a self) -> Buf {
        self.clone()
    }
}

/// A `fmt` layer and the bridge in one subscriber, `app` routed to `group`:
/// what `fmt` printed, what lens recorded, and the span's line.
fn fmt_and_lens(group: &'static lens::SpanGroup, global: bool) -> (String, Vec<SpanData>, u32) {
    let f = fixture("step");
    let buf = Buf::default();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(buf.clone()))
        .with(
            TracingBridge::new()
                .route("app", group)
                .global_filter(global)
                .layer(),
        );
    let line = tracing::subscriber::with_default(subscriber, || {
        // a span of `app`, and an event inside it: `fmt` prints the event
        // with the span's name when it sees the span
        let span = tracing::info_span!(target: "app::model", "model.forward", layer = 3);
        let line = line!() - 1;
        span.in_scope(|| tracing::info!(target: "app::model", "inside"));
        line
    });
    let printed = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    (printed, f.spans(), line)
}

#[test]
fn fmt_sees_spans_whose_group_is_off_unless_the_filter_is_global() {
    // group off: fmt still sees the span (per layer), lens does not
    let (printed, spans, _) = fmt_and_lens(&groups::CHECKPOINT, false);
    assert!(printed.contains("model.forward{layer=3}"), "{printed}");
    assert!(printed.contains("inside"), "{printed}");
    assert!(spans.is_empty(), "{spans:?}");

    // group off, global: the span is not created, fmt prints the event alone
    let (printed, spans, _) = fmt_and_lens(&groups::CHECKPOINT, true);
    assert!(!printed.contains("model.forward"), "{printed}");
    assert!(printed.contains("inside"), "{printed}");
    assert!(spans.is_empty(), "{spans:?}");

    // group on: both see it, in both modes
    for global in [false, true] {
        let (printed, spans, _) = fmt_and_lens(&groups::STEP, global);
        assert!(printed.contains("model.forward{layer=3}"), "{printed}");
        assert_eq!(named(&spans, "model.forward").len(), 1, "{spans:?}");
    }
}

#[test]
fn lens_records_beside_a_fmt_layer_with_its_own_filter() {
    // fmt keeps WARN and above as a per-layer filter: it does not want the
    // INFO span, lens (group on) does, in both modes
    use tracing_subscriber::Layer as _;
    for global in [false, true] {
        let f = fixture("step");
        let buf = Buf::default();
        let fmt = tracing_subscriber::fmt::layer()
            .with_writer(buf.clone())
            .with_filter(tracing_subscriber::filter::LevelFilter::WARN);
        let subscriber = tracing_subscriber::registry().with(fmt).with(
            TracingBridge::new()
                .route("app", &groups::STEP)
                .global_filter(global)
                .layer(),
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::info_span!(target: "app", "quiet.for.fmt").in_scope(|| {
                tracing::warn!(target: "app", "loud");
            });
        });
        let printed = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert!(printed.contains("loud"), "{printed}");
        assert!(!printed.contains("quiet.for.fmt"), "{printed}");
        assert_eq!(
            named(&f.spans(), "quiet.for.fmt").len(),
            1,
            "global_filter({global})"
        );
    }
}

#[test]
fn bridged_spans_carry_their_callsite() {
    let (_, spans, line) = fmt_and_lens(&groups::STEP, false);
    let s = named(&spans, "model.forward")[0];
    assert_eq!(attr(s, "code.namespace"), Some(Value::from("app::model")));
    let Some(Value::String(file)) = attr(s, "code.file.path") else {
        panic!("no code.file.path: {:?}", s.attributes);
    };
    assert!(file.as_str().ends_with("tracing_bridge.rs"), "{file}");
    assert_eq!(
        attr(s, "code.line.number"),
        Some(Value::I64(i64::from(line)))
    );
    assert_eq!(attr(s, "layer"), Some(Value::I64(3)));
    // per-entry spans carry it too
    let f = fixture("step");
    tracing::dispatcher::with_default(
        &dispatch(TracingBridge::new().route_per_entry("app", &groups::STEP)),
        || {
            let span = tracing::info_span!(target: "app::block", "block");
            span.in_scope(|| {});
        },
    );
    let spans = f.spans();
    let s = named(&spans, "block")[0];
    assert_eq!(attr(s, "code.namespace"), Some(Value::from("app::block")));
    assert!(attr(s, "code.line.number").is_some(), "{:?}", s.attributes);
}

#[test]
fn default_group_from_the_environment() {
    let f = fixture("step");
    let env = |v: &str| match v {
        "NEMO_LENS_TRACING_DEFAULT" => Some("step".to_owned()),
        "NEMO_LENS_TRACING_GROUPS" => Some("quiet=off".to_owned()),
        _ => None,
    };
    let bridge = TracingBridge::from_lookup(&[], env).unwrap();
    tracing::dispatcher::with_default(&dispatch(bridge), || {
        tracing::info_span!(target: "anything", "by.default").in_scope(|| {});
        tracing::info_span!(target: "quiet::x", "switched.off").in_scope(|| {});
        tracing::info_span!(target: "opentelemetry_sdk", "never.otel").in_scope(|| {});
        tracing::info_span!(target: "hyper::proto", "never.network.by.default").in_scope(|| {});
    });
    let names: Vec<String> = f.spans().iter().map(|s| s.name.to_string()).collect();
    assert_eq!(names, ["by.default"]);
}

#[test]
fn bad_environment_values_name_variable_value_and_choices() {
    for (var, value, expect) in [
        (
            "NEMO_LENS_TRACING_GROUPS",
            "candle=layr",
            "`layr` is not a group",
        ),
        (
            "NEMO_LENS_TRACING_GROUPS",
            "candle=step:sometimes",
            "`lifetime` or `per_entry`",
        ),
        (
            "NEMO_LENS_TRACING_DEFAULT",
            "everything",
            "a span group name or `off`",
        ),
        (
            "NEMO_LENS_TRACING_LEVEL",
            "verbose",
            "trace, debug, info, warn, error",
        ),
    ] {
        let e = TracingBridge::from_lookup(&[], |v: &str| (v == var).then(|| value.to_owned()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(var) && e.contains(value) && e.contains(expect),
            "{e}"
        );
    }
    // a consumer family's groups are valid without passing it: every
    // family declared in the program is linked into the registry
    lens::define_span_group! { pub llm { groups: [layer] } }
    let env = |v: &str| {
        (v == "NEMO_LENS_TRACING_GROUPS").then(|| "candle=llm.layer:per_entry".to_owned())
    };
    TracingBridge::from_lookup(&[], env).unwrap();
    TracingBridge::from_lookup(&[&llm::FAMILY], env).unwrap();
}

// --- parents both ways across tokio::spawn --------------------------------

#[tracing::instrument(target = "app")]
async fn tracing_leaf(i: u32) -> u32 {
    tokio::time::sleep(Duration::from_millis(1)).await;
    let _l = span_cm!("lens.leaf");
    i
}

/// A lens `async fn`: its span is made when called, inside `request`.
#[lens::trace_fn(group = "step", name = "lens.handler")]
async fn lens_handler() -> u32 {
    tokio::task::yield_now().await;
    1
}

#[tracing::instrument(target = "app", skip_all)]
async fn request() -> u32 {
    // spawned plainly: the call captures `request` as the parent
    let handler = tokio::spawn(lens_handler());
    // a lens span inside the tracing span, in a task on another worker
    // `lens::InSpan` and `tracing::Instrument` in scope: `.in_span` and `.in_current_span`
    let worker = async {
        tokio::task::yield_now().await;
        tracing_leaf(7).await
    }
    .in_span(lens::detached_span("lens.worker"));
    let task = tokio::spawn(worker.in_current_span());
    task.await.unwrap() * handler.await.unwrap()
}

#[test]
fn mixed_lens_and_tracing_tree_across_tokio_spawn() {
    let f = fixture("step");
    let d = dispatch(TracingBridge::new().route("app", &groups::STEP));
    let rt = {
        let d = d.clone();
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d)))
            .build()
            .unwrap()
    };
    tracing::dispatcher::with_default(&d, || {
        rt.block_on(async {
            // an instrumented `async fn` makes its span on first poll: the
            // spawned task carries the caller's context to it
            use lens::otel::context::FutureExt as _;
            let spawned = async {
                tokio::spawn(request().with_current_context())
                    .await
                    .unwrap()
            };
            let out = spawned.in_span(lens::detached_span("lens.root")).await;
            assert_eq!(out, 7);
        })
    });
    drop(rt);
    let spans = f.spans();
    let root = f.span("lens.root");
    let req = f.span("request");
    let worker = f.span("lens.worker");
    let leaf = f.span("tracing_leaf");
    let lens_leaf = f.span("lens.leaf");
    assert_child(&req, &root); // tracing inside lens
    assert_child(&worker, &req); // lens inside tracing, another task
    assert_child(&leaf, &worker); // tracing inside lens again
    assert_child(&lens_leaf, &leaf);
    assert_child(&f.span("lens.handler"), &req); // a spawned #[trace_fn] async fn
    assert_eq!(
        spans.len(),
        6,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    assert!(spans
        .iter()
        .all(|s| s.span_context.trace_id() == root.span_context.trace_id()));
}

#[test]
fn explicit_parent_and_root() {
    let f = fixture("step");
    tracing::dispatcher::with_default(
        &dispatch(TracingBridge::new().route("app", &groups::STEP)),
        || {
            let outer = tracing::info_span!(target: "app", "outer");
            let _lens = span_cm!("lens.current");
            tracing::info_span!(target: "app", parent: &outer, "explicit.child").in_scope(|| {});
            tracing::info_span!(target: "app", parent: None, "explicit.root").in_scope(|| {});
            tracing::info_span!(target: "app", "contextual").in_scope(|| {});
            drop(outer);
        },
    );
    assert_child(&f.span("explicit.child"), &f.span("outer"));
    assert_child(&f.span("contextual"), &f.span("lens.current"));
    let root = f.span("explicit.root");
    assert_eq!(root.parent_span_id, lens::otel::trace::SpanId::INVALID);
    assert_ne!(
        root.span_context.trace_id(),
        f.span("outer").span_context.trace_id()
    );
}

// --- fields, redaction, events ---------------------------------------------

#[test]
fn fields_are_redacted_like_lens_attributes() {
    let f = fixture("step");
    tracing::dispatcher::with_default(
        &dispatch(TracingBridge::new().route("app", &groups::STEP)),
        || {
            let span = tracing::info_span!(
                target: "app",
                "generate",
                prompt = "tell me a secret",
                prompt_tokens = 5_u64,
                api_key = tracing::field::Empty,
                model = "m",
                temperature = 0.5,
                debug = ?vec![1, 2],
                otel.kind = "client",
            );
            span.record("api_key", "sk-123");
            span.in_scope(|| {
                tracing::info!(target: "app", prompt = "event text", tokens = 3, "sampled");
                tracing::error!(target: "app", "decode failed");
            });
        },
    );
    let s = f.span("generate");
    assert_eq!(attr(&s, "prompt"), Some(Value::from("[REDACTED]")));
    assert_eq!(attr(&s, "api_key"), Some(Value::from("[REDACTED]")));
    assert_eq!(attr(&s, "prompt_tokens"), Some(Value::I64(5)));
    assert_eq!(attr(&s, "model"), Some(Value::from("m")));
    assert_eq!(attr(&s, "temperature"), Some(Value::F64(0.5)));
    assert_eq!(attr(&s, "debug"), Some(Value::from("[1, 2]")));
    assert_eq!(s.span_kind, lens::otel::trace::SpanKind::Client);
    let events = &s.events.events;
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].name, "sampled");
    let ev = |k: &str| {
        events[0]
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == k)
            .map(|kv| kv.value.clone())
    };
    assert_eq!(ev("prompt"), Some(Value::from("[REDACTED]")));
    assert_eq!(ev("tokens"), Some(Value::I64(3)));
    assert_eq!(ev("level"), Some(Value::from("INFO")));
    assert_eq!(events[1].name, "decode failed");
    assert_eq!(s.status, Status::error("decode failed"));
}

#[test]
fn events_become_log_records_when_the_log_bridge_is_on() {
    use lens::logs::{setup_logging_bridge_with_provider, LogBridgeOptions};
    use lens::otel_sdk::logs::{InMemoryLogExporter, SdkLoggerProvider};
    let f = fixture("step");
    let logs = InMemoryLogExporter::default();
    let provider = SdkLoggerProvider::builder()
        .with_simple_exporter(logs.clone())
        .build();
    setup_logging_bridge_with_provider(&provider, LogBridgeOptions::new().with_log(false)).unwrap();
    let bridge = TracingBridge::new().route("app", &groups::STEP);
    // with a LogBridgeLayer in the same subscriber too: still once
    let subscriber = tracing_subscriber::registry()
        .with(bridge.layer())
        .with(lens::logs::LogBridgeLayer::new());
    tracing::subscriber::with_default(subscriber, || {
        tracing::info_span!(target: "app", "with.logs").in_scope(|| {
            tracing::info!(target: "app", prompt = "x", "as a log record");
        });
        tracing::info!(target: "app", "outside any span");
    });
    // back to span events for the other tests
    setup_logging_bridge_with_provider(
        &provider,
        LogBridgeOptions::new().with_log(false).with_tracing(false),
    )
    .unwrap();
    let s = f.span("with.logs");
    assert!(s.events.events.is_empty(), "never both");
    let records = logs.get_emitted_logs().unwrap();
    assert_eq!(records.len(), 2, "each event once");
    let r = &records[0].record;
    assert_eq!(
        r.trace_context().map(|t| t.span_id),
        Some(s.span_context.span_id()),
        "the record carries the bridged span's ids"
    );
}

// --- end to end: the probe as its own process, a real collector ------------

#[test]
fn bridged_spans_reach_the_collector_in_one_trace() {
    use tests::{get, Rotel};
    let rotel = Rotel::start();
    let mut cmd = tests::lens_command(env!("CARGO_BIN_EXE_lens-probe"));
    cmd.args(["tracing", "sync"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", rotel.grpc_endpoint())
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .env("NEMO_LENS_RUN_ID", "tracing-bridge")
        .env(
            "NEMO_LENS_TRACING_GROUPS",
            "probe_model=forward_backward:per_entry,probe_server=step",
        );
    tests::run_ok(&mut cmd);
    let r = rotel.wait_for(Duration::from_secs(20), "bridged spans", |r| {
        r.spans_named("probe.block").len() == 3 && !r.spans_named("probe.lens.child").is_empty()
    });
    let job = r.span("probe.job");
    let steps = r.spans_named("probe.step");
    let blocks = r.spans_named("probe.block");
    assert_eq!((steps.len(), blocks.len()), (3, 3));
    for b in &blocks {
        assert!(
            steps.iter().any(|s| s.span_id == b.parent_id),
            "each entry is a child of its step"
        );
        assert_eq!(b.trace_id, job.trace_id);
        assert_eq!(get(&b.attributes, "index"), Some("0"));
        assert_eq!(
            b.scope.split_whitespace().next(),
            Some(lens::SCOPE_NAME),
            "lens's own tracer"
        );
    }
    let req = r.span("probe.request");
    assert_eq!(req.parent_id, job.span_id);
    assert_eq!(get(&req.attributes, "prompt"), Some("[REDACTED]"));
    assert_eq!(req.events.len(), 1);
    assert_eq!(req.events[0].name, "generated");
    let child = r.span("probe.lens.child");
    assert_eq!(
        child.parent_id, req.span_id,
        "a lens span inside a bridged span"
    );
}
