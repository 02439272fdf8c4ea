#!/usr/bin/env bash
# The write path at the limit, before and after side by side in one run.
#
# Builds the `write_path` bench (lens/benches/write_path.rs) twice, release:
# from this tree ("after") and from commit BASE ("before", exported with
# `git archive` into target/write-path-base/src, this tree's bench file
# copied in; same CARGO_TARGET_DIR, so only the workspace crates build
# twice). Then, ROUNDS times, runs every exporter of both builds, one
# process each, alternating, N spans of `managed_span!` with one attribute
# at full speed (a burst), default settings. The `discard` row is the span
# path alone (records built into SpanData, then discarded), given a queue
# of 1,048,576 so that it does all the work. Last, the "after" file and
# perfetto exporters at a sustained RATE spans/s for 3 s.
#
# Each line: spans written (and for `file` found in the file), dropped
# (counted by lens), total CPU per span (getrusage user+sys of the process
# over the loop and the shutdown / N), the calling thread's share, bytes per
# span written, peak RSS (ru_maxrss).
#
# Last, when valgrind is installed (and CALLGRIND is not 0), the encoders'
# instructions per span under callgrind, both builds, CG_N spans each: the
# inclusive count of the exporter's encoding function (`file`:
# `JsonLines::export_spans`, the whole export but the write(2) itself;
# `perfetto`: `Files::encode`) over the spans. Unlike the CPU times, these
# do not move with the load of the machine.
#
# Usage: scripts/write-path.sh        Env: BASE (default 0c533c0), N
# (default 1000000), ROUNDS (default 2), RATE (default 1000000), CG_N
# (default 50000), CALLGRIND (default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:-0c533c0}
N=${N:-1000000}
ROUNDS=${ROUNDS:-2}
RATE=${RATE:-1000000}
CG_N=${CG_N:-50000}
CALLGRIND=${CALLGRIND:-1}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target} CARGO_INCREMENTAL=0
export NEMO_LENS_QUIET=1

bench_bin() { # the newest write_path binary
    ls -t "$CARGO_TARGET_DIR"/release/deps/write_path-* | grep -v '\.d$' | head -1
}

# Both builds share the target folder and the workspace crates keep their
# artifact names, and cargo judges them fresh by the sources it last
# compiled them from (the other tree's): clean them before each build, or
# "before" would silently link this tree's crates (or the reverse).
workspace_clean() {
    for p in nemo-lens nemo-lens-runtime nemo-lens-perfetto nemo-lens-macros nemo-lens-names; do
        cargo clean -q --release -p "$p" 2>/dev/null || true # (a crate BASE lacks)
    done
}

workspace_clean
cargo build -q --release -p nemo-lens --bench write_path
AFTER=$(bench_bin)
cp "$AFTER" "$CARGO_TARGET_DIR/write-path-after"

SRC=$CARGO_TARGET_DIR/write-path-base/src
rm -rf "$SRC" && mkdir -p "$SRC"
git archive "$BASE" | tar -x -C "$SRC"
cp lens/benches/write_path.rs "$SRC/lens/benches/"
grep -q 'name = "write_path"' "$SRC/lens/Cargo.toml" ||
    sed -i 's/^\[lints\]$/[[bench]]\nname = "write_path"\nharness = false\n\n[lints]/' "$SRC/lens/Cargo.toml"
(cd "$SRC" && workspace_clean && cargo build -q --release -p nemo-lens --bench write_path)
cp "$(bench_bin)" "$CARGO_TARGET_DIR/write-path-before"
# and once more: the next build of this tree (or of anyone sharing the
# target folder) must not take BASE's crates for fresh
workspace_clean
if cmp -s "$CARGO_TARGET_DIR/write-path-before" "$CARGO_TARGET_DIR/write-path-after"; then
    echo "warning: the before and after binaries are identical" >&2
fi

echo "write path: $N spans, one attribute, before = $BASE, after = $(git rev-parse --short HEAD)"
for r in $(seq "$ROUNDS"); do
    echo "-- round $r"
    for e in discard file perfetto; do
        for which in before after; do
            q=""
            [ "$e" = discard ] && q=1048576
            printf '%-6s ' "$which"
            OTEL_BSP_MAX_QUEUE_SIZE=$q "$CARGO_TARGET_DIR/write-path-$which" "$e" "$N" 2>/dev/null
        done
    done
done
echo "-- sustained $RATE spans/s for 3 s, after"
for e in file perfetto; do
    printf '%-6s ' after
    "$CARGO_TARGET_DIR/write-path-after" "$e" $((RATE * 3)) --rate "$RATE" 2>/dev/null
done

[ "$CALLGRIND" != 0 ] && command -v valgrind >/dev/null || exit 0
echo "-- encoder instructions per span (callgrind, $CG_N spans)"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for e in file perfetto; do
    case $e in
    file) fn='::JsonLines::export_spans [' ;;
    perfetto) fn='::perfetto::Files::encode [' ;;
    esac
    for which in before after; do
        NEMO_LENS_QUIET=1 valgrind --tool=callgrind --callgrind-out-file="$out/$e-$which" \
            "$CARGO_TARGET_DIR/write-path-$which" "$e" "$CG_N" >/dev/null 2>&1
        ir=$(callgrind_annotate --inclusive=yes "$out/$e-$which" 2>/dev/null |
            awk -v fn="$fn" '!n && index($0, fn) { gsub(",", "", $1); print $1; n = 1 }')
        printf '%-6s %-9s %6d instructions/span\n' "$which" "$e" $((${ir:-0} / CG_N))
    done
done
