#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine (as root);
# each step is skipped when already satisfied. scripts/test-all.sh runs it
# first, so README's test command works on a new machine too.
set -euo pipefail

# Toolchain components used by the suite.
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  rustup component add rustfmt clippy
fi

# The oldest Rust the crates claim (the workspace's rust-version):
# scripts/test-all.sh checks the published crates with it.
msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' "$(dirname "$0")/../Cargo.toml")
if ! rustup run "$msrv" rustc --version >/dev/null 2>&1; then
  rustup toolchain install "$msrv" --profile minimal
fi

# Open MPI for the multi-process tests (rsmpi builds against it with
# libclang), python3 + pip for the test peers.
need_apt=()
command -v mpirun >/dev/null || need_apt+=(openmpi-bin)
dpkg -s libopenmpi-dev >/dev/null 2>&1 || need_apt+=(libopenmpi-dev)
dpkg -s libclang-dev >/dev/null 2>&1 || need_apt+=(libclang-dev)
command -v python3 >/dev/null || need_apt+=(python3)
python3 -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip)
# tests/tests/parity_python.rs installs the Python nemo-lens peer into a
# virtual environment of its own (Debian splits venv's ensurepip out)
python3 -c "import ensurepip, venv" >/dev/null 2>&1 || need_apt+=(python3-venv)
# Headless Chromium renders `lens report --html` in lens-cli's tests.
command -v chromium >/dev/null || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi

# Test peers: the rotel OTLP collector (its binary ships in the PyPI wheel;
# the tests start it themselves on free loopback ports) and the Python
# OpenTelemetry SDK for the interop tests.
peers=("rotel==0.0.1a15" "opentelemetry-sdk==1.45.2" "opentelemetry-exporter-otlp==1.45.2")
# lens-cli's tests decode `lens perfetto` output with the perfetto package's
# own trace schema.
python3 -c "import perfetto.protos.perfetto.trace.perfetto_trace_pb2" >/dev/null 2>&1 || peers+=("perfetto==0.59.1")
# A Debian system python3 refuses global installs (PEP 668,
# "externally-managed-environment"); the tests run `python3` itself, so on
# such a machine install into it anyway, as root on a throwaway CI box.
if ! python3 -m pip install -q --disable-pip-version-check "${peers[@]}"; then
  python3 -m pip install -q --disable-pip-version-check --break-system-packages "${peers[@]}"
fi
python3 -c "import rotel, os; p = os.path.join(os.path.dirname(rotel.__file__), 'rotel-agent'); assert os.access(p, os.X_OK), p; print('rotel-agent:', p)"
