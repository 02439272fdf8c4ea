"""A Python OpenTelemetry SDK peer for lens's interop tests.

python3 peer.py parent CMD...   open `python.parent`, run CMD with TRACEPARENT/TRACESTATE set
python3 peer.py child JSON      extract the carrier JSON and open `python.child` under it

Exports over OTLP gRPC to $OTEL_EXPORTER_OTLP_ENDPOINT.
"""
import json
import os
import subprocess
import sys

from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor


def main() -> int:
    provider = TracerProvider(resource=Resource.create({"service.name": "python-peer"}))
    exporter = OTLPSpanExporter(endpoint=os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"], insecure=True)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("python-peer")
    mode = sys.argv[1]
    if mode == "parent":
        with tracer.start_as_current_span("python.parent") as span:
            carrier = {}
            propagate.inject(carrier)
            env = dict(os.environ)
            env["TRACEPARENT"] = carrier["traceparent"]
            if "tracestate" in carrier:
                env["TRACESTATE"] = carrier["tracestate"]
            print("traceparent", carrier["traceparent"], flush=True)
            subprocess.run(sys.argv[2:], env=env, check=True)
            ctx = span.get_span_context()
            print("python-span %032x %016x" % (ctx.trace_id, ctx.span_id), flush=True)
    elif mode == "child":
        carrier = json.loads(sys.argv[2])
        with tracer.start_as_current_span("python.child", context=propagate.extract(carrier)) as span:
            ctx = span.get_span_context()
            print("python-span %032x %016x" % (ctx.trace_id, ctx.span_id), flush=True)
    else:
        raise SystemExit("unknown mode " + mode)
    provider.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
