#!/usr/bin/env bash
# Installs the Python nemo-lens peer (../shared/peers/nemo-lens-0.2.0, or
# the folder given) into a virtual environment of its own, once: a rerun
# with the same peer finds the stamp and returns at once.
#   usage: peer-venv.sh PEER_DIR VENV_DIR   (prints VENV_DIR/bin/python)
# The peer declares Python >= 3.12; on 3.11 its one 3.12-only statement
# (`type X = ...`) is rewritten in a copy, never in place (see
# ../shared/peers/README.md). The venv sees the system site-packages, where
# scripts/install-test-deps.sh puts the OpenTelemetry SDK and OTLP exporters
# of the interop tests, so the install needs no network when they are there.
set -euo pipefail
peer=$1
venv=$2
stamp="$venv/.peer-stamp"
want="$(cd "$peer" && find . -type f -newer /dev/null -print0 | sort -z | xargs -0 cat | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ]; then
  echo "$venv/bin/python"
  exit 0
fi
rm -rf "$venv"
python3 -m venv --system-site-packages "$venv" >&2
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
cp -r "$peer"/. "$copy"/
chmod -R u+w "$copy"
sed -i 's/^type ExportStrategy = /ExportStrategy = /' "$copy/src/nemo/lens/strategies.py"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --ignore-requires-python "$copy[sdk]" >&2
"$venv/bin/python" -c "import nemo.lens, opentelemetry.sdk.metrics" >&2
echo "$want" >"$stamp"
echo "$venv/bin/python"
