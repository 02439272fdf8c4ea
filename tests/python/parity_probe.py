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
  resource ATTRS   setup_telemetry from the environment with the caller's
                   resource attributes ATTRS (k=v,k=v, or -), one span,
                   shutdown; prints the resource, each value's type, and
                   the paths the library looked for while it set up
  errors R W       what a bad value gives: NemoLensConfig.from_env, then
                   setup_telemetry as rank R of W; prints where it failed,
                   the message, and whether its providers existed by then
  propagate        a rank that does not export (rank 0 of 2, single_rank):
                   the context TRACEPARENT / TRACESTATE / BAGGAGE carry,
                   extracted and injected again; baggage set in code,
                   injected; the NCCL byte carrier of that context, and
                   what the NCCL reader makes of garbage and of LENS_BYTES
  reads            the environment variables the library and the
                   OpenTelemetry SDK look up while a job sets up (console
                   exporter, every signal on), records a span, a metric and
                   a log record, and shuts down; the scope of the tracer,
                   meter and bridged log record
  groups           the span groups and presets of SpanGroup, and every
                   subclass of it the library ships
  fork             a child forked while a span is open and an ended span
                   is queued: what the child exports, and its resource
"""

import json
import os
import sys

# every environment variable looked up from here on (the library and the
# OpenTelemetry SDK hold os.environ itself, so its class is swapped in place)
READS = set()


class _Tracked(type(os.environ)):
    def __getitem__(self, key):
        READS.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        READS.add(key)
        return super().__contains__(key)


os.environ.__class__ = _Tracked


class Boom(Exception):
    """An exception of the probe's own (its type name has a module)."""


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
    from nemo.lens import (NemoLensConfig, get_meter, get_tracer, managed_span, setup_telemetry,
                           span_cm, trace_fn)
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
        try:
            with span_cm("block.failed"):
                raise Boom("boom")
        except Boom:
            pass
        trace_fn("step", "fn.step")(lambda: None)()
    # still open at shutdown
    get_tracer().start_span("left.open")
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
            "attributes": {k: value(v) for k, v in s.attributes.items()},
            "events": [{"name": e.name, "attributes": {k: value(v) for k, v in e.attributes.items()}}
                       for e in s.events],
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


def type_name(v):
    return {bool: "bool", int: "int", float: "double", str: "string"}.get(type(v), type(v).__name__)


def resource(spec):
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from nemo.lens import NemoLensConfig, managed_span, setup_telemetry

    caller = dict(kv.split("=", 1) for kv in spec.split(",")) if spec != "-" else None
    looked, exists = [], os.path.exists

    def tracked(path):
        looked.append(str(path))
        return exists(path)

    rank, world = launcher_rank()
    spans = InMemorySpanExporter()
    os.path.exists = tracked
    h = setup_telemetry(NemoLensConfig.from_env(), rank, world, resource_attributes=caller,
                        span_exporter=spans)
    os.path.exists = exists
    with managed_span("job", "job"):
        pass
    h.shutdown()
    finished = spans.get_finished_spans()
    attrs = dict(finished[0].resource.attributes) if finished else {}
    return {"resource": {k: value(v) for k, v in attrs.items()},
            "types": {k: type_name(v) for k, v in attrs.items()},
            "paths": sorted(set(looked))}


def errors(rank, world):
    from opentelemetry import trace
    from nemo.lens import NemoLensConfig, setup_telemetry

    try:
        config = NemoLensConfig.from_env()
    except Exception as e:
        return {"stage": "from_env", "error": str(e), "type": type(e).__name__}
    try:
        setup_telemetry(config, rank, world)
    except Exception as e:
        # the SDK's provider is installed, or still the API's proxy
        providers = type(trace.get_tracer_provider()).__module__.startswith("opentelemetry.sdk")
        return {"stage": "setup_telemetry", "error": str(e), "type": type(e).__name__,
                "providers": providers}
    return {"stage": "none"}


def propagate():
    from opentelemetry import baggage, context
    from nemo.lens import NemoLensConfig, extract_context, inject_context, setup_telemetry
    from nemo.lens.contrib.nccl import extract_nccl_context, serialize_context

    rank, world = launcher_rank()
    h = setup_telemetry(NemoLensConfig.from_env(), rank, world)
    incoming = {k: os.environ[v] for k, v in
                (("traceparent", "TRACEPARENT"), ("tracestate", "TRACESTATE"), ("baggage", "BAGGAGE"))
                if v in os.environ}
    token = context.attach(extract_context(incoming))
    carrier = {}
    inject_context(carrier)
    entries = {k: str(v) for k, v in baggage.get_all().items()}
    nccl = serialize_context().decode("utf-8")
    garbage_gives_current = extract_nccl_context(b"\xff not json") == context.get_current()
    context.detach(token)
    # baggage set in code, and the context the NCCL reader makes of LENS_BYTES
    token = context.attach(baggage.set_baggage("k", "a b+c", context.Context()))
    encoded = {}
    inject_context(encoded)
    context.detach(token)
    # 200 entries set in code: kept, and how many one header carries
    many = context.Context()
    for i in range(200):
        many = baggage.set_baggage(f"m{i:03}", "v", many)
    token = context.attach(many)
    many_header = {}
    inject_context(many_header)
    many_set = len(baggage.get_all())
    context.detach(token)
    token = context.attach(baggage.set_baggage("a key/\u00e9", "v", context.Context()))
    odd_key = {}
    inject_context(odd_key)
    context.detach(token)
    read = {}
    if os.environ.get("LENS_BYTES"):
        token = context.attach(extract_nccl_context(bytes.fromhex(os.environ["LENS_BYTES"])))
        inject_context(read)
        context.detach(token)
    h.shutdown()
    return {"exporting": h.is_exporting, "carrier": carrier, "entries": entries, "nccl": nccl,
            "encoded": encoded.get("baggage", ""), "garbage_gives_current": garbage_gives_current,
            "read": read, "many_set": many_set,
            "many_sent": len(many_header.get("baggage", "").split(",")),
            "odd_key": odd_key.get("baggage", "")}


def reads():
    import logging

    from opentelemetry._logs import get_logger_provider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
    from nemo.lens import NemoLensConfig, get_meter, get_tracer, managed_span, setup_telemetry
    from nemo.lens.logging_bridge import setup_logging_bridge

    rank, world = launcher_rank()
    READS.clear()  # the probe's own look-ups
    h = setup_telemetry(NemoLensConfig.from_env(), rank, world)
    logs = InMemoryLogRecordExporter()
    get_logger_provider().add_log_record_processor(SimpleLogRecordProcessor(logs))
    setup_logging_bridge("")
    logging.getLogger("probe.logger").warning("hello")
    with managed_span("job", "job"):
        pass
    get_meter().create_counter("probe.count").add(1)
    tracer_scope = get_tracer()._instrumentation_scope.name
    meter_scope = get_meter().name
    h.shutdown()
    get_logger_provider().shutdown()
    finished = logs.get_finished_logs()
    return {"reads": sorted(k for k in READS if isinstance(k, str)),
            "tracer_scope": tracer_scope, "meter_scope": meter_scope,
            "log_scope": finished[0].instrumentation_scope.name if finished else None}


def catalog():
    import importlib
    import pkgutil

    import nemo.lens
    import nemo.lens.instruments
    import nemo.lens.semconv as semconv
    from nemo.lens import SpanGroup

    unimported = []
    for m in pkgutil.walk_packages(nemo.lens.__path__, "nemo.lens."):
        try:
            importlib.import_module(m.name)
        except ImportError:
            unimported.append(m.name)
    subclasses, todo = [], list(SpanGroup.__subclasses__())
    while todo:
        c = todo.pop()
        subclasses.append(f"{c.__module__}.{c.__qualname__}")
        todo.extend(c.__subclasses__())
    record = []
    for m in pkgutil.iter_modules(nemo.lens.instruments.__path__, "nemo.lens.instruments."):
        mod = importlib.import_module(m.name)
        record += [f"{m.name}.{f}" for f in dir(mod) if f.startswith("record_")]
    return {"groups": sorted(SpanGroup.ALL_GROUPS),
            "presets": {k: sorted(v) for k, v in SpanGroup._PRESETS.items()},
            "subclasses": sorted(subclasses), "unimported": sorted(unimported),
            "record_functions": sorted(record),
            "semconv": sorted(v for k, v in vars(semconv).items()
                              if k.isupper() and isinstance(v, str) and "." in v
                              and k != "SEMCONV_VERSION")}


def fork():
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from nemo.lens import NemoLensConfig, get_tracer, setup_telemetry

    rank, world = launcher_rank()
    spans = InMemorySpanExporter()
    h = setup_telemetry(NemoLensConfig.from_env(), rank, world, span_exporter=spans)
    t = get_tracer()
    t.start_span("parent.ended").end()  # queued: the batch processor waits 5 s
    still_open = t.start_span("parent.open")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        t.start_span("child").end()
        h.shutdown()
        fin = spans.get_finished_spans()
        out = {"names": sorted(s.name for s in fin), "pid": os.getpid(),
               "resource_pids": sorted({s.resource.attributes["process.pid"] for s in fin})}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.waitpid(pid, 0)
    still_open.end()
    h.shutdown()
    return {"child": json.loads(data), "pid": os.getpid(),
            "parent": sorted(s.name for s in spans.get_finished_spans())}


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
    elif mode == "resource":
        res = resource(sys.argv[2])
    elif mode == "errors":
        res = errors(int(sys.argv[2]), int(sys.argv[3]))
    elif mode == "propagate":
        res = propagate()
    elif mode == "reads":
        # the console exporters write to stdout: keep it for the answer
        answer = os.dup(1)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        res = reads()
        os.write(answer, (json.dumps(res, sort_keys=True) + "\n").encode())
        os._exit(0)
    elif mode == "catalog":
        res = catalog()
    elif mode == "fork":
        res = fork()
    else:
        res = job()
    sys.stdout.write(json.dumps(res, sort_keys=True) + "\n")
    if mode == "errors":
        # a setup that went through must not export at exit
        sys.stdout.flush()
        os._exit(0)
