//! A NeMo-Gym-style RL environment server over HTTP (axum): the
//! `lens::serving::ServerLayer` tower layer makes a SERVER span per request
//! (`POST /run`, a child of the caller's `traceparent`, gated by the
//! `nemo_gym` family's `server` group); the handler opens `verify` /
//! `aggregate_metrics` spans and records gym metrics (`gym.*`).
//!
//! ```text
//! # demo: serve + 8 client requests, then exit
//! NEMO_LENS_ENABLED=1 NEMO_LENS_EXPORTER=file NEMO_LENS_SPAN_GROUPS=all \
//!     cargo run --release -p examples --example nemo_gym_server
//! lens record -- cargo run --release -p examples --example nemo_gym_server
//! # serve until Ctrl-C
//! NEMO_LENS_ENABLED=1 NEMO_LENS_EXPORTER=file NEMO_LENS_SPAN_GROUPS=all \
//!     cargo run --release -p examples --example nemo_gym_server -- --serve 127.0.0.1:8000
//! ```
//!
//! In the demo, a client plays the RL trainer: it opens a
//! `rollout_collection` span and sends each rollout with its context in the
//! request headers, so the server's spans land in the trainer's trace.

use axum::extract::{MatchedPath, State};
use axum::routing::post;
use axum::{Json, Router};
use lens::metrics::{GymMetrics, GymRecord};
use lens::propagation::http::InjectContext as _;
use lens::serving::ServerLayer;
use lens::{managed_span, nemo_gym, trace_fn, InSpan};
use serde::Deserialize;
use serde_json::{json, Value};
use std::error::Error;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Deserialize)]
struct Rollout {
    task: String,
    response: String,
}

struct App {
    metrics: GymMetrics,
    served: AtomicU64,
    passed: AtomicU64,
}

#[trace_fn(group = nemo_gym::VERIFY, name = "verify", fields(task = task))]
async fn verify(task: &str, response: &str) -> bool {
    tokio::time::sleep(Duration::from_millis(2)).await;
    response.contains(task)
}

#[trace_fn(group = nemo_gym::AGGREGATE_METRICS, name = "aggregate_metrics")]
fn aggregate(app: &App) -> f64 {
    let served = app.served.load(Ordering::Relaxed).max(1);
    app.passed.load(Ordering::Relaxed) as f64 / served as f64
}

/// The handler; the request's SERVER span (from `ServerLayer`, a child of
/// the trainer's context) is current while it runs.
async fn run(State(app): State<Arc<App>>, Json(rollout): Json<Rollout>) -> Json<Value> {
    let started = Instant::now();
    lens::safe_set_span_attributes(
        &lens::otel::Context::current(),
        &[("task", &rollout.task.as_str())],
        &[],
    );
    let app2 = app.clone();
    let body = async move {
        let verify_started = Instant::now();
        let ok = verify(&rollout.task, &rollout.response).await;
        let verify_ms = verify_started.elapsed().as_secs_f64() * 1e3;
        let n = app2.served.fetch_add(1, Ordering::Relaxed) + 1;
        if ok {
            app2.passed.fetch_add(1, Ordering::Relaxed);
        }
        let success_rate = (n % 4 == 0).then(|| aggregate(&app2));
        app2.metrics.record(&GymRecord {
            verify_duration_ms: Some(verify_ms),
            verify_success_rate: success_rate,
            servers_active: Some(1),
            ..Default::default()
        });
        json!({ "reward": if ok { 1.0 } else { 0.0 } })
    }
    .await;
    app.metrics.record(&GymRecord {
        request_duration_ms: Some(started.elapsed().as_secs_f64() * 1e3),
        ..Default::default()
    });
    Json(body)
}

async fn demo_client(
    addr: std::net::SocketAddr,
    metrics: &GymMetrics,
) -> Result<(), Box<dyn Error>> {
    let client = reqwest::Client::new();
    let collection = managed_span!(
        nemo_gym::ROLLOUT_COLLECTION,
        "rollout_collection",
        rollouts = 8
    )
    .into_span();
    let started = Instant::now();
    async {
        for i in 0..8 {
            let reply: Value = client
                .post(format!("http://{addr}/run"))
                .inject_context() // traceparent of the current span
                .json(&json!({ "task": format!("t{}", i % 3), "response": format!("answer t{}", i % 2) }))
                .send()
                .await?
                .json()
                .await?;
            println!("rollout {i}: {reply}");
        }
        Ok::<_, Box<dyn Error>>(())
    }
    .in_span(collection)
    .await?;
    metrics.record(&GymRecord {
        rollout_duration_ms: Some(started.elapsed().as_secs_f64() * 1e3),
        ..Default::default()
    });
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let serve = args.iter().position(|a| a == "--serve").map(|i| {
        args.get(i + 1)
            .cloned()
            .unwrap_or_else(|| "127.0.0.1:8000".into())
    });
    let telemetry = lens::setup_telemetry_from_env()?;
    let app = Arc::new(App {
        metrics: GymMetrics::new(&telemetry.meter()),
        served: AtomicU64::new(0),
        passed: AtomicU64::new(0),
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let listener =
            tokio::net::TcpListener::bind(serve.as_deref().unwrap_or("127.0.0.1:0")).await?;
        let addr = listener.local_addr()?;
        println!("nemo_gym_server listening on http://{addr}/run");
        // one SERVER span per request, named by the route template
        let server_spans = ServerLayer::new(&nemo_gym::SERVER)
            .with_route(|ext| ext.get::<MatchedPath>().map(|m| m.as_str().to_owned()));
        let router = Router::new()
            .route("/run", post(run))
            .route_layer(server_spans)
            .with_state(app.clone());
        let server = tokio::spawn(async move { axum::serve(listener, router).await });
        if serve.is_some() {
            tokio::signal::ctrl_c().await?;
        } else {
            demo_client(addr, &app.metrics).await?;
        }
        server.abort();
        Ok::<_, Box<dyn Error>>(())
    })?;
    drop(rt);
    // lost telemetry is reported (one warning line), never an error
    let report = telemetry.shutdown(Duration::from_secs(10));
    if let Some(path) = telemetry.file_path() {
        println!(
            "telemetry went to {} ({} spans)",
            path.display(),
            report.traces.exported
        );
    }
    Ok(())
}
