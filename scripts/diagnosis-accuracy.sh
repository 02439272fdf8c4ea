#!/usr/bin/env bash
# Accuracy of `lens report`'s diagnosis on the real synchronized job
# (lens/examples/ddp_sync.rs: 8 processes, a TCP barrier in allreduce.grads): every
# case of tests/tests/sync_job.rs, ROUNDS times each (default 5), and the
# table of how often the planted rank and phase came first (top-1) or in the
# first two (top-2); balanced runs count as right when nobody is named.
#
#   bash scripts/diagnosis-accuracy.sh [ROUNDS]
#
# Not part of CI (it takes a few minutes); the tests check each case once.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build -q -p nemo-lens --example ddp_sync
cargo build -q -p nemo-lens-cli
job="$CARGO_TARGET_DIR/debug/examples/ddp_sync"
lens="$CARGO_TARGET_DIR/debug/lens"
work=$(mktemp -d "${TMPDIR:-/tmp}/lens-accuracy.XXXXXX")
trap 'rm -rf "$work"' EXIT

# name | expected rank:phase (or "none") | environment
cases=(
  "a slow data.next_batch|5:data.next_batch|DDP_SLOW_RANK=5 DDP_SLOW_PHASE=data.next_batch DDP_SLOW_MS=8"
  "b slow forward_backward|3:forward_backward|DDP_SLOW_RANK=3 DDP_SLOW_PHASE=forward_backward DDP_SLOW_MS=8"
  "c slow optimizer (after the sync)|6:optimizer.step|DDP_SLOW_RANK=6 DDP_SLOW_PHASE=optimizer.step DDP_SLOW_MS=8"
  "d every 4th step|2:data.next_batch|DDP_SLOW_RANK=2 DDP_SLOW_PHASE=data.next_batch DDP_SLOW_MS=10 DDP_SLOW_EVERY=4"
  "e steps 10-20 only|7:forward_backward|DDP_SLOW_RANK=7 DDP_SLOW_PHASE=forward_backward DDP_SLOW_MS=10 DDP_SLOW_STEPS=10-20"
  "f small (3 ms, ~15% of a step)|4:forward_backward|DDP_SLOW_RANK=4 DDP_SLOW_PHASE=forward_backward DDP_SLOW_MS=3"
  "g on rank 0|0:forward_backward|DDP_SLOW_RANK=0 DDP_SLOW_PHASE=forward_backward DDP_SLOW_MS=8"
  "h two ranks (12 ms first, 6 ms listed)|2:forward_backward|DDP_SLOW_RANK=2 DDP_SLOW_PHASE=forward_backward DDP_SLOW_MS=12 DDP_SLOW2_RANK=6 DDP_SLOW2_PHASE=data.next_batch DDP_SLOW2_MS=6"
  "i hang in forward_backward|4:forward_backward|DDP_HANG_RANK=4 DDP_HANG_PHASE=forward_backward DDP_HANG_STEP=5"
  "j balanced, 3 ms jitter|none|DDP_JITTER_MS=3"
  "k balanced, 6 ms jitter|none|DDP_JITTER_MS=6"
)

run() { # DIR ENV...
  local dir=$1
  shift
  mkdir -p "$dir"
  (
    cd "$dir"
    env NEMO_LENS_ENABLED=1 NEMO_LENS_EXPORTER=file NEMO_LENS_EXPORT_STRATEGY=all_ranks \
      NEMO_LENS_SPAN_GROUPS=all NEMO_LENS_QUIET=1 NEMO_LENS_FLUSH_ON_SIGNAL=1 "$@" \
      "$job" --world 8 --steps 40 >/dev/null 2>&1 &
    pid=$!
    if [[ " $* " == *" DDP_HANG_RANK="* ]]; then
      sleep 4
      kill -TERM "$pid" 2>/dev/null || true
    fi
    wait "$pid" || true
  )
}

printf '| case | expected | top-1 | top-2 |\n|---|---|---|---|\n'
for c in "${cases[@]}"; do
  IFS='|' read -r name want envs <<<"$c"
  top1=0 top2=0
  for r in $(seq "$rounds"); do
    dir="$work/$r-${name%% *}"
    # shellcheck disable=SC2086
    run "$dir" $envs
    got=$("$lens" report --json "$dir/lens-telemetry" 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)["suspects"]
print(" ".join(str(x["rank"]) + ":" + x["phase"] for x in s[:2]) or "none")')
    first=${got%% *}
    if [ "$first" = "$want" ]; then top1=$((top1 + 1)); fi
    if [[ " $got " == *" $want "* ]]; then top2=$((top2 + 1)); fi
  done
  printf '| %s | %s | %d/%d | %d/%d |\n' "$name" "$want" "$top1" "$rounds" "$top2" "$rounds"
done
