#!/usr/bin/env bash
# Throughput and peak memory of the `lens` reader on a synthetic run:
#   scripts/bench-cli.sh [STEPS] [RANKS]
# Defaults make ~10M spans (64 ranks x 15625 steps x 10 spans). Builds the
# release binary first; prints spans/s and peak RSS of each command.
#   BENCH_RUN=DIR     measure an existing run instead of synthesizing one
#   BENCH_NULL=1      write the HTML page and traces to /dev/null (no disk
#                     needed; sizes are then not listed)
#   BENCH_GZIP=1      synthesize gzip files (a tenth of the disk: 1,024 ranks
#                     x 10,000 steps is ~2.6 GB instead of ~30 GB)
#   BENCH_ONLY=report run only `lens report --json` (the diagnosis included)
set -euo pipefail
steps=${1:-15625}
ranks=${2:-64}
root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
cargo build --release -p nemo-lens-cli --manifest-path "$root/Cargo.toml" >&2
lens=$target/release/lens
work=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$work"
trap '[ -z "${BENCH_KEEP:-}" ] && rm -rf "$work"' EXIT
run=${BENCH_RUN:-$work/run}
o() { if [ -n "${BENCH_NULL:-}" ]; then echo /dev/null; else echo "$work/$1"; fi; }

measure() { # label spans cmd...
  local label=$1 spans=$2; shift 2
  /usr/bin/time -v "$@" >/dev/null 2>"$work/time.txt" || { cat "$work/time.txt" >&2; return 1; }
  local secs rss
  secs=$(awk -F': ' '/Elapsed \(wall clock\)/{n=split($2,a,":"); s=0; for(i=1;i<=n;i++) s=s*60+a[i]; print s}' "$work/time.txt")
  rss=$(awk -F': ' '/Maximum resident set size/{print $2}' "$work/time.txt")
  awk -v l="$label" -v n="$spans" -v s="$secs" -v r="$rss" \
    'BEGIN{printf "%-22s %10d spans %8.2f s %12.0f spans/s   peak RSS %6.1f MB\n", l, n, s, n/s, r/1024}'
}

if [ -n "${BENCH_RUN:-}" ]; then
  # the first "spans" of the JSON report is its input count
  spans=$("$lens" report --json "$run" | awk '$1 == "\"spans\":" && !n {n = $2 + 0} END {print n}')
else
  start=$(date +%s.%N)
  "$lens" synth --ranks "$ranks" --steps "$steps" --microbatches 2 --out "$run" \
    ${BENCH_GZIP:+--gzip} 2>"$work/synth.txt"
  end=$(date +%s.%N)
  spans=$(grep -o 'wrote [0-9]*' "$work/synth.txt" | grep -o '[0-9]*')
  bytes=$(du -sb "$run" | cut -f1)
  awk -v n="$spans" -v s="$(echo "$end - $start" | bc)" -v b="$bytes" \
    'BEGIN{printf "%-22s %10d spans %8.2f s %12.0f spans/s   %.0f MB on disk\n", "synth", n, s, n/s, b/1e6}'
fi
if [ "${BENCH_ONLY:-}" = report ]; then
  measure "report --json" "$spans" "$lens" report --json "$run"
  exit 0
fi
measure "report" "$spans" "$lens" report "$run"
measure "report --json" "$spans" "$lens" report --json "$run"
measure "report --html" "$spans" "$lens" report --html "$(o run.html)" "$run"
measure "perfetto (proto)" "$spans" "$lens" perfetto "$run" -o "$(o trace.pftrace)"
measure "perfetto (chrome-json)" "$spans" "$lens" perfetto "$run" -o "$(o trace.json)" --format chrome-json
if [ -z "${BENCH_NULL:-}" ]; then
  ls -la "$work/run.html" "$work/trace.pftrace" "$work/trace.json" | awk '{printf "%s %.0f MB\n", $NF, $5/1e6}'
fi
