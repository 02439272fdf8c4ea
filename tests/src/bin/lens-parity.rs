//! Lens's side of `tests/tests/parity_python.rs`: the same modes as
//! `tests/python/parity_probe.py`, printing one JSON object in the same
//! normalised form.
//!
//! * `config`: `LensConfig::from_env()` as the variables' values, and the
//!   metric export interval.
//! * `strategies N`: the ranks of a world of `N` that export.
//! * `job FILE`: one rank of a job set up from the environment
//!   (`TelemetryBuilder::from_env`: rank, world size and run id from the
//!   launcher) with the `file` exporter writing `FILE`; the same spans and
//!   metrics as the Python probe; then the run id, whether the rank
//!   exports, and the resource, spans and metrics read back from `FILE`.
//! * `resource ATTRS FILE`: set up from the environment with the caller's
//!   resource attributes `ATTRS` (`k=v,k=v`, or `-`), one span, shut
//!   down; the resource and each value's type, read back from `FILE`.
//! * `propagate`: a rank that does not export: the context `TRACEPARENT`
//!   / `TRACESTATE` / `BAGGAGE` carry, extracted and injected again;
//!   baggage set in code, injected; the JSON and compact byte carriers of
//!   that context.
//! * `rank`: one Rust rank of the mixed job of `tests/tests/mixed_job.rs`
//!   as a user writes it: set up from the environment, join the trace the
//!   launcher hands down in `TRACEPARENT`, one `train.step` span and the
//!   RL metrics, shut down; prints the run id.

use lens::metrics::{
    GymMetrics, GymRecord, InferenceMetrics, InferenceRecord, RlMetrics, RlRecord,
};
use lens::{managed_span, span_cm, trace_fn, LensConfig, TelemetryBuilder};
use serde_json::{json, Map, Value};
use std::time::Duration;

type Res<T> = Result<T, Box<dyn std::error::Error>>;
/// (resource, its value types, spans, metrics) read back from a file.
type ReadBack = (
    Map<String, Value>,
    Map<String, Value>,
    Vec<Value>,
    Vec<Value>,
);

#[derive(Debug)]
struct ValueError;
impl std::fmt::Display for ValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("boom")
    }
}

/// An error of the probe's own, as the Python probe's `Boom`.
#[derive(Debug)]
struct Boom;
impl std::fmt::Display for Boom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("boom")
    }
}

fn config() -> Res<Value> {
    let c = LensConfig::from_env()?;
    let unset = |o: &Option<String>| o.clone().unwrap_or_else(|| "unset".into());
    let interval = std::env::var("OTEL_METRIC_EXPORT_INTERVAL")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "10000".into());
    Ok(json!({
        "NEMO_LENS_ENABLED": c.enabled.to_string(),
        "OTEL_SERVICE_NAME": c.service_name,
        "NEMO_LENS_EXPORT_STRATEGY": c.export_strategy,
        "NEMO_LENS_EXPORT_RANK": c.export_rank.to_string(),
        "NEMO_LENS_EXPORT_SAMPLE_RATE": format!("{:?}", c.export_sample_rate),
        "NEMO_LENS_SAMPLER_ENABLED": c.sampler_enabled.to_string(),
        "NEMO_LENS_TRACES_ENABLED": c.traces_enabled.to_string(),
        "NEMO_LENS_METRICS_ENABLED": c.metrics_enabled.to_string(),
        "NEMO_LENS_LOGS_ENABLED": c.logs_enabled.to_string(),
        "NEMO_LENS_SPAN_GROUPS": c.span_groups,
        "NEMO_LENS_EXPORTER": c.exporter.as_str(),
        "NEMO_LENS_RUN_ID": unset(&c.run_id),
        "NEMO_LENS_USER_ID": unset(&c.user),
        "WANDB_ENTITY": unset(&c.wandb_entity),
        "WANDB_PROJECT": unset(&c.wandb_project),
        "OTEL_METRIC_EXPORT_INTERVAL": interval,
    }))
}

fn strategies(world: u32) -> Res<Value> {
    let c = LensConfig::from_env()?;
    let mut ranks = Vec::new();
    for r in 0..world {
        if lens::should_export(&c, r, world)? {
            ranks.push(r);
        }
    }
    Ok(json!({ "ranks": ranks }))
}

#[trace_fn(group = "step", name = "fn.step")]
fn traced() {}

/// An OTLP JSON `AnyValue` as the Python probe writes a value.
fn text(v: &Value) -> String {
    let o = v.as_object().cloned().unwrap_or_default();
    if let Some(s) = o.get("stringValue").and_then(Value::as_str) {
        return s.to_owned();
    }
    if let Some(i) = o.get("intValue") {
        return i.as_str().map_or_else(|| i.to_string(), str::to_owned);
    }
    if let Some(b) = o.get("boolValue") {
        return b.to_string();
    }
    if let Some(d) = o.get("doubleValue") {
        return d.to_string();
    }
    v.to_string()
}

fn job(file: &str) -> Res<Value> {
    let h = TelemetryBuilder::from_env()?.install()?;
    {
        let _job = managed_span!("job", "job");
        drop(managed_span!("step", "train.step", iteration = 1u64));
        // inert when the group is off: no `if let` needed
        managed_span!("step", "train.step.failed").record_error(&ValueError);
        drop(span_cm!("block"));
        span_cm!("block.failed").record_error(&Boom);
        traced();
    }
    // still open at shutdown
    std::mem::forget(managed_span!("job", "left.open"));
    let meter = lens::meter("");
    RlMetrics::new(&meter).record(&RlRecord {
        reward_mean: Some(0.5),
        kl_divergence: Some(0.1),
        policy_loss: Some(1.0),
        value_loss: Some(1.0),
        entropy: Some(1.0),
        response_length_mean: Some(100.0),
        grad_norm: Some(1.0),
        learning_rate: Some(1e-4),
        tokens_per_sec: Some(1000.0),
        generation_duration_ms: Some(120.0),
        rollout_duration_ms: Some(800.0),
    });
    GymMetrics::new(&meter).record(&GymRecord {
        request_duration_ms: Some(5.0),
        rollout_duration_ms: Some(50.0),
        verify_duration_ms: Some(2.0),
        verify_success_rate: Some(0.9),
        servers_active: Some(2),
    });
    InferenceMetrics::new(&meter).record(&InferenceRecord {
        duration_s: Some(0.2),
        model: Some("m"),
        input_tokens: Some(10),
        output_tokens: Some(20),
        ..Default::default()
    });
    let run_id = h.run_id().to_owned();
    let exporting = h.is_exporting();
    h.shutdown(Duration::from_secs(10)).into_result()?;
    let (resource, _, spans, metrics) = read_back(file)?;
    Ok(json!({
        "run_id": run_id, "exporting": exporting, "resource": resource,
        "spans": spans, "metrics": metrics,
    }))
}

/// Attributes as `{key: value}`, each value as the Python probe writes it.
fn attr_map(list: &Value) -> Map<String, Value> {
    list.as_array()
        .into_iter()
        .flatten()
        .map(|kv| {
            let k = kv["key"].as_str().unwrap_or("").to_owned();
            (k, Value::String(text(&kv["value"])))
        })
        .collect()
}

/// The OTLP JSON type of an `AnyValue`, named as the Python probe names it.
fn type_of(v: &Value) -> &'static str {
    let o = v.as_object();
    let has = |k: &str| o.is_some_and(|o| o.contains_key(k));
    if has("stringValue") {
        "string"
    } else if has("intValue") {
        "int"
    } else if has("boolValue") {
        "bool"
    } else if has("doubleValue") {
        "double"
    } else {
        "other"
    }
}

/// (resource, its value types, spans, metrics) of the OTLP JSON lines in `file`.
fn read_back(file: &str) -> Res<ReadBack> {
    let mut resource = Map::new();
    let mut types = Map::new();
    let (mut spans, mut metrics) = (Vec::new(), Vec::new());
    let body = std::fs::read_to_string(file).unwrap_or_default();
    for line in body.lines() {
        let v: Value = serde_json::from_str(line)?;
        for (outer, inner, list) in [
            ("resourceSpans", "scopeSpans", "spans"),
            ("resourceMetrics", "scopeMetrics", "metrics"),
        ] {
            for r in v[outer].as_array().into_iter().flatten() {
                for kv in r["resource"]["attributes"].as_array().into_iter().flatten() {
                    let k = kv["key"].as_str().unwrap_or("").to_owned();
                    types.insert(k.clone(), json!(type_of(&kv["value"])));
                    resource.insert(k, Value::String(text(&kv["value"])));
                }
                for s in r[inner].as_array().into_iter().flatten() {
                    let scope = s["scope"]["name"].as_str().unwrap_or("");
                    for item in s[list].as_array().into_iter().flatten() {
                        if list == "spans" {
                            let c = &item["status"]["code"];
                            let code = match (c.as_i64(), c.as_str()) {
                                (Some(1), _) | (_, Some("STATUS_CODE_OK")) => "OK",
                                (Some(2), _) | (_, Some("STATUS_CODE_ERROR")) => "ERROR",
                                _ => "UNSET",
                            };
                            let events: Vec<Value> = item["events"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .map(|e| {
                                    json!({"name": e["name"], "attributes": attr_map(&e["attributes"])})
                                })
                                .collect();
                            spans.push(json!({
                                "name": item["name"], "scope": scope, "status": code,
                                "message": item["status"]["message"].as_str().unwrap_or(""),
                                "attributes": attr_map(&item["attributes"]),
                                "events": events,
                            }));
                            continue;
                        }
                        let (kind, data) = ["gauge", "histogram", "sum"]
                            .into_iter()
                            .find_map(|k| item.get(k).map(|d| (k, d)))
                            .unwrap_or(("?", &Value::Null));
                        let kind = match (kind, data["isMonotonic"].as_bool()) {
                            ("sum", Some(true)) => "counter",
                            ("sum", _) => "up-down counter",
                            (k, _) => k,
                        };
                        let bounds = data["dataPoints"][0].get("explicitBounds").cloned();
                        metrics.push(json!({
                            "name": item["name"], "scope": scope, "kind": kind,
                            "unit": item["unit"].as_str().unwrap_or(""),
                            "bounds": bounds,
                        }));
                    }
                }
            }
        }
    }
    Ok((resource, types, spans, metrics))
}

/// One rank set up with the caller's resource attributes (see the module docs).
fn resource(attrs: &str, file: &str) -> Res<Value> {
    let mut b = TelemetryBuilder::from_env()?;
    if attrs != "-" {
        for kv in attrs.split(',') {
            let (k, v) = kv.split_once('=').ok_or("ATTRS is k=v,k=v")?;
            let key: &'static str = Box::leak(k.to_owned().into_boxed_str());
            b = b.with_resource_attribute(key, v.to_owned());
        }
    }
    let h = b.install()?;
    drop(managed_span!("job", "job"));
    h.shutdown(Duration::from_secs(10)).into_result()?;
    let (resource, types, _, _) = read_back(file)?;
    Ok(json!({ "resource": resource, "types": types }))
}

/// A rank that does not export, forwarding context (see the module docs).
fn propagate() -> Res<Value> {
    use lens::otel::baggage::BaggageExt;
    use lens::otel::{Context, KeyValue};
    use lens::propagation::{context_from_env, context_to_bytes, context_to_json_bytes};
    let h = lens::setup_telemetry_from_env()?;
    let cx = context_from_env();
    let entries: Map<String, Value> = cx
        .baggage()
        .iter()
        .map(|(k, (v, _))| (k.to_string(), json!(v.to_string())))
        .collect();
    let (carrier, nccl, compact) = {
        let _g = cx.clone().attach();
        let cur = Context::current();
        (
            lens::propagation::inject_context(),
            String::from_utf8(context_to_json_bytes(&cur))?,
            context_to_bytes(&cur)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>(),
        )
    };
    let mut encoded = lens::propagation::Carrier::new();
    let in_code = Context::new().with_baggage([KeyValue::new("k", "a b+c")]);
    lens::propagation::inject_into(&in_code, &mut encoded);
    let many =
        Context::new().with_baggage((0..200).map(|i| KeyValue::new(format!("m{i:03}"), "v")));
    let mut odd_key = lens::propagation::Carrier::new();
    let odd = Context::new().with_baggage([KeyValue::new("a key/\u{e9}", "v")]);
    lens::propagation::inject_into(&odd, &mut odd_key);
    let exporting = h.is_exporting();
    h.shutdown(Duration::from_secs(10)).into_result()?;
    Ok(json!({
        "many_set": many.baggage().len(),
        "odd_key": odd_key.get("baggage").cloned().unwrap_or_default(),
        "exporting": exporting, "carrier": carrier, "entries": entries, "nccl": nccl,
        "encoded": encoded.get("baggage").cloned().unwrap_or_default(), "compact": compact,
    }))
}

/// One rank of a mixed job (see the module docs).
fn rank() -> Res<Value> {
    let h = lens::setup_telemetry_from_env()?;
    {
        let _launcher = lens::propagation::context_from_env().attach();
        let _step = managed_span!("step", "train.step", iteration = 1u64);
        RlMetrics::new(&lens::meter("")).record(&RlRecord {
            reward_mean: Some(0.5),
            generation_duration_ms: Some(120.0),
            ..Default::default()
        });
    }
    let run_id = h.run_id().to_owned();
    h.shutdown(Duration::from_secs(10)).into_result()?;
    Ok(json!({ "run_id": run_id }))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| args.get(i).map_or("", String::as_str);
    let out = match arg(1) {
        "config" => config(),
        "strategies" => arg(2)
            .parse()
            .map_err(|e| format!("world size: {e}").into())
            .and_then(strategies),
        "job" => job(arg(2)),
        "resource" => resource(arg(2), arg(3)),
        "propagate" => propagate(),
        "rank" => rank(),
        other => Err(format!("unknown mode {other:?}").into()),
    };
    match out {
        Ok(v) => println!("{v}"),
        Err(e) => {
            eprintln!("lens-parity: {e}");
            std::process::exit(1);
        }
    }
}
