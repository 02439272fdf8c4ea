#!/usr/bin/env bash
# A newcomer's first report, as the README shows it: `lens record` around
# `cargo run … --example quickstart`, in a fresh directory. Checks that the
# report is printed and that its HTML page renders in headless Chromium
# (the DOM after its scripts ran, and a screenshot kept in
# $CARGO_TARGET_DIR/first-report/ for a person to look at).
# scripts/test-all.sh calls this after building the lens command.
#
#   PROFILE=release bash scripts/first-report.sh   # the README's exact command
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
profile=${PROFILE:-debug}
keep="$target/first-report"
rm -rf "$keep"
mkdir -p "$keep"
work=$(mktemp -d "${TMPDIR:-/tmp}/lens-first-report.XXXXXX")
trap 'rm -rf "$work"' EXIT

lens="$target/debug/lens"
[ -x "$lens" ] || (cd "$root" && cargo build -q -p nemo-lens-cli)

release=()
[ "$profile" = release ] && release=(--release)
# the user's shell has nothing of lens set
for v in $(env | grep -oE '^(NEMO_LENS|OTEL)_[A-Z_]*' || true); do unset "$v"; done

start=$(date +%s)
(cd "$work" && "$lens" record --out run -- \
  cargo run -q "${release[@]}" --manifest-path "$root/Cargo.toml" -p examples --example quickstart) \
  >"$keep/stdout.txt" 2>"$keep/stderr.txt" || {
  echo "lens record failed:" >&2
  cat "$keep/stdout.txt" "$keep/stderr.txt" >&2
  exit 1
}
echo "lens record took $(($(date +%s) - start)) s"

fail() {
  echo "first report: $*" >&2
  echo "--- stdout" >&2
  cat "$keep/stdout.txt" >&2
  echo "--- stderr" >&2
  cat "$keep/stderr.txt" >&2
  exit 1
}
grep -q '^Run [^ ]*: [0-9]* spans from 1 rank' "$keep/stdout.txt" || fail "no report header"
grep -q '^Spans by name' "$keep/stdout.txt" || fail "no spans table"
page="$work/run/report.html"
grep -q "HTML report:   $(cd "$work/run" && pwd -P)/report.html" "$keep/stdout.txt" ||
  fail "the page's path is not printed"
[ -s "$page" ] || fail "no HTML page at $page"
cp "$page" "$keep/report.html"

chromium=$(command -v chromium || command -v chromium-browser || true)
[ -n "$chromium" ] || fail "chromium is not installed (scripts/install-test-deps.sh installs it)"
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
  --disable-background-networking --disable-component-update --disable-sync
  --user-data-dir="$work/chromium" --window-size=1400,1000)
# the DOM after the page's scripts ran: the timeline is drawn by them
timeout 120 "$chromium" "${flags[@]}" --dump-dom "file://$page" >"$keep/dom.html" 2>/dev/null ||
  fail "chromium could not load the page"
grep -q '<svg' "$keep/dom.html" || fail "the rendered page has no timeline (no <svg>)"
grep -q 'train.step' "$keep/dom.html" || fail "the rendered page does not name train.step"
timeout 120 "$chromium" "${flags[@]}" --screenshot="$keep/report.png" "file://$page" \
  >/dev/null 2>&1 || fail "chromium could not take a screenshot"
[ "$(stat -c %s "$keep/report.png")" -gt 10000 ] || fail "the screenshot is (nearly) empty"
echo "ok: report printed; page rendered; screenshot $keep/report.png"
