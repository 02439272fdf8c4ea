#!/usr/bin/env bash
# Two or more builds of the total_cpu bench, interleaved run by run: the
# fair way to compare them on a machine whose speed drifts between minutes.
#
# Usage: scripts/compare-total-cpu.sh RUNS BIN [BIN ...]
#   BIN: a copy of the bench binary of each build, e.g. after
#        cargo bench -p nemo-lens --bench total_cpu --no-run
#        cp target/release/deps/total_cpu-<hash> /tmp/tc_after
# Env: VARIANT (default lens_record), SPANS (default 1000000)
#
# Prints, per run, the calling thread's and all threads' CPU ns per span,
# the drop rate and the page faults (`/usr/bin/time -f %R`), then per
# binary the means and the mean of (all threads - calling thread): the
# work off the calling thread.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,14p' "$0" >&2; exit 2; }
runs=$1
shift
for ((i = 0; i < runs; i++)); do
    for bin in "$@"; do
        out=$(NEMO_LENS_QUIET=1 /usr/bin/time -f "faults %R" "$bin" \
            --variant "${VARIANT:-lens_record}" "${SPANS:-1000000}" 2>&1)
        calling=$(grep -o 'calling thread *[0-9.]*' <<<"$out" | awk '{print $3}')
        all=$(grep -o 'all threads *[0-9.]*' <<<"$out" | awk '{print $3}')
        dropped=$(grep -o 'dropped [0-9.]*/span' <<<"$out" | awk '{print $2}')
        faults=$(grep -o 'faults [0-9]*' <<<"$out" | awk '{print $2}')
        echo "$(basename "$bin") $calling $all $dropped $faults"
    done
done | awk '
    { print; n[$1]++; c[$1] += $2; a[$1] += $3; f[$1] = f[$1] " " $5 }
    END {
        printf "%-16s %10s %10s %10s  %s\n", "binary", "calling", "all", "off-thread", "faults"
        for (k in n)
            printf "%-16s %10.1f %10.1f %10.1f %s\n", k, c[k] / n[k], a[k] / n[k], (a[k] - c[k]) / n[k], f[k]
    }'
