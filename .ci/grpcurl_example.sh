#!/usr/bin/env bash
# Walks one rollout through lightning-store with grpcurl (a span, a batch of
# spans, the completion stream awaited while the attempt finishes), checking
# each answer (docs/grpc.md shows the same calls to readers; the docs test runs
# those). Usage: .ci/grpcurl_example.sh HOST:PORT
# grpcurl must be on PATH (or set GRPCURL); python3 parses the JSON answers.
# LIGHTNING_STORE_TOKEN, when set, is sent as the bearer token.
# Run it against a server whose queue is empty: it dequeues the head of the
# queue and expects the rollout it just enqueued. Exits non-zero on any
# mismatch, and unless the rollout ends ROLLOUT_STATUS_SUCCEEDED.
set -euo pipefail

ADDR=${1:?usage: $0 HOST:PORT}
GRPCURL=${GRPCURL:-grpcurl}
PYTHON=${PYTHON:-python3}
SVC=lightningstore.v1.LightningStoreService

# A server with tokens needs one on every call but health and reflection.
AUTH=()
if [ -n "${LIGHTNING_STORE_TOKEN:-}" ]; then
  AUTH=(-H "authorization: Bearer $LIGHTNING_STORE_TOKEN")
fi

# Prints the command (the token elided), runs it, and keeps its output in $OUT.
call() {
  local method=$1 body=$2
  echo "\$ grpcurl -plaintext ${AUTH:+-H 'authorization: Bearer …' }-d '$body' $ADDR $method"
  OUT=$("$GRPCURL" -plaintext "${AUTH[@]}" -d "$body" "$ADDR" "$method")
  echo "$OUT"
}

# Reads a dotted path (camelCase, as grpcurl prints) from the JSON in $OUT.
get() {
  "$PYTHON" -c '
import json, sys
value = json.loads(sys.argv[2])
for key in sys.argv[1].split("."):
    value = value[int(key)] if isinstance(value, list) else value[key]
print(value)' "$1" "$OUT"
}

# Fails unless the value at a path equals the expected text.
expect() {
  local path=$1 want=$2 got
  got=$(get "$path")
  if [ "$got" != "$want" ]; then
    echo "FAIL: $path is '$got', expected '$want'" >&2
    exit 1
  fi
}

echo "\$ grpcurl -plaintext $ADDR list"
services=$("$GRPCURL" -plaintext "$ADDR" list)
echo "$services"
for want in "$SVC" grpc.health.v1.Health; do
  if ! grep -qx "$want" <<<"$services"; then
    echo "FAIL: '$want' is not listed" >&2
    exit 1
  fi
done

call grpc.health.v1.Health/Check '{"service":"lightningstore.v1.LightningStoreService"}'
expect status SERVING

call "$SVC/EnqueueRollout" '{"rollout":{"input_json":"{\"task\":\"add\"}"}}'
expect rollout.status ROLLOUT_STATUS_QUEUING
ROLLOUT_ID=$(get rollout.rolloutId)

call "$SVC/DequeueRollout" '{"worker_id":"Worker-0"}'
expect rollout.rolloutId "$ROLLOUT_ID"
expect rollout.attempt.workerId Worker-0
ATTEMPT_ID=$(get rollout.attempt.attemptId)

# int64 values are JSON strings in proto3 JSON: 2^53 + 1 survives exactly.
call "$SVC/AddSpan" '{"span":{"rollout_id":"'"$ROLLOUT_ID"'","attempt_id":"'"$ATTEMPT_ID"'","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7","name":"openai.chat.completion","attributes":[{"key":"gen_ai.usage.total_tokens","value":{"int_value":"9007199254740993"}}]}}'
expect span.sequenceId 1
expect span.attributes.0.value.intValue 9007199254740993

# A batch: AddSpans stores both in one transaction and answers with their
# sequence ids in order (ids_only: the ids alone).
SPAN='"rollout_id":"'"$ROLLOUT_ID"'","attempt_id":"'"$ATTEMPT_ID"'","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"'
call "$SVC/AddSpans" '{"spans":[{'"$SPAN"',"span_id":"00f067aa0ba902b8","name":"tool.call"},{'"$SPAN"',"span_id":"00f067aa0ba902b9","parent_id":"00f067aa0ba902b8","name":"reward"}],"ids_only":true}'
expect sequenceIds.0 2
expect sequenceIds.1 3

# The completion stream, opened before the attempt finishes: it sends the
# rollout the moment it is terminal and then ends (one watched rollout).
echo "\$ grpcurl -plaintext ${AUTH:+-H 'authorization: Bearer …' }-d '{\"rollout_ids\":[\"$ROLLOUT_ID\"],\"timeout\":\"60s\"}' $ADDR $SVC/WatchRolloutCompletions &"
COMPLETIONS=$(mktemp)
trap 'rm -f "$COMPLETIONS"' EXIT
"$GRPCURL" -plaintext "${AUTH[@]}" -d '{"rollout_ids":["'"$ROLLOUT_ID"'"],"timeout":"60s"}' \
  "$ADDR" "$SVC/WatchRolloutCompletions" >"$COMPLETIONS" &
WATCH=$!

# Proto3 JSON writes a FieldMask as a comma-separated string ("status"), but
# grpcurl 1.8.6 parses it as a plain message and rejects the string
# (fullstorydev/grpcurl#393): give it the object form {"paths":[...]}.
call "$SVC/UpdateAttempt" '{"rollout_id":"'"$ROLLOUT_ID"'","attempt_id":"'"$ATTEMPT_ID"'","update_mask":{"paths":["status"]},"status":"ATTEMPT_STATUS_SUCCEEDED"}'
expect attempt.status ATTEMPT_STATUS_SUCCEEDED

wait "$WATCH" # the stream ends once its one rollout is terminal
OUT=$(cat "$COMPLETIONS")
echo "$OUT"
expect rollout.rolloutId "$ROLLOUT_ID"
expect rollout.status ROLLOUT_STATUS_SUCCEEDED

call "$SVC/GetRollout" '{"rollout_id":"'"$ROLLOUT_ID"'"}'
expect rollout.status ROLLOUT_STATUS_SUCCEEDED
expect rollout.attempt.workerId Worker-0
expect rollout.attempt.sequenceId 1

# A query answers one page: its list is named by what it holds (`spans`),
# with the window applied (limit, offset: int64, JSON strings) and the total.
call "$SVC/QuerySpans" '{"rollout_id":"'"$ROLLOUT_ID"'","page":{"limit":10}}'
expect spans.0.name openai.chat.completion
expect spans.2.name reward
expect limit 10
expect total 3

echo "grpcurl example: rollout $ROLLOUT_ID succeeded"
