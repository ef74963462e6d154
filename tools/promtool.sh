#!/usr/bin/env bash
# Prints the path of Prometheus' promtool, fetching it first when missing:
# Debian's `prometheus` package (the registry reachable here), unpacked under
# target/tools/ of the repository, once per checkout. The metrics test runs
# `promtool check metrics` on our /metrics text with it.
#
#   "$(tools/promtool.sh)" check metrics < metrics.txt
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${LIGHTNING_STORE_TOOLS_DIR:-$root/target/tools}/prometheus
promtool=$dir/usr/bin/promtool

mkdir -p "$dir"
exec 9>"$dir.lock-file"
flock 9
if [ ! -x "$promtool" ]; then
  download=$(mktemp -d)
  trap 'rm -rf "$download"' EXIT
  (cd "$download" && apt-get download prometheus >/dev/null 2>&1) || {
    echo "promtool.sh: apt-get download prometheus failed" >&2
    exit 1
  }
  dpkg-deb -x "$download"/prometheus_*.deb "$dir"
fi
echo "$promtool"
