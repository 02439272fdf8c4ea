//! # Lens for Rust
//!
//! OpenTelemetry instrumentation for distributed ML training, RL
//! post-training and inference: the Rust member of the `nemo-lens` family
//! (same span groups, `NEMO_LENS_*` variables and attribute names).
//!
//! * **Nothing when off.** A site whose [span group](SpanGroup) is disabled
//!   costs one relaxed atomic load and a branch: no allocation, no clock
//!   read, and its attribute expressions are not evaluated.
//! * **Checked at compile time.** `#[trace_fn(group = "stpe")]` does not
//!   compile; consumer groups are named by path, so rustc checks them too.
//! * **Never the reason a job fails.** A collector that is down or hangs, a
//!   full disk: [`shutdown`](TelemetryHandle::shutdown) returns a
//!   [`ShutdownReport`] within its deadline and prints one warning line; it
//!   is not an error.
//! * **Optional.** With `default-features = false` this crate is API +
//!   macros, with no OpenTelemetry SDK in the dependency tree; spans go to
//!   whatever global provider the application installs (none: no-op).
//!
//! ## Setup, export and shutdown
//!
//! ```no_run
//! use lens::trace_fn;
//!
//! #[trace_fn(group = "step", name = "train.step", fields("dl.iteration" = step))]
//! fn train_step(step: u64) -> f64 {
//!     0.5 / (step + 1) as f64
//! }
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // NEMO_LENS_* configure it; rank and world come from torchrun, mpirun or srun
//!     let telemetry = lens::setup_telemetry_from_env()?;
//!     for step in 0..3 {
//!         train_step(step);
//!     }
//!     // lost telemetry (collector down, disk full) is one warning line on
//!     // stderr and a report, never an error: the job's exit status is its own
//!     telemetry.shutdown(std::time::Duration::from_secs(10));
//!     Ok(())
//! }
//! ```
//!
//! Run it with `NEMO_LENS_ENABLED=1 NEMO_LENS_EXPORTER=file
//! NEMO_LENS_SPAN_GROUPS=per_step cargo run`: the spans go to
//! `lens-telemetry/<run>-rank0.otlp.jsonl`, which `lens report` reads (or
//! `lens record -- cargo run` sets the variables and prints the report).
//! Without setup, sites record into the global OpenTelemetry provider, and
//! span groups can be switched on in code:
//!
//! ```
//! use lens::{managed_span, span_cm, trace_fn};
//!
//! #[trace_fn(group = "step", name = "train.step", fields("dl.iteration" = it))]
//! fn train_step(it: u64) -> f64 {
//!     let _fb = managed_span!("forward_backward", "forward_backward", microbatches = 4);
//!     0.5
//! }
//!
//! lens::set_enabled_span_groups(&lens::SpanGroupSet::resolve("per_step", &[]).unwrap());
//! let _eval = span_cm!("eval.pass", samples = 128);
//! let loss = train_step(1);
//! # let _ = loss;
//! # lens::set_enabled_span_groups(&lens::SpanGroupSet::none());
//! ```
//!
//! Span groups are switched on from configuration ([`LensConfig`], the
//! `NEMO_LENS_SPAN_GROUPS` variable) or at run time with
//! [`set_enabled_span_groups`].
//!
//! ## Guides
//!
//! The user guides are part of these docs, one module each, under
//! [`guide`]: [getting started](guide::getting_started),
//! [configuration](guide::configuration), [span groups](guide::span_groups),
//! [distributed jobs](guide::distributed), [the `tracing`
//! bridge](guide::tracing_bridge) (with candle), [metrics](guide::metrics),
//! [serving](guide::serving), [the `lens` command](guide::lens_command) and
//! [running at scale](guide::at_scale).

#![deny(missing_docs)]
// the facade re-exports; every unsafe block lives in lens-runtime
#![forbid(unsafe_code)]
// docs.rs (`--cfg docsrs`): "Available on crate feature … only" badges
#![cfg_attr(docsrs, feature(doc_cfg))]

extern crate self as lens;

/// The user guides: the pages of `docs/guide/` in the repository, included
/// here so that every Rust block in them is compiled as a doctest.
#[doc = include_str!("../guide/index.md")]
pub mod guide {
    #[doc = include_str!("../guide/getting-started.md")]
    pub mod getting_started {}
    #[doc = include_str!("../guide/configuration.md")]
    pub mod configuration {}
    #[doc = include_str!("../guide/span-groups.md")]
    pub mod span_groups {}
    #[doc = include_str!("../guide/distributed.md")]
    pub mod distributed {}
    #[doc = include_str!("../guide/tracing-bridge.md")]
    pub mod tracing_bridge {}
    #[doc = include_str!("../guide/metrics.md")]
    pub mod metrics {}
    #[doc = include_str!("../guide/serving.md")]
    pub mod serving {}
    #[doc = include_str!("../guide/lens-command.md")]
    pub mod lens_command {}
    #[doc = include_str!("../guide/at-scale.md")]
    pub mod at_scale {}
}

/// Instruments a function, method or `async fn` with a span whose group
/// gates it.
///
/// Options (each at most once):
///
/// | option | meaning |
/// |---|---|
/// | `group = "step"` | a base group (checked at compile time) — required |
/// | `group = megatron::MICROBATCH` | a consumer group, by path |
/// | `name = "train.step"` | span name (default: the function's name) |
/// | `fields(k = expr, "a.b" = expr, c.d = expr, e)` | attributes, evaluated only when the group is on |
/// | `fields(%x, ?y, k = %expr, k = ?expr)` | the `Display` (`%`) or `Debug` (`?`) text of a value; `%x` stands for `x = %x` |
/// | `args(a, b)` | record these scalar parameters (none are recorded by default) |
/// | `err`, `err(Display)` | an `Err` return sets ERROR status `TypeName: message` and adds an `exception` event (type, message, stack trace when `RUST_BACKTRACE` is on) |
/// | `err(Debug)` | the same with the error's `Debug` text as the message |
/// | `ret` | records the return value as the `return` attribute (a scalar; with `err`, only the `Ok` value) |
/// | `ret(Ok)` | records only the `Ok` value of a returned `Result` (its `Err` is not recorded unless `err` is given too) |
/// | `kind = server` | the span kind: `internal` (default), `server`, `client`, `producer`, `consumer` |
/// | `parent = expr` | an explicit parent instead of the current context: a [`LensSpan`], [`SpanGuard`], `Context` or `SpanContext`, by reference, or an `Option` of one ([`IntoParentContext`]) |
/// | `links(expr, ...)` | follows-from links to other spans ([`IntoLink`]) |
/// | `crate = path` | where the generated code finds lens (default `::lens`), for a crate that re-exports it: `crate = ::my_crate::lens` |
///
/// `managed_span!`, `span_cm!` and `define_span_group!` take the same
/// `crate = path` as their first argument.
///
/// ```
/// use lens::{trace_fn, LensSpan};
///
/// #[trace_fn(group = "job", kind = server, parent = request, links(batch), ret)]
/// fn handle(request: &lens::otel::Context, batch: &LensSpan) -> u64 {
///     200
/// }
/// let batch = lens::detached_span("batch");
/// handle(&lens::otel::Context::current(), &batch);
/// ```
///
/// ```
/// use lens::trace_fn;
///
/// #[trace_fn(group = "checkpoint", name = "ckpt.save", args(step), err)]
/// fn save(step: u64, path: &str) -> Result<(), std::io::Error> {
///     let _ = path;
///     Ok(())
/// }
///
/// struct Trainer { lr: f64 }
/// impl Trainer {
///     #[trace_fn(group = "optimizer", fields(lr = self.lr, trainer = ?self.lr))]
///     fn update(&mut self) {}
///
///     #[trace_fn(group = "step", ret(Ok), err(Debug))]
///     fn loss(&self) -> Result<f64, std::num::ParseFloatError> { "0.5".parse() }
///
///     #[trace_fn(group = lens::megatron::MICROBATCH)]
///     async fn microbatch(&self, i: usize) -> usize { i }
/// }
/// save(10, "/tmp/x").unwrap();
/// ```
///
/// A synchronous function expands to (roughly):
///
/// ```text
/// fn save(step: u64, path: &str) -> Result<(), io::Error> {
///     let on = CHECKPOINT.is_enabled();                       // one relaxed load
///     let guard = if on {
///         start_span("ckpt.save", vec![KeyValue("step", step)])
///     } else { SpanGuard::none() };                           // inert
///     let body = move |step, path| -> Result<(), io::Error> { /* body */ };
///     if on {
///         let ret = call(body, step, path);                    // #[inline(never)]
///         record_result(&guard, &ret);                         // only with `err`
///         ret
///     } else {
///         call(body, step, path)                               // a tail call
///     }
/// }
/// ```
///
/// The body is written once, in a closure that `return` and `?` come back
/// to, called out of line from both branches. A disabled site is then a
/// load, a test and a jump to the body, with no guard held across it and no
/// stack frame of its own (callgrind: bare + 4 instructions, the cost of the
/// same test written by hand; `docs/PERFORMANCE.md`). Plain parameters are
/// passed to the closure as arguments, in the registers the function got
/// them in; `self` and patterns are captured. A `#[track_caller]` function
/// without `err`/`ret` keeps its body inline (so `Location::caller()` is
/// its caller's) and holds the guard across it.
///
/// An `async fn` creates its span when it is *called* (a child of the
/// caller's current context, as for a synchronous function) and returns its
/// body as a future that attaches the span's context on every poll (never
/// across an `.await`), so the span covers the whole future and
/// `tokio::spawn(handle(req))`, `join_all` or a first poll on another thread
/// keep the caller's trace. For that the macro writes it as a `fn` returning
/// `impl Future` (the signature rustdoc shows); a lifetime hidden in a path
/// argument (`x: Foo` for `Foo<'a>`) must then be written (`Foo<'_>`).
///
/// ```text
/// async fn handle(&self, n: u64) -> u64 { body }
/// // becomes
/// fn handle<'l0>(&'l0 self, n: u64) -> impl Future<Output = u64> + Captures<(&'l0 (), ..)> {
///     let span = if JOB.is_enabled() { Some(start_detached("handle", attrs)) } else { None };
///     instrument(async move { body }, span)
/// }
/// ```
#[doc(inline)]
pub use lens_macros::trace_fn;

/// Opens a span if its group is enabled; evaluates to a [`SpanGuard`],
/// inert when the group is off (no span, every method a no-op, no
/// attribute evaluated).
///
/// `managed_span!(group, name, key = value, ...)`: the group is a base group
/// literal or a consumer group path; the name any expression convertible to
/// `Cow<'static, str>` (a literal costs nothing). Fields take the forms of
/// `#[trace_fn(fields(...))]`: `key = value`, `x`, `%x` / `key = %expr`
/// (`Display`), `?x` / `key = ?expr` (`Debug`). `crate = path` may come
/// first, for a crate that re-exports lens.
///
/// ```
/// use lens::managed_span;
/// #[derive(Debug)]
/// enum Phase { Warmup }
/// let phase = Phase::Warmup;
/// for i in 0..3u64 {
///     let step = managed_span!("step", "train.step", iteration = i, "nv.dl.rank" = 0, ?phase);
///     step.set_attribute("loss", 0.1 * i as f64); // nothing when `step` is off
///     if step.is_recording() {
///         step.set_attribute("summary", format!("{i} of 3")); // formatted only when recorded
///     }
/// }
/// ```
///
/// Expands to:
///
/// ```text
/// if STEP.is_enabled() { start_span("train.step", vec![...]) } else { SpanGuard::none() }
/// ```
#[doc(inline)]
pub use lens_macros::managed_span;

/// Opens an always-on span (not gated by any group); evaluates to a
/// [`SpanGuard`].
///
/// ```
/// let _g = lens::span_cm!("eval.pass", samples = 256, split = "val");
/// ```
#[doc(inline)]
pub use lens_macros::span_cm;

/// Declares a consumer span-group family that extends the base family: a
/// module holding one static [`SpanGroup`] per group and a `FAMILY` static.
///
/// Presets may name base groups, base presets, this family's groups and its
/// other presets; `all` is implicit. At most 64 groups; names are lowercase;
/// duplicates and unknown names are compile errors.
///
/// A preset is stated *completely*: `default: [job, request]` is exactly
/// those two groups, and resolving `default` against this family does not add
/// the base `default`. To *extend* a base preset, list it as a member:
/// `default: [default, request]` is job, checkpoint, evaluate and request. A
/// base preset (`default`, `per_step`) the family does not state is
/// inherited unchanged.
///
/// ```
/// use lens::{groups, SpanGroupSet};
/// lens::define_span_group! {
///     /// Spans of my serving stack.
///     pub serving {
///         groups: [request, batch, kv_cache],
///         presets: {
///             // extension: the base `default` plus `request`
///             default: [default, request],
///             // complete: exactly these groups
///             per_step: [job, step, request, batch],
///         },
///     }
/// }
///
/// #[lens::trace_fn(group = serving::BATCH)]
/// fn run_batch() {}
///
/// let set = SpanGroupSet::resolve("default", &[&serving::FAMILY]).unwrap();
/// assert!(set.contains(&serving::REQUEST) && set.contains(&groups::EVALUATE));
/// let set = SpanGroupSet::resolve("per_step", &[&serving::FAMILY]).unwrap();
/// assert_eq!(set.names(), ["job", "step", "request", "batch"]);
/// ```
#[doc(inline)]
pub use lens_macros::define_span_group;

pub use lens_runtime::{
    is_redacted_key, safe_set_span_attributes, AttributeValue, SpanAttributeTarget, REDACTED,
    REDACTED_KEYS,
};
pub use lens_runtime::{
    is_span_group_enabled, register_family, set_enabled_span_groups, span_group_families,
    SpanGroup, SpanGroupError, SpanGroupFamily, SpanGroupSet,
};
pub use lens_runtime::{
    semconv, ConfigError, ExporterKind, LensConfig, OtelContext, SpanPath, ValidConfig,
};
pub use lens_runtime::{InSpan, InSpanFuture, IntoInSpan};

/// Context propagation: W3C TraceContext + Baggage over maps, HTTP headers
/// (feature `http`), environment variables and bytes; trace broadcast over a
/// [`Collective`](propagation::Collective); linked spans. With feature
/// `reqwest`, `http::ClientSpans` makes a CLIENT span per `reqwest` request
/// (a `reqwest-middleware` middleware) and sends its context.
///
/// Available without the `sdk` feature too, baggage included (lens's own
/// W3C Baggage propagator, whose encoding round-trips with the Python SDK).
pub mod propagation {
    #[cfg(feature = "http")]
    pub use lens_runtime::http;
    #[cfg(feature = "mpi")]
    pub use lens_runtime::mpi_collective;
    pub use lens_runtime::{
        broadcast_trace_context, context_from_bytes, context_from_env, context_from_env_lookup,
        context_to_bytes, context_to_json_bytes, create_linked_span, env_for_child,
        extract_context, extract_from, inject_context, inject_into, pp_trace_carrier,
        set_pp_trace_carrier, w3c, Carrier, Collective, CollectiveError, LocalCollective,
        ENV_CARRIER_VARS,
    };
}
/// Instrument sets: inference (GenAI), RL, Gym and training metrics. They
/// need only the OpenTelemetry metrics API: without the `sdk` feature they
/// record into whatever global meter provider the application installs.
pub mod metrics {
    pub use crate::generation::Generation;
    pub use lens_runtime::{
        fine_bucket_boundaries, GymMetrics, GymRecord, InferenceMetrics, InferenceRecord,
        RlMetrics, RlRecord, TokenTimer, TrainingMetrics, TrainingRecord, DURATION_MS_BUCKETS,
        GEN_AI_DURATION_BUCKETS_S, GEN_AI_TOKEN_BUCKETS, GEN_AI_TPOT_BUCKETS_S,
        GEN_AI_TTFT_BUCKETS_S, MAX_INFERENCE_ATTRIBUTE_SETS, SDK_DEFAULT_BUCKETS,
        STEP_DURATION_BUCKETS_S,
    };
}

/// The `tracing` bridge: `tracing` spans (candle's, burn's, your server's)
/// become lens spans in lens's own pipeline, gated by span groups (feature
/// `tracing`). See [`TracingBridge`](tracing::TracingBridge) for the
/// configuration and the guide, [`guide::tracing_bridge`]. Also the
/// [`tracing`](tracing::tracing) and
/// [`tracing_subscriber`](tracing::tracing_subscriber) crates lens is built
/// with (features `tracing` or `logs`), so that versions match.
///
/// A group that is off affects lens's layer alone: the other layers of the
/// subscriber (`fmt`, `tracing-chrome`, ...) see every span as they would
/// without lens, unless [`global_filter`](tracing::TracingBridge::global_filter)
/// is set.
///
/// ```
/// use lens::tracing::tracing_subscriber::{layer::SubscriberExt as _, registry};
/// // NEMO_LENS_TRACING_GROUPS="candle_transformers=forward_backward:per_entry"
/// let subscriber = registry().with(lens::tracing::layer());
/// # drop(subscriber);
/// ```
#[cfg(any(feature = "tracing", feature = "logs"))]
pub mod tracing {
    pub use lens_runtime::{tracing, tracing_subscriber};
    #[cfg(feature = "tracing")]
    pub use lens_runtime::{TracingBridge, TracingLayer, TracingMode};

    /// The bridge configured from the environment (`NEMO_LENS_TRACING_GROUPS`,
    /// `NEMO_LENS_TRACING_DEFAULT`, `NEMO_LENS_TRACING_LEVEL`), as a layer.
    /// Group names are looked up in every family the program knows
    /// ([`span_group_families`](crate::span_group_families): the base family,
    /// the families lens ships, `megatron`, `nemo_rl`, `nemo_gym`,
    /// `inference_server`, and every family declared with
    /// [`define_span_group!`](crate::define_span_group) in the program). An invalid variable is reported on stderr
    /// (variable, value, what is accepted) and the layer then records
    /// nothing; [`TracingBridge::from_env_with`] returns the error instead.
    ///
    /// ```
    /// use lens::tracing::tracing_subscriber::{layer::SubscriberExt as _, registry};
    /// // e.g. NEMO_LENS_TRACING_GROUPS="candle_transformers=layer:per_entry,my_server=server"
    /// let subscriber = registry().with(lens::tracing::layer());
    /// # drop(subscriber);
    /// let env = |v: &str| (v == "NEMO_LENS_TRACING_GROUPS")
    ///     .then(|| "candle_transformers=layer:per_entry,my_server=server".to_owned());
    /// lens::tracing::TracingBridge::from_lookup(&[&lens::megatron::FAMILY, &lens::nemo_gym::FAMILY], env)?;
    /// # Ok::<(), lens::ConfigError>(())
    /// ```
    #[cfg(feature = "tracing")]
    pub fn layer() -> TracingLayer {
        lens_runtime::tracing_layer()
    }
}

/// Server middleware (feature `tower`): [`ServerLayer`](serving::ServerLayer)
/// makes one SERVER span per HTTP request, a child of the caller's W3C
/// context, gated by a span group. See the guide,
/// [`guide::serving`].
///
/// ```
/// let layer = lens::serving::ServerLayer::new(&lens::inference_server::REQUEST);
/// # drop(layer);
/// ```
#[cfg(feature = "tower")]
pub mod serving {
    pub use lens_runtime::{RouteFn, ServerFuture, ServerLayer, ServerService};
}

/// Opt-in GPU telemetry through NVML (the `gpu` feature).
#[cfg(feature = "gpu")]
pub mod gpu {
    pub use lens_runtime::{register_gpu_metrics, visible_gpus, GpuDevice};
}

/// The log bridge: `log` and `tracing` records to OpenTelemetry logs (the
/// `logs` feature). The `tracing` and `tracing_subscriber` crates are in
/// [`lens::tracing`](crate::tracing).
#[cfg(feature = "logs")]
pub mod logs {
    pub use lens_runtime::{
        log, setup_logging_bridge, setup_logging_bridge_with_provider, InstallStatus, Level,
        LogBridge, LogBridgeError, LogBridgeLayer, LogBridgeLogger, LogBridgeOptions,
    };
}

#[cfg(feature = "sdk-core")]
pub use lens_runtime::{clear_tracer_provider, set_tracer_provider};
#[cfg(feature = "sdk-core")]
pub use lens_runtime::{
    file_safe_run_id, setup_telemetry, setup_telemetry_from_env, shared_run_id,
    ForkSafeIdGenerator, LossCause, OtlpProtocol, RankAwareSampler, SetupError, ShutdownReport,
    SignalReport, TelemetryBuilder, TelemetryHandle,
};
pub use lens_runtime::{
    is_export_strategy_registered, rank_is_sampled, register_export_strategy,
    registered_export_strategies, remove_export_strategy, replace_export_strategy, should_export,
    StrategyError,
};
pub use lens_runtime::{meter, tracer, SCOPE_NAME};
pub use lens_runtime::{IntoLink, IntoParentContext, LensSpan, SpanGuard, SpanStatus};

/// The eight base groups and the base family.
pub mod groups {
    pub use lens_runtime::base::{
        CHECKPOINT, EVALUATE, FAMILY, FORWARD_BACKWARD, JOB, LOAD_CHECKPOINT, MODEL_INIT,
        OPTIMIZER, STEP, WORD,
    };
}

/// Opens a span that is not attached to the current context, e.g. to
/// instrument a future with [`InSpan::in_span`]. Always on.
///
/// ```
/// use lens::InSpan;
/// async fn generate() -> usize { 3 }
/// let fut = generate().in_span(lens::detached_span("rollout.generate"));
/// # drop(fut);
/// ```
pub fn detached_span(name: impl Into<std::borrow::Cow<'static, str>>) -> LensSpan {
    lens_runtime::start_detached(name, Vec::new())
}

/// The OpenTelemetry API crate lens is built on (use it instead of adding
/// your own `opentelemetry` dependency, so versions always match).
pub use opentelemetry as otel;

/// The OpenTelemetry SDK crate lens is built on.
#[cfg(feature = "sdk-core")]
pub use opentelemetry_sdk as otel_sdk;

mod families;
mod generation;
pub use families::{inference_server, megatron, nemo_gym, nemo_rl};

/// Items used by the code the macros generate. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use lens_runtime::__private::*;
}
