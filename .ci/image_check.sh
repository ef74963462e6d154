#!/usr/bin/env bash
# Builds the container image (tools/image.sh) and checks what the Helm chart
# relies on, with Podman on this host:
#   - the image is at most 40 MB and its binary is the crate's version;
#   - run as in the chart (uid 10001, read-only root filesystem, no
#     capabilities) with a volume for its data directory and a tokens file,
#     it answers GET /healthz and grpc.health.v1 SERVING;
#   - the chart's `helm test` script (stats; start, add-span, complete a
#     rollout; read it back) runs in a second container of the image, with its
#     shell and the image's CLI, against the first, on SQLite;
#   - stopped with SIGTERM it exits 0; started again on the same volume it
#     still has the rollout, succeeded, with its span.
# Usage: .ci/image_check.sh  (from anywhere; PYTHON names a python with
# grpcio and grpcio-health-checking, default python3)
# Podman here runs as root with runc, cgroupfs and no default ulimits (set in
# a temporary CONTAINERS_CONF unless CONTAINERS_CONF is set); PODMAN_FLAGS
# overrides those global flags. Only loopback addresses are used (--network
# host, listen 127.0.0.1). Containers and the volume are removed at exit.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON=${PYTHON:-python3}
LIMIT_BYTES=40000000 # 40 MB
read -r -a podman_flags <<<"${PODMAN_FLAGS:---runtime runc --cgroup-manager cgroupfs}"
pm() { podman "${podman_flags[@]}" "$@"; }

work=$(mktemp -d)
if [ -z "${CONTAINERS_CONF:-}" ]; then
  printf '[containers]\ndefault_ulimits = []\n' >"$work/containers.conf"
  export CONTAINERS_CONF=$work/containers.conf
fi
name=lightning-store-image-check-$$
volume=lightning-store-image-check-$$

cleanup() {
  local rc=$?
  if [ "$rc" -ne 0 ] && pm container exists "$name" 2>/dev/null; then
    echo "--- server log (podman logs $name) ---" >&2
    pm logs --tail 60 "$name" >&2 || true
  fi
  pm rm -f -t 0 "$name" >/dev/null 2>&1 || true
  pm volume rm -f "$volume" >/dev/null 2>&1 || true
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step() { echo "--> $*"; }

step "tools/image.sh"
tag=$(tools/image.sh | tail -n 1)
version=${tag##*:}

size=$(pm image inspect --format '{{.Size}}' "$tag")
echo "$tag: $size bytes ($(( (size + 500000) / 1000000 )) MB; at most $LIMIT_BYTES)"
if [ "$size" -gt "$LIMIT_BYTES" ]; then
  echo "the image exceeds 40 MB" >&2
  exit 1
fi
got=$(pm run --rm "$tag" --version)
if [ "$got" != "lightning-store $version" ]; then
  echo "the image's binary says '$got', not 'lightning-store $version'" >&2
  exit 1
fi
echo "$got"

free_port() {
  python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}
port=$(free_port)
metrics_port=$(free_port)

step "an admin token, made by the image's CLI (token new)"
pm run --rm "$tag" token new --role admin --name image-check >"$work/token-new"
LIGHTNING_STORE_TOKEN=$(sed -n 1p "$work/token-new")
export LIGHTNING_STORE_TOKEN
sed -n 2p "$work/token-new" >"$work/tokens"
chmod 0644 "$work/tokens"

pm volume create "$volume" >/dev/null

start_server() {
  pm run -d --name "$name" --network host \
    --read-only --cap-drop ALL --security-opt no-new-privileges \
    -v "$volume:/var/lib/lightning-store" \
    -v "$work/tokens:/etc/lightning-store/tokens/tokens:ro" \
    -e LIGHTNING_STORE_TOKENS_FILE=/etc/lightning-store/tokens/tokens \
    "$tag" serve --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$metrics_port" >/dev/null
}

healthy() {
  "$PYTHON" - "$port" <<'EOF'
import sys
import urllib.request

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

addr = f"127.0.0.1:{sys.argv[1]}"
try:
    with urllib.request.urlopen(f"http://{addr}/healthz", timeout=2) as reply:
        if reply.status != 200:
            sys.exit(1)
    with grpc.insecure_channel(addr) as channel:
        status = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=2).status
except (OSError, grpc.RpcError):
    sys.exit(1)
sys.exit(0 if status == health_pb2.HealthCheckResponse.SERVING else 1)
EOF
}

wait_healthy() {
  local deadline=$((SECONDS + 30))
  until healthy; do
    if [ "$(pm inspect --format '{{.State.Running}}' "$name")" != "true" ]; then
      echo "the server's container exited before it became healthy" >&2
      exit 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "the server did not become healthy within 30 s" >&2
      exit 1
    fi
    sleep 0.5
  done
  echo "healthy: GET /healthz 200 and grpc.health.v1 SERVING on 127.0.0.1:$port"
}

# A client: the image's CLI in a second container, sending the token.
client() {
  pm run --rm --network host --read-only --cap-drop ALL \
    -e LIGHTNING_STORE_SERVER="http://127.0.0.1:$port" -e LIGHTNING_STORE_TOKEN "$@"
}

stop_server() {
  pm stop -t 20 "$name" >/dev/null
  local rc
  rc=$(pm inspect --format '{{.State.ExitCode}}' "$name")
  if [ "$rc" != "0" ]; then
    echo "the server exited with status $rc after SIGTERM" >&2
    exit 1
  fi
  pm rm "$name" >/dev/null
  echo "the server exited 0 on SIGTERM"
}

step "serve on SQLite in the volume (read-only root filesystem, uid 10001, no capabilities)"
start_server
wait_healthy
metrics=$(python3 -c 'import sys, urllib.request
print(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=5).read().decode())' "$metrics_port")
grep -q '^lightning_store_' <<<"$metrics" || { echo "no lightning_store_ metric on /metrics" >&2; exit 1; }
echo "/metrics answers"

step "a rollout's lifecycle with the image's shell and CLI (the chart's helm test script)"
# The script runs in the container's shell: its $ expand there.
# shellcheck disable=SC2016
out=$(client --entrypoint /bin/sh "$tag" -ec '
lightning-store stats
id=$(lightning-store start --input "{\"image_check\": true}" --worker-id image-check --json \
  | sed -n "s/^  \"rollout_id\": \"\([^\"]*\)\".*/\1/p")
test -n "$id"
lightning-store add-span "$id" latest --name image.check
lightning-store complete "$id"
lightning-store rollout "$id" --json | grep -q "^  \"status\": \"succeeded\""
echo "rollout $id succeeded"')
echo "$out"
id=$(sed -n 's/^rollout \(.*\) succeeded$/\1/p' <<<"$out")
test -n "$id"

step "restart on the same volume"
stop_server
start_server
wait_healthy
# Each reply is read whole before it is searched: `grep -q` in the pipe would
# close it at the first match, and under pipefail the client's broken pipe
# would fail the check.
rollout=$(client "$tag" rollout "$id" --json)
grep -q '^  "status": "succeeded"' <<<"$rollout" \
  || { echo "after the restart, rollout $id is not there as succeeded" >&2; exit 1; }
spans=$(client "$tag" spans "$id")
grep -q 'image.check' <<<"$spans" \
  || { echo "after the restart, rollout $id has no span image.check" >&2; exit 1; }
echo "after the restart: rollout $id succeeded, with its span image.check"
stop_server

echo "image check passed: $tag, $size bytes"
