#!/usr/bin/env bash
# Crates compiled for a build of `nemo-lens` in each feature profile (the
# package itself included; normal and build dependencies, as `cargo build`
# compiles them; target-specific crates for this host only). Prints a
# markdown table; README.md's "Features" section carries its output.
set -euo pipefail
cd "$(dirname "$0")/.."
count() {
  cargo tree -p nemo-lens -e normal,build --prefix none --no-default-features "$@" 2>/dev/null |
    sed 's/ (\*)$//; s/ (proc-macro)//' | grep -v '^$' | sort -u | wc -l
}
echo "| profile | \`nemo-lens\` features | crates |"
echo "|---|---|---|"
row() {
  local shown="(none)"
  [ -n "$2" ] && shown="\`$2\`"
  echo "| $1 | $shown | $(count ${2:+--features "$2"}) |"
}
row "library: API + macros" ""
row "SDK, console only" "sdk-core"
row "file and Perfetto" "file"
row "lean: files + \`tracing\` bridge" "file,tracing"
row "OTLP/HTTP" "otlp-http"
row "OTLP/gRPC" "otlp-grpc"
row "GPU metrics, console" "gpu"
row "log bridge, console" "logs"
row "\`tracing\` bridge, no SDK" "tracing"
row "default (\`sdk\`, \`tracing\`)" "sdk,tracing"
row "default + TLS" "sdk,tracing,tls"
row "everything but \`mpi\`" "sdk,tracing,tls,http,tower,reqwest"
