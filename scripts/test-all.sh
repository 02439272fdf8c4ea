#!/usr/bin/env bash
# The whole test suite: formatting, lints, every test of the workspace (unit,
# behaviour, integration, UI, doc tests), benches once in test mode, and the
# no-SDK consumer crate. README.md and .ci/run call exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
# one build per run: incremental caches only cost disk (tens of GB) and time
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}

# each step names the free disk: a cold build of the suite takes about 15 GB,
# and a full disk fails at whichever link step comes next
step() { printf '\n==> %s   [disk free: %s]\n' "$*" "$(df -h --output=avail "$CARGO_TARGET_DIR" 2>/dev/null | tail -1 | tr -d ' ' || echo '?')"; }
mkdir -p "$CARGO_TARGET_DIR"

step "install test dependencies (apt: Open MPI, libclang; pip: rotel, OpenTelemetry SDK)"
bash scripts/install-test-deps.sh

step "cargo fmt --check"
cargo fmt --all -- --check
cargo fmt --manifest-path tests/no-sdk/Cargo.toml -- --check
cargo fmt --manifest-path tests/minimal/Cargo.toml -- --check
cargo fmt --manifest-path tests/observer/Cargo.toml -- --check

step "Markdown links: every relative link and repository path in *.md resolves"
bash scripts/check-links.sh

step "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings

step "build the examples and the lens command (integration tests run them as separate processes)"
cargo build -p examples --examples
cargo build -p nemo-lens --examples
cargo build -p nemo-lens-cli

step "cargo test --workspace (unit, behaviour, integration, UI; benches run once in test mode)"
cargo test --workspace --all-targets

step "doc tests"
cargo test --workspace --doc

step "MPI: the pipeline example under mpirun -np 4"
cargo build -p examples --features mpi --example pretrain_mpi
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 cargo test -p tests --features mpi --test mpi

step "the README's first-screen snippet, copied into a fresh crate and run"
bash scripts/readme-snippet.sh

step "a first report: lens record around the quickstart, its HTML page rendered in headless Chromium"
bash scripts/first-report.sh

step "cargo doc (warnings are errors: broken or private intra-doc links)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

step "cargo package: the publishable crates (nemo-lens, -macros, -runtime, -names, -perfetto, -cli)"
# --no-verify: they depend on each other by path, and none is on crates.io yet
cargo package --no-verify --allow-dirty -p nemo-lens-names -p nemo-lens-macros \
  -p nemo-lens-perfetto -p nemo-lens-runtime -p nemo-lens -p nemo-lens-cli

step "MSRV: the published crates build with the workspace's rust-version"
# the toolchain scripts/install-test-deps.sh installed; every feature but
# `mpi` (as docs.rs builds them), then the API + macros profile
msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)
echo "rust-version = $msrv"
cargo "+$msrv" check --locked -p nemo-lens-names -p nemo-lens-macros -p nemo-lens-perfetto \
  -p nemo-lens-runtime -p nemo-lens -p nemo-lens-cli \
  --features nemo-lens/sdk,nemo-lens/tracing,nemo-lens/tls,nemo-lens/http,nemo-lens/tower,nemo-lens/reqwest
cargo "+$msrv" check --locked -p nemo-lens --no-default-features

step "the lean profile (file + tracing, docs/profiles.md): no gRPC or HTTP stack"
lean=$(cargo tree -p nemo-lens -e normal --prefix none --no-default-features --features file,tracing)
if grep -Eq '^(tonic|hyper|h2|reqwest|tower|rustls) ' <<<"$lean"; then
  echo "the file + tracing profile pulls a transport:" >&2
  grep -E '^(tonic|hyper|h2|reqwest|tower|rustls) ' <<<"$lean" | sort -u >&2
  exit 1
fi
echo "ok: no tonic, hyper, h2, reqwest, tower or rustls"

step "lens without default features: no OpenTelemetry SDK in the tree"
tree=$(cargo tree --manifest-path tests/no-sdk/Cargo.toml -e normal)
if grep -q opentelemetry_sdk <<<"$tree"; then
  echo "opentelemetry_sdk is in the dependency tree of a default-features = false build:" >&2
  echo "$tree" >&2
  exit 1
fi
echo "ok: no opentelemetry_sdk"
cargo clippy --manifest-path tests/no-sdk/Cargo.toml --all-targets -- -D warnings
cargo test --manifest-path tests/no-sdk/Cargo.toml

step "feature profiles: each one README.md lists compiles, clippy-clean"
for features in sdk-core file "file,tracing" gpu logs tracing otlp-http otlp-grpc "otlp-http,tls" "otlp-grpc,tls" \
  "sdk,tracing,tls,http,tower,reqwest"; do
  echo "-- nemo-lens --no-default-features --features $features"
  cargo clippy -p nemo-lens -p nemo-lens-runtime --no-default-features --features "$features" -- -D warnings
done
counts=$(bash scripts/crate-counts.sh)
echo "$counts"
# README.md's "Features" section carries this table: it must not go stale
table=$(awk '/^\| profile \| `nemo-lens` features/,/^$/' README.md | sed '/^$/d')
if [ "$counts" != "$table" ]; then
  echo "README.md's crate-count table differs from scripts/crate-counts.sh's output above" >&2
  exit 1
fi
# a setting that needs a missing feature is a setup error naming both
cargo clippy --manifest-path tests/minimal/Cargo.toml --all-targets -- -D warnings
cargo test --manifest-path tests/minimal/Cargo.toml
cargo test --manifest-path tests/minimal/Cargo.toml --features http

step "beside OpenTelemetry's context observer (its own workspace: the feature stays out of the others)"
cargo clippy --manifest-path tests/observer/Cargo.toml --all-targets -- -D warnings
cargo test --manifest-path tests/observer/Cargo.toml

step "loom: model tests of the span engine's lock, hand-over and shutdown drain"
# a target folder of their own: --cfg lens_loom changes every crate's flags,
# and would otherwise rebuild the normal build's files (CONTRIBUTING.md)
RUSTFLAGS="--cfg lens_loom" CARGO_TARGET_DIR="$CARGO_TARGET_DIR/loom" \
  cargo test -p nemo-lens-runtime --no-default-features --features sdk-core --release --lib loom

step "all tests passed"
