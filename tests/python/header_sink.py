"""An OTLP receiver that records the headers of every export it gets.

A gRPC server (grpcio, as the OpenTelemetry Python exporters bring it) and
an HTTP server on free 127.0.0.1 ports. The first line printed is
`{"grpc": PORT, "http": PORT}`; then one JSON line per request:
`{"transport": "grpc"|"http", "path": ..., "headers": [[name, value], ...]}`.
Every export is answered with an empty (valid) OTLP response. Ends after
`--seconds` (default 60) or when stdin closes.
"""

import http.server
import json
import sys
import threading
from concurrent import futures

import grpc

lock = threading.Lock()


def emit(record):
    with lock:
        print(json.dumps(record), flush=True)


class AnyMethod(grpc.GenericRpcHandler):
    def service(self, details):
        method = details.method

        def unary(request, context):
            emit({
                "transport": "grpc",
                "path": method,
                "headers": [[k, v] for k, v in context.invocation_metadata()],
            })
            return b""

        return grpc.unary_unary_rpc_method_handler(
            unary, request_deserializer=None, response_serializer=None)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        self.rfile.read(length)
        emit({
            "transport": "http",
            "path": self.path,
            "headers": [[k.lower(), v] for k, v in self.headers.items()],
        })
        self.send_response(200)
        self.send_header("content-type", self.headers.get("content-type", "application/x-protobuf"))
        body = b"{}" if "json" in self.headers.get("content-type", "") else b""
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    seconds = 60.0
    if "--seconds" in sys.argv:
        seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[AnyMethod()])
    grpc_port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    emit({"grpc": grpc_port, "http": httpd.server_address[1]})
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    done.wait(seconds)
    httpd.shutdown()
    server.stop(0)


if __name__ == "__main__":
    main()
