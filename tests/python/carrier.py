"""The Python side of lens's wire-format tests: W3C carriers as the Python
OpenTelemetry SDK writes and reads them, and the byte carrier as the Python
library builds it for NCCL (the carrier map as UTF-8 JSON).

python3 carrier.py inject BAGGAGE_JSON   open a span with that baggage; print
                                          {"trace_id", "span_id", "http": map, "bytes_hex"}
python3 carrier.py extract               read {"http": map, "bytes_hex": hex} on stdin;
                                          print what each one carries
python3 carrier.py reencode              read a carrier map on stdin, extract it, inject
                                          it again, print the NCCL bytes as hex
"""
import json
import sys

from opentelemetry import baggage, propagate, trace
from opentelemetry.context import attach, detach
from opentelemetry.sdk.trace import TracerProvider


def seen(ctx) -> dict:
    sc = trace.get_current_span(ctx).get_span_context()
    return {
        "trace_id": "%032x" % sc.trace_id,
        "span_id": "%016x" % sc.span_id,
        "valid": sc.is_valid,
        "baggage": {k: str(v) for k, v in baggage.get_all(ctx).items()},
    }


def main() -> int:
    mode = sys.argv[1]
    if mode == "inject":
        tracer = TracerProvider().get_tracer("python-peer")
        ctx = None
        for k, v in json.loads(sys.argv[2]).items():
            ctx = baggage.set_baggage(k, v, context=ctx)
        token = attach(ctx) if ctx is not None else None
        with tracer.start_as_current_span("python.send") as span:
            carrier = {}
            propagate.inject(carrier)
            sc = span.get_span_context()
            # the byte carrier as the Python library sends it over NCCL
            data = json.dumps(carrier).encode("utf-8")
            print(json.dumps({
                "trace_id": "%032x" % sc.trace_id,
                "span_id": "%016x" % sc.span_id,
                "http": carrier,
                "bytes_hex": data.hex(),
            }))
        if token is not None:
            detach(token)
    elif mode == "extract":
        got = json.load(sys.stdin)
        from_bytes = json.loads(bytes.fromhex(got["bytes_hex"]).decode("utf-8"))
        print(json.dumps({
            "http": seen(propagate.extract(got["http"])),
            "bytes": seen(propagate.extract(from_bytes)),
            "bytes_map": from_bytes,
        }))
    elif mode == "reencode":
        carrier = {}
        propagate.inject(carrier, context=propagate.extract(json.load(sys.stdin)))
        print(json.dumps({"bytes_hex": json.dumps(carrier).encode("utf-8").hex()}))
    else:
        raise SystemExit("unknown mode " + mode)
    return 0


if __name__ == "__main__":
    sys.exit(main())
