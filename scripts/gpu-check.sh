#!/usr/bin/env bash
# GPU telemetry check, for a machine with an NVIDIA GPU and driver: NVML
# detection, every hw.* instrument with its attributes, and the
# host.gpu.count resource attribute. It runs the ignored test
# `gpu_metrics_on_a_real_gpu` of tests/tests/metrics.rs (release build): lens
# with the file exporter and GPU metrics on, OTEL_METRIC_EXPORT_INTERVAL=1000,
# two and a half intervals, then it prints every hw.* point and
# host.gpu.count and checks them. Twice: with CUDA_VISIBLE_DEVICES unset
# (every GPU; host.gpu.count from NVML) and set to the first GPU's UUID.
#
#   bash scripts/gpu-check.sh          build (needs cargo) and run
#   bash scripts/gpu-check.sh build    only build: a stripped test binary in
#                                      target/gpu-check/ (about 20 MB)
#   bash scripts/gpu-check.sh run      only run that binary (no cargo needed)
#
# A machine without a Rust toolchain (the device machine): build here, then
# run there with target/gpu-check carried:
#   bash scripts/gpu-check.sh build
#   device run: command `bash scripts/gpu-check.sh run`, carry ["target/gpu-check"]
# Files written under $OUT (when set): gpu-check.log, gpu-check-*.otlp.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN_DIR=target/gpu-check
BIN=$BIN_DIR/lens-gpu-check
mode=${1:-all}

build() {
    local exe
    exe=$(cargo test --release -p tests --test metrics --no-run --message-format=json |
        sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
    [ -n "$exe" ] || { echo "gpu-check: no test binary built" >&2; exit 1; }
    mkdir -p "$BIN_DIR"
    strip -o "$BIN" "$exe" 2>/dev/null || cp "$exe" "$BIN"
    ls -l "$BIN"
}

check() { # $1: label, rest: environment assignments
    local label=$1
    shift
    echo "=== gpu-check: $label"
    env -u CUDA_VISIBLE_DEVICES "$@" \
        OTEL_METRIC_EXPORT_INTERVAL=1000 \
        LENS_GPU_CHECK_FILE="$out/gpu-check-$label.otlp.jsonl" \
        "$BIN" gpu_metrics_on_a_real_gpu --exact --ignored --nocapture --test-threads=1
}

run() {
    [ -x "$BIN" ] || { echo "gpu-check: $BIN missing; run \`$0 build\` first" >&2; exit 1; }
    # a clean slate: nothing from the caller's shell configures lens
    for v in $(env | sed -n 's/^\(\(NEMO_LENS\|OTEL\)_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
    if [ -d /usr/local/nvidia/lib64 ]; then
        export LD_LIBRARY_PATH=/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    fi
    out=${OUT:-${TMPDIR:-/tmp}}
    mkdir -p "$out"
    {
        if command -v nvidia-smi >/dev/null; then
            nvidia-smi -L || true
            nvidia-smi --format=csv \
                --query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,power.draw,temperature.gpu || true
        else
            echo "nvidia-smi: not available"
        fi
        local status=0
        check all-gpus || status=1
        local uuid
        uuid=$( (nvidia-smi --query-gpu=uuid --format=csv,noheader 2>/dev/null || true) | head -n 1 | tr -d ' ')
        if [ -n "$uuid" ]; then
            check by-uuid CUDA_VISIBLE_DEVICES="$uuid" || status=1
        fi
        if [ "$status" = 0 ]; then echo "=== gpu-check: PASSED"; else echo "=== gpu-check: FAILED"; fi
        exit "$status"
    } 2>&1 | tee "$out/gpu-check.log"
}

case $mode in
build) build ;;
run) run ;;
all)
    build
    run
    ;;
*)
    echo "usage: $0 [build|run]" >&2
    exit 2
    ;;
esac
