#!/usr/bin/env bash
# Instructions per span of a total_cpu variant on all threads together,
# and on the calling thread and on the others apart: callgrind over the whole process
# (setup, spans, final flush) at two span counts, the difference divided
# by the difference in spans (setup and shutdown cancel out).
#
# Usage: scripts/callgrind-all-threads.sh BIN VARIANT [VARIANT ...]
#   BIN: the total_cpu bench binary (cargo bench -p nemo-lens --bench
#        total_cpu --no-run; target/release/deps/total_cpu-<hash>)
# Env: N1, N2 (span counts, default 50000 / 150000); NEMO_LENS_OTEL_CONTEXT
#      passes through (ids or full); KEEP=1 keeps the
#      callgrind files (one per thread: -01 is the calling thread).
#
# Mostly load-independent, unlike time (what depends on time does not
# cancel out: `quanta`'s and `fastant`'s calibration loops, the collector's
# naps, and work a calling thread takes over when the collector is
# behind); and callgrind counts each iteration of
# `rep movsb` (glibc's memcpy of large blocks) as an instruction, so a
# variant that copies big blocks (the raw SDK's channel, lens's collector)
# counts far more than its time: compare a variant with itself across
# builds, not variants with each other.
set -euo pipefail
shopt -s failglob inherit_errexit
[ $# -ge 2 ] || { sed -n '2,20p' "$0" >&2; exit 2; }
bin=$1
shift
n1=${N1:-50000}
n2=${N2:-150000}
[ "$n2" -gt "$n1" ] || { echo "N2 ($n2) must be above N1 ($n1)" >&2; exit 2; }
dir=
trap '[ -z "${KEEP:-}" ] && [ -n "$dir" ] && rm -rf "$dir"' EXIT
for variant in "$@"; do
    dir=$(mktemp -d)
    # the span path as the all-variants run sets it
    case $variant in
        lens_record) path=lens ;;
        *) path=sdk ;;
    esac
    for n in $n1 $n2; do
        NEMO_LENS_SPAN_PATH=$path NEMO_LENS_QUIET=1 valgrind --tool=callgrind --separate-threads=yes --fair-sched=yes \
            --callgrind-out-file="$dir/cg.$n" "$bin" --variant "$variant" "$n" \
            >"$dir/log.$n" 2>&1 || { cat "$dir/log.$n" >&2; exit 1; }
    done
    total() { # total of the files matching $1
        local sum=0 f v
        for f in $1; do
            v=$(awk '/^(summary|totals):/ { print $2; exit }' "$f")
            [ -n "$v" ] || { echo "no totals in $f" >&2; exit 1; }
            sum=$((sum + v))
        done
        echo "$sum"
    }
    all1=$(total "$dir/cg.$n1-*")
    all2=$(total "$dir/cg.$n2-*")
    main1=$(total "$dir/cg.$n1-01")
    main2=$(total "$dir/cg.$n2-01")
    awk -v a1="$all1" -v a2="$all2" -v m1="$main1" -v m2="$main2" -v d=$((n2 - n1)) -v v="$variant" \
        'BEGIN { printf "%-14s all threads %8.1f   calling thread %8.1f   others %8.1f  instr/span\n",
                 v, (a2 - a1) / d, (m2 - m1) / d, (a2 - a1 - m2 + m1) / d }'
    if [ -n "${KEEP:-}" ]; then echo "kept: $dir"; else rm -rf "$dir"; fi
    dir=
done
