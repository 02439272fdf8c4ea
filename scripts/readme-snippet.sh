#!/usr/bin/env bash
# The README's "In your own crate" snippet, as a newcomer would use it: its
# Cargo.toml lines, src/main.rs and run command are copied into a fresh crate
# outside the workspace (nemo-lens taken from this checkout instead of
# crates.io, the workspace's lock file for the same versions), run, and the
# trace file it writes is checked. scripts/test-all.sh calls this.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/lens-readme.XXXXXX")
trap 'rm -rf "$dir"' EXIT

# the fenced block that follows `<!-- snippet: NAME -->`
block() {
  awk -v name="$1" '
    $0 == "<!-- snippet: " name " -->" { want = 1; next }
    want && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }
  ' "$root/README.md"
}

deps=$(block Cargo.toml)
main=$(block src/main.rs)
run=$(block run)
for part in deps main run; do
  if [ -z "${!part}" ]; then
    echo "README.md has no snippet block for $part" >&2
    exit 1
  fi
done

mkdir -p "$dir/src"
{
  printf '[package]\nname = "readme-check"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n[workspace]\n\n'
  # the published dependency line, pointed at this checkout
  sed -E "s|^nemo-lens = \"[^\"]*\"|nemo-lens = { path = \"$root/lens\" }|" <<<"$deps"
} >"$dir/Cargo.toml"
printf '%s\n' "$main" >"$dir/src/main.rs"
cp "$root/Cargo.lock" "$dir/Cargo.lock"
grep -q "path = \"$root/lens\"" "$dir/Cargo.toml" || {
  echo "the snippet's dependency line is not \`nemo-lens = \"<version>\"\`:" >&2
  cat "$dir/Cargo.toml" >&2
  exit 1
}

echo "running the README snippet in $dir: $run"
(cd "$dir" && env -u NEMO_LENS_FILE_PATH -u NEMO_LENS_RUN_ID bash -c "$run")

files=("$dir"/lens-telemetry/*-rank0.otlp.jsonl)
if [ ! -f "${files[0]}" ]; then
  echo "the snippet wrote no lens-telemetry/<run>-rank0.otlp.jsonl" >&2
  ls -R "$dir" >&2
  exit 1
fi
steps=$(grep -o '"name":"train.step"' "${files[0]}" | wc -l)
if [ "$steps" -ne 3 ]; then
  echo "expected 3 train.step spans in ${files[0]}, found $steps" >&2
  exit 1
fi
echo "ok: ${files[0]##*/} holds the snippet's 3 train.step spans"

# The same program against a collector that is down and one that hangs:
# lost telemetry must never be the reason the job fails. Exit 0, within the
# shutdown's 10 s (plus start-up), and one warning line naming the cause.
bin="${CARGO_TARGET_DIR:-$dir/target}/debug/readme-check"
[ -x "$bin" ] || bin="$dir/target/debug/readme-check"
hung_py='
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
print(s.getsockname()[1], flush=True)
conns = []
while True:
    c, _ = s.accept(); conns.append(c)  # accepted, never answered
'
dead_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
hung_out="$dir/hung.port"
python3 -c "$hung_py" >"$hung_out" &
hung_pid=$!
trap 'kill $hung_pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do [ -s "$hung_out" ] && break; sleep 0.1; done
hung_port=$(head -1 "$hung_out")

against() { # NAME PORT PROTOCOL CAUSE
  local name=$1 port=$2 protocol=$3 cause=$4 err="$dir/$1.${3//\//-}.err" start end rc=0
  start=$(date +%s)
  (cd "$dir" && timeout 30 env -u NEMO_LENS_FILE_PATH -u NEMO_LENS_RUN_ID \
    NEMO_LENS_ENABLED=1 NEMO_LENS_EXPORTER=otlp NEMO_LENS_SPAN_GROUPS=per_step \
    OTEL_EXPORTER_OTLP_PROTOCOL="$protocol" OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$port" \
    "$bin" 2>"$err") || rc=$?
  end=$(date +%s)
  local warnings
  warnings=$(grep -c '^lens: warning' "$err" || true)
  if [ "$rc" -ne 0 ] || [ "$warnings" -ne 1 ] || ! grep -q "^lens: warning: telemetry was lost.*$cause" "$err" \
    || [ $((end - start)) -gt 13 ]; then
    echo "the README snippet against a $name collector ($protocol): exit $rc after $((end - start)) s," \
      "$warnings warning lines (expected exit 0 within 13 s and one warning naming \"$cause\"):" >&2
    cat "$err" >&2
    exit 1
  fi
  echo "ok: a $name collector ($protocol): exit 0 in $((end - start)) s, one line: $(grep '^lens: warning' "$err")"
}
for protocol in grpc http/protobuf; do
  against dead "$dead_port" "$protocol" "unreachable"
  against hung "$hung_port" "$protocol" "did not answer within"
done
