#!/usr/bin/env bash
# GPU telemetry check, for a machine with an NVIDIA GPU and driver (about 2
# minutes once built). Three parts, every result printed:
#
#  1. metrics: lens with the file exporter and GPU metrics on
#     (OTEL_METRIC_EXPORT_INTERVAL=1000, 4.5 intervals: the ignored test
#     `gpu_metrics_on_a_real_gpu` of tests/tests/metrics.rs), while
#     nvidia-smi is sampled 4 times a second; every exported hw.* point is
#     compared with the nvidia-smi samples taken around it, within
#     tolerances (scripts/gpu_check.py compare-metrics);
#  2. energy: hw.energy against NVML's energy counter read (ctypes) just
#     before lens starts and just after it ends: lens counts from its
#     registration, so never more than that, and never the GPU's lifetime;
#  3. devices: about 20 CUDA_VISIBLE_DEVICES settings (unset, empty, indices
#     past the end, repeats, junk, UUIDs whole, prefixed, bare, mixed kinds,
#     MIG-, …); for each, what CUDA itself enumerates (libcuda through
#     Python ctypes, CUDA_DEVICE_ORDER=PCI_BUS_ID) against lens's
#     host.gpu.count, hw.ids and visible_gpus() (tests/tests/gpu_check.rs).
#
#   bash scripts/gpu-check.sh            build (needs cargo) and run
#   bash scripts/gpu-check.sh build      only build: stripped test binaries in
#                                        target/gpu-check/ (about 40 MB)
#   bash scripts/gpu-check.sh run        only run them (needs python3, nvidia-smi,
#                                        the driver; no cargo)
#   bash scripts/gpu-check.sh selftest   the Python comparisons on made-up data
#                                        and `bash -n` of this script (no GPU)
#
# A machine without a Rust toolchain (the device machine): build here, then
# run there with target/gpu-check carried:
#   bash scripts/gpu-check.sh build
#   device run: command `bash scripts/gpu-check.sh run`, carry ["target/gpu-check"]
# Without a GPU, `run` stops at once with "FAILED: no NVIDIA GPU" (status 1).
# Files written under $OUT (when set, else $TMPDIR or /tmp): gpu-check.log,
# gpu-check-metrics.otlp.jsonl, gpu-check-smi.jsonl, gpu-check-energy-*.json.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN_DIR=target/gpu-check
PY=scripts/gpu_check.py
mode=${1:-all}

build() {
    local t exe
    mkdir -p "$BIN_DIR"
    for t in metrics gpu_check; do
        exe=$(cargo test --release -p tests --test "$t" --no-run --message-format=json |
            python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    t = m.get("target") or {}
    if m.get("executable") and t.get("name") == sys.argv[1] and "test" in t.get("kind", []):
        print(m["executable"])' "$t" | tail -n 1)
        [ -n "$exe" ] || { echo "gpu-check: no $t test binary built" >&2; exit 1; }
        strip -o "$BIN_DIR/lens-$t" "$exe" 2>/dev/null || cp "$exe" "$BIN_DIR/lens-$t"
    done
    ls -l "$BIN_DIR"
}

# Stops the check: no GPU, driver or tool to check with.
no_gpu() {
    echo "=== gpu-check: FAILED: no NVIDIA GPU: $*"
    exit 1
}

preflight() {
    command -v python3 >/dev/null || no_gpu "python3 not found (needed for the NVML/CUDA reads)"
    command -v nvidia-smi >/dev/null || no_gpu "nvidia-smi not found"
    nvidia-smi -L 2>&1 | grep -q '^GPU ' || no_gpu "nvidia-smi -L lists none ($(nvidia-smi -L 2>&1 | head -n 1))"
    for b in metrics gpu_check; do
        [ -x "$BIN_DIR/lens-$b" ] || { echo "gpu-check: $BIN_DIR/lens-$b missing; run \`$0 build\` first" >&2; exit 2; }
    done
}

metrics_and_energy() {
    local status=0 pid
    echo "=== gpu-check 1+2: hw.* points against nvidia-smi, hw.energy against NVML"
    python3 "$PY" nvml-energy >"$out/gpu-check-energy-before.json"
    python3 "$PY" smi-sample "$out/gpu-check-smi.jsonl" 9 &
    pid=$!
    env -u CUDA_VISIBLE_DEVICES OTEL_METRIC_EXPORT_INTERVAL=1000 LENS_GPU_CHECK_WAIT_INTERVALS=4.5 \
        LENS_GPU_CHECK_FILE="$out/gpu-check-metrics.otlp.jsonl" \
        "$BIN_DIR/lens-metrics" gpu_metrics_on_a_real_gpu --exact --ignored --nocapture --test-threads=1 ||
        status=1
    python3 "$PY" nvml-energy >"$out/gpu-check-energy-after.json"
    wait "$pid" || true
    python3 "$PY" compare-metrics "$out/gpu-check-metrics.otlp.jsonl" "$out/gpu-check-smi.jsonl" \
        "$out/gpu-check-energy-before.json" "$out/gpu-check-energy-after.json" || status=1
    return "$status"
}

devices() {
    echo "=== gpu-check 3: CUDA_VISIBLE_DEVICES settings, CUDA against lens"
    python3 "$PY" compare-devices "$BIN_DIR/lens-gpu_check"
}

run() {
    # a clean slate: nothing from the caller's shell configures lens
    for v in $(env | sed -n 's/^\(\(NEMO_LENS\|OTEL\)_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
    if [ -d /usr/local/nvidia/lib64 ]; then
        export LD_LIBRARY_PATH=/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    fi
    out=${OUT:-${TMPDIR:-/tmp}}
    mkdir -p "$out"
    {
        preflight
        nvidia-smi -L
        local status=0 start=$SECONDS
        metrics_and_energy || status=1
        devices || status=1
        echo "=== gpu-check: $((SECONDS - start)) s"
        if [ "$status" = 0 ]; then echo "=== gpu-check: PASSED"; else echo "=== gpu-check: FAILED"; fi
        exit "$status"
    } 2>&1 | tee "$out/gpu-check.log"
    return "${PIPESTATUS[0]}"
}

case $mode in
build) build ;;
run) run ;;
selftest)
    bash -n "$0"
    python3 "$PY" selftest
    ;;
all)
    build
    run
    ;;
*)
    echo "usage: $0 [build|run|selftest]" >&2
    exit 2
    ;;
esac
