#!/usr/bin/env bash
# The engine's hand-rolled pieces against the vetted crates that could
# replace them (issue 42, item 4): instructions per operation under
# callgrind (lens-runtime/benches/vetted.rs, release), which do not move
# with the machine's load. An operation is a span's two takes of its
# list's lock (uncontended), or three nested spans started and ended
# innermost first in a slab. Each variant runs N and 2N operations in its
# own process; the difference / N is the count per operation, start-up
# and first allocations left out. For time, `cargo bench -p
# nemo-lens-runtime --bench vetted` (criterion; locked instructions cost
# cycles that instruction counts do not show).
#
# Usage: scripts/vetted.sh        Env: N (default 200000)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-200000}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target} CARGO_INCREMENTAL=0
cargo build -q --release -p nemo-lens-runtime --bench vetted
bin=$(ls -t "$CARGO_TARGET_DIR"/release/deps/vetted-* | grep -v '\.d$' | head -1)
count() { # instructions of a whole run of variant $1 with $2 operations
    local out
    out=$(mktemp)
    VETTED=$1 VETTED_N=$2 valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" >/dev/null 2>&1
    callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }'
    rm -f "$out"
}
printf '%-28s %s\n' variant "instructions/op"
for v in "lock/SpinLock" "lock/parking_lot::Mutex" "lock/std::sync::Mutex" \
    "slab/Slab (lens)" "slab/slab::Slab" "slab/slab::Slab, ids checked" "slab/sharded_slab::Slab"; do
    one=$(count "$v" "$N")
    two=$(count "$v" $((2 * N)))
    printf '%-28s %s\n' "$v" "$(awk -v a="$one" -v b="$two" -v n="$N" 'BEGIN { printf "%.2f", (b - a) / n }')"
done
