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
