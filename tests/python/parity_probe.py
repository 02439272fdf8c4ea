"""The Python nemo-lens library's side of tests/tests/parity_python.rs.

Run with the peer's virtual environment (tests/python/peer-venv.sh) under
the environment the test sets; prints one JSON object on stdout, in the
normalised form the test also builds from Lens's output.

  config           NemoLensConfig.from_env() and the metric export interval
  strategies N     the ranks of a world of N that export
  setup            setup_telemetry from the environment alone, then shutdown
  job              one rank of a job: setup_telemetry with the rank and world
                   size a user passes (torchrun's, Open MPI's, else SLURM's,
                   else 0 of 1), a fixed set of spans and every metric of the
                   rl, gym and inference instrument sets; prints the run id,
                   whether the rank exports, its resource, spans and metrics
  rank             one Python rank of tests/tests/mixed_job.rs as a user
                   writes it: setup_telemetry with the launcher's rank and
                   world size, the trace the launcher hands down in
                   TRACEPARENT attached, one train.step span and the RL
                   metrics, shutdown; prints the run id
"""

import json
import os
import sys


def launcher_rank():
    for r, w in (("RANK", "WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                 ("PMI_RANK", "PMI_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")):
        if os.environ.get(r) and os.environ.get(w):
            return int(os.environ[r]), int(os.environ[w])
    return 0, 1


def cfg_dict(c):
    return {
        "NEMO_LENS_ENABLED": str(c.enabled).lower(),
        "OTEL_SERVICE_NAME": c.service_name,
        "NEMO_LENS_EXPORT_STRATEGY": c.export_strategy,
        "NEMO_LENS_EXPORT_RANK": str(c.export_rank),
        "NEMO_LENS_EXPORT_SAMPLE_RATE": repr(c.export_sample_rate),
        "NEMO_LENS_SAMPLER_ENABLED": str(c.sampler_enabled).lower(),
        "NEMO_LENS_TRACES_ENABLED": str(c.traces_enabled).lower(),
        "NEMO_LENS_METRICS_ENABLED": str(c.metrics_enabled).lower(),
        "NEMO_LENS_LOGS_ENABLED": str(c.logs_enabled).lower(),
        "NEMO_LENS_SPAN_GROUPS": c.span_groups,
        "NEMO_LENS_EXPORTER": c.exporter,
        "NEMO_LENS_RUN_ID": c.run_id or "unset",
        "NEMO_LENS_USER_ID": c.user or "unset",
        "WANDB_ENTITY": c.wandb_entity or "unset",
        "WANDB_PROJECT": c.wandb_project or "unset",
    }


def config():
    from opentelemetry import metrics
    from nemo.lens import NemoLensConfig, setup_telemetry

    out = cfg_dict(NemoLensConfig.from_env())
    # the metric export interval the library gives its periodic reader
    os.environ["NEMO_LENS_ENABLED"] = "1"
    os.environ["NEMO_LENS_EXPORTER"] = "console"
    os.environ["NEMO_LENS_TRACES_ENABLED"] = "0"
    os.environ["NEMO_LENS_METRICS_ENABLED"] = "1"
    os.environ["NEMO_LENS_EXPORT_STRATEGY"] = "all_ranks"
    setup_telemetry(NemoLensConfig.from_env(), 0, 1)
    reader = list(metrics.get_meter_provider()._all_metric_readers)[0]
    out["OTEL_METRIC_EXPORT_INTERVAL"] = str(int(reader._export_interval_millis))
    return out


def strategies(world):
    from nemo.lens import NemoLensConfig
    from nemo.lens.handle import _should_export

    c = NemoLensConfig.from_env()
    return {"ranks": [r for r in range(world) if _should_export(c, r, world)]}


def value(v):
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (list, tuple)):
        return ",".join(value(x) for x in v)
    return str(v)


def job():
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from nemo.lens import NemoLensConfig, get_meter, managed_span, setup_telemetry, span_cm, trace_fn
    from nemo.lens.instruments.gym import record_gym_metrics
    from nemo.lens.instruments.inference import record_inference_metrics
    from nemo.lens.instruments.rl import record_rl_metrics

    rank, world = launcher_rank()
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    config = NemoLensConfig.from_env()
    h = setup_telemetry(config, rank, world, span_exporter=spans, metric_reader=reader)
    with managed_span("job", "job"):
        with managed_span("step", "train.step", iteration=1):
            pass
        try:
            with managed_span("step", "train.step.failed"):
                raise ValueError("boom")
        except ValueError:
            pass
        with span_cm("block"):
            pass
        trace_fn("step", "fn.step")(lambda: None)()
    meter = get_meter()
    record_rl_metrics(meter, reward_mean=0.5, kl_divergence=0.1, policy_loss=1.0,
                      value_loss=1.0, entropy=1.0, response_length_mean=100.0, grad_norm=1.0,
                      learning_rate=1e-4, throughput_tokens_per_sec=1000.0,
                      generation_duration_ms=120.0, rollout_duration_ms=800.0)
    record_gym_metrics(meter, server_request_duration_ms=5.0, rollout_duration_ms=50.0,
                       verify_duration_ms=2.0, verify_success_rate=0.9, active_servers=2)
    record_inference_metrics(meter, request_duration_s=0.2, model="m", input_tokens=10,
                             output_tokens=20)
    out = {"run_id": config.run_id, "exporting": h.is_exporting, "resource": {},
           "spans": [], "metrics": []}
    data = reader.get_metrics_data() if h.is_exporting else None
    h.shutdown()
    finished = spans.get_finished_spans()
    if finished:
        out["resource"] = {k: value(v) for k, v in finished[0].resource.attributes.items()}
    for s in finished:
        out["spans"].append({
            "name": s.name,
            "scope": s.instrumentation_scope.name,
            "status": s.status.status_code.name,
            "message": s.status.description or "",
        })
    for rm in (data.resource_metrics if data else []):
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = type(m.data).__name__.lower()
                if kind == "sum":
                    kind = "counter" if m.data.is_monotonic else "up-down counter"
                bounds = [list(p.explicit_bounds) for p in m.data.data_points
                          if hasattr(p, "explicit_bounds")]
                out["metrics"].append({
                    "name": m.name, "scope": sm.scope.name, "kind": kind, "unit": m.unit or "",
                    "bounds": bounds[0] if bounds else None,
                })
    return out


def rank_of_mixed_job():
    from opentelemetry import context
    from nemo.lens import NemoLensConfig, get_meter, managed_span, setup_telemetry
    from nemo.lens.instruments.rl import record_rl_metrics
    from nemo.lens.propagation import extract_context

    rank, world = launcher_rank()
    config = NemoLensConfig.from_env()
    h = setup_telemetry(config, rank, world)
    token = context.attach(extract_context({"traceparent": os.environ.get("TRACEPARENT", "")}))
    with managed_span("step", "train.step", iteration=1):
        record_rl_metrics(get_meter(), reward_mean=0.5, generation_duration_ms=120.0)
    context.detach(token)
    h.shutdown()
    return {"run_id": config.run_id}


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "config":
        res = config()
    elif mode == "strategies":
        res = strategies(int(sys.argv[2]))
    elif mode == "setup":
        from nemo.lens import NemoLensConfig, setup_telemetry

        rank, world = launcher_rank()
        setup_telemetry(NemoLensConfig.from_env(), rank, world).shutdown()
        res = {"ok": True}
    elif mode == "rank":
        res = rank_of_mixed_job()
    else:
        res = job()
    sys.stdout.write(json.dumps(res, sort_keys=True) + "\n")
