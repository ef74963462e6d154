#!/usr/bin/env python3
"""A Python client of lightning-store on the bare generated stubs.

It uses the protobuf messages and gRPC stubs generated from proto/ that the
`lightning-store` package ships (`lightning_store.proto`, checked against
proto/ by CI) directly, without the package's client, to show the wire
contract as any generated client sees it.

It plays both sides of agent-lightning's loop against a running server:
the algorithm (resources, enqueue, wait, read back) and the runner
(dequeue, spans, complete the attempt), and checks every answer.

Usage: python runner.py [ADDRESS]
ADDRESS defaults to $LIGHTNING_STORE_SERVER, then 127.0.0.1:4747.
$LIGHTNING_STORE_TOKEN, when set, is sent as a bearer token on every call;
$LIGHTNING_STORE_CA_CERT, when set, makes the connection TLS, checked
against that CA certificate (PEM).
The server should be fresh (an empty queue): the runner dequeues the head
of the queue and expects to get the rollout it just enqueued.

Exit status 0 when every check passed, 1 otherwise. The last line printed
is `N passed, M failed`.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

DEFAULT_ADDRESS = "127.0.0.1:4747"
WORKER_ID = "Worker-0"
RPC_TIMEOUT = 10.0  # seconds, the deadline of every call

# 2^53 + 1 cannot be represented as a double: it only survives the round trip
# when every hop keeps it as a 64-bit integer.
BIG_INT = 2**53 + 1


class CheckFailed(AssertionError):
    """A server answer did not match what the contract promises."""


class Checks:
    """Counts checks; the first mismatch raises."""

    def __init__(self) -> None:
        self.passed = 0

    def that(self, name: str, condition: bool, detail: object = "") -> None:
        if not condition:
            raise CheckFailed(f"{name}: {detail}" if detail != "" else name)
        self.passed += 1
        print(f"ok   {name}")

    def equal(self, name: str, got: object, want: object) -> None:
        self.that(name, got == want, f"got {got!r}, want {want!r}")


def open_channel(grpc: Any, address: str) -> Any:
    """Opens a channel with the token and TLS settings of the environment.

    gRPC sends call credentials (the bearer token) only over a protected
    channel: TLS when a CA is given, else loopback through local credentials.
    """
    token = os.environ.get("LIGHTNING_STORE_TOKEN")
    ca_file = os.environ.get("LIGHTNING_STORE_CA_CERT")
    if ca_file:
        with open(ca_file, "rb") as f:
            channel_credentials = grpc.ssl_channel_credentials(f.read())
    elif token:
        channel_credentials = grpc.local_channel_credentials(grpc.LocalConnectionType.LOCAL_TCP)
    else:
        return grpc.insecure_channel(address)
    if token:
        channel_credentials = grpc.composite_channel_credentials(
            channel_credentials, grpc.access_token_call_credentials(token)
        )
    return grpc.secure_channel(address, channel_credentials)


def run(address: str, checks: Checks) -> None:
    import grpc
    from google.protobuf import duration_pb2, field_mask_pb2
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from lightning_store.proto import store_pb2 as pb
    from lightning_store.proto import store_pb2_grpc
    from lightning_store.proto import types_pb2 as types

    print(f"server: {address}")
    channel = open_channel(grpc, address)
    grpc.channel_ready_future(channel).result(timeout=RPC_TIMEOUT)
    store = store_pb2_grpc.LightningStoreServiceStub(channel)
    health = health_pb2_grpc.HealthStub(channel)
    t = RPC_TIMEOUT

    # --- health -----------------------------------------------------------
    for service in ("", "lightningstore.v1.LightningStoreService"):
        resp = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=t)
        checks.equal(
            f"health {service or '(server)'} is SERVING",
            health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status),
            "SERVING",
        )

    # --- algorithm: resources and a rollout ---------------------------------
    resources = {
        "main_llm": {
            "resource_type": "llm",
            "endpoint": "http://127.0.0.1:8000/v1",
            "model": "Qwen/Qwen2.5-0.5B-Instruct",
            "sampling_parameters": {"temperature": 0.7},
        }
    }
    res = store.AddResources(
        pb.AddResourcesRequest(resources_json=json.dumps(resources)), timeout=t
    ).resources
    checks.that("AddResources returns an rs- id", res.resources_id.startswith("rs-"), res.resources_id)
    checks.equal("AddResources version", res.version, 1)
    checks.equal("AddResources resources_json", json.loads(res.resources_json), resources)

    task = {"task": "add", "a": 2, "b": 3, "note": "héllo ✓"}
    queued = store.EnqueueRollout(
        pb.EnqueueRolloutRequest(
            rollout=pb.RolloutSpec(input_json=json.dumps(task), mode=types.ROLLOUT_MODE_TRAIN)
        ),
        timeout=t,
    ).rollout
    rollout_id = queued.rollout_id
    print(f"     rollout {rollout_id}")
    checks.that("EnqueueRollout returns an ro- id", rollout_id.startswith("ro-"), rollout_id)
    checks.equal("enqueued status", types.RolloutStatus.Name(queued.status), "ROLLOUT_STATUS_QUEUING")
    checks.equal("enqueued input_json", json.loads(queued.input_json), task)
    checks.equal("enqueued rollout uses the latest resources", queued.resources_id, res.resources_id)
    checks.that("enqueued rollout has no attempt", not queued.HasField("attempt"))

    # --- runner: claim it ----------------------------------------------------
    claimed = store.DequeueRollout(
        pb.DequeueRolloutRequest(worker_id=WORKER_ID, wait=duration_pb2.Duration(seconds=5)),
        timeout=t,
    )
    checks.that("DequeueRollout claimed a rollout", claimed.HasField("rollout"))
    claimed = claimed.rollout
    checks.equal("dequeued the enqueued rollout", claimed.rollout_id, rollout_id)
    checks.equal("dequeued status", types.RolloutStatus.Name(claimed.status), "ROLLOUT_STATUS_PREPARING")
    attempt = claimed.attempt
    attempt_id = attempt.attempt_id
    checks.that("dequeued rollout carries an at- attempt", attempt_id.startswith("at-"), attempt_id)
    checks.equal("attempt worker", attempt.worker_id, WORKER_ID)
    busy = store.GetWorker(pb.GetWorkerRequest(worker_id=WORKER_ID), timeout=t).worker
    checks.equal("worker is BUSY while it holds the attempt", types.WorkerStatus.Name(busy.status), "WORKER_STATUS_BUSY")

    # --- runner: report two spans -------------------------------------------
    def kv(key: str, **value: object) -> types.KeyValue:
        return types.KeyValue(key=key, value=types.AttributeValue(**value))

    attributes = [
        kv("gen_ai.request.model", string_value="Qwen/Qwen2.5-0.5B-Instruct"),
        kv("big_int", int_value=BIG_INT),
        kv("min_int", int_value=-(2**63)),
        kv("temperature", double_value=0.1 + 0.2),
        kv("stream", bool_value=True),
        kv("raw", bytes_value=b"\x00\xff\x80binary\n"),
        kv(
            "tokens",
            array_value=types.ArrayValue(
                values=[
                    types.AttributeValue(int_value=151644),
                    types.AttributeValue(string_value="assistant"),
                    types.AttributeValue(double_value=-1.5e-300),
                    types.AttributeValue(bool_value=False),
                ]
            ),
        ),
        kv(
            "agentlightning.reward",
            kvlist_value=types.KeyValueList(
                values=[
                    kv("value", double_value=1.0),
                    kv("count", int_value=2**62 + 7),
                    kv(
                        "nested",
                        kvlist_value=types.KeyValueList(
                            values=[kv("deep", array_value=types.ArrayValue(values=[types.AttributeValue(string_value="x")]))]
                        ),
                    ),
                ]
            ),
        ),
        kv("empty", string_value=""),
    ]
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    root_id = "00f067aa0ba902b7"
    child_id = "53995c3f42cd8ad8"
    now_ns = time.time_ns()

    def ts(ns: int):
        from google.protobuf import timestamp_pb2

        return timestamp_pb2.Timestamp(seconds=ns // 10**9, nanos=ns % 10**9)

    root = types.Span(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        # sequence_id omitted: the server allocates the next one (1)
        trace_id=trace_id,
        span_id=root_id,
        name="agentlightning.rollout",
        status=types.SpanStatus(code=types.SPAN_STATUS_CODE_OK),
        attributes=attributes,
        start_time=ts(now_ns),
        end_time=ts(now_ns + 2_000_000),
        kind=types.SPAN_KIND_INTERNAL,
    )
    child = types.Span(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        # Given explicitly. Within one AddSpans call the server allocates the
        # missing ids first, then explicit ids raise the rollout's counter.
        sequence_id=2,
        trace_id=trace_id,
        span_id=child_id,
        parent_id=root_id,
        name="openai.chat.completion",
        attributes=[kv("gen_ai.usage.output_tokens", int_value=2**60), kv("ok", bool_value=True)],
        start_time=ts(now_ns + 1_000),
        end_time=ts(now_ns + 1_000_000),
        kind=types.SPAN_KIND_CLIENT,
    )
    checks.that("root span is sent without a sequence id", not root.HasField("sequence_id"))
    added = store.AddSpans(pb.AddSpansRequest(spans=[root, child]), timeout=t)
    checks.equal("AddSpans duplicates", added.duplicates, 0)
    checks.equal("AddSpans sequence ids", [s.sequence_id for s in added.spans], [1, 2])

    # --- runner: complete the attempt ----------------------------------------
    done = store.UpdateAttempt(
        pb.UpdateAttemptRequest(
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            update_mask=field_mask_pb2.FieldMask(paths=["status"]),
            status=types.ATTEMPT_STATUS_SUCCEEDED,
        ),
        timeout=t,
    ).attempt
    checks.equal("UpdateAttempt status", types.AttemptStatus.Name(done.status), "ATTEMPT_STATUS_SUCCEEDED")
    checks.that("UpdateAttempt stamps end_time", done.HasField("end_time"))

    # --- algorithm: wait and read back ---------------------------------------
    waited = store.WaitForRollouts(
        pb.WaitForRolloutsRequest(rollout_ids=[rollout_id], timeout=duration_pb2.Duration(seconds=5)),
        timeout=t,
    ).rollouts
    checks.equal("WaitForRollouts returns the rollout", [r.rollout_id for r in waited], [rollout_id])
    checks.equal(
        "WaitForRollouts status", types.RolloutStatus.Name(waited[0].status), "ROLLOUT_STATUS_SUCCEEDED"
    )

    got = store.GetRollout(pb.GetRolloutRequest(rollout_id=rollout_id), timeout=t).rollout
    checks.equal("GetRollout status", types.RolloutStatus.Name(got.status), "ROLLOUT_STATUS_SUCCEEDED")
    checks.that("GetRollout end_time is set", got.HasField("end_time"))
    checks.equal("GetRollout input_json", json.loads(got.input_json), task)
    checks.equal("GetRollout attempt id", got.attempt.attempt_id, attempt_id)
    checks.equal("GetRollout attempt worker", got.attempt.worker_id, WORKER_ID)
    checks.equal(
        "GetRollout attempt status", types.AttemptStatus.Name(got.attempt.status), "ATTEMPT_STATUS_SUCCEEDED"
    )

    page = store.QuerySpans(pb.QuerySpansRequest(rollout_id=rollout_id), timeout=t)
    checks.equal("QuerySpans total", page.total, 2)
    items = list(page.spans)
    checks.equal("spans ordered by sequence id", [s.sequence_id for s in items], [1, 2])
    checks.equal("span ids", [s.span_id for s in items], [root_id, child_id])
    checks.equal("span trace ids", [s.trace_id for s in items], [trace_id, trace_id])
    checks.equal("span attempt ids", [s.attempt_id for s in items], [attempt_id, attempt_id])
    checks.that("root span has no parent", not items[0].HasField("parent_id"))
    checks.equal("child span parent", items[1].parent_id, root_id)
    checks.equal("span names", [s.name for s in items], [root.name, child.name])
    checks.equal("root span status", types.SpanStatusCode.Name(items[0].status.code), "SPAN_STATUS_CODE_OK")
    checks.equal("span kinds", [s.kind for s in items], [root.kind, child.kind])
    checks.equal("span start times", [s.start_time for s in items], [root.start_time, child.start_time])
    checks.equal("span end times", [s.end_time for s in items], [root.end_time, child.end_time])
    by_key = {a.key: a.value for a in items[0].attributes}
    checks.equal("int64 beyond 2^53 round-trips", by_key["big_int"].int_value, BIG_INT)
    checks.equal("int64 minimum round-trips", by_key["min_int"].int_value, -(2**63))
    checks.equal("double round-trips bit for bit", by_key["temperature"].double_value.hex(), (0.1 + 0.2).hex())
    checks.equal("bytes round-trip", by_key["raw"].bytes_value, b"\x00\xff\x80binary\n")
    checks.equal(
        "attribute value kinds",
        [a.value.WhichOneof("value") for a in items[0].attributes],
        [a.value.WhichOneof("value") for a in attributes],
    )
    checks.equal("root span attributes round-trip exactly", list(items[0].attributes), attributes)
    checks.equal("child span attributes round-trip exactly", list(items[1].attributes), list(child.attributes))

    # --- worker and errors ----------------------------------------------------
    worker = store.GetWorker(pb.GetWorkerRequest(worker_id=WORKER_ID), timeout=t).worker
    checks.equal("worker is IDLE after the attempt", types.WorkerStatus.Name(worker.status), "WORKER_STATUS_IDLE")
    checks.that("idle worker holds no rollout", not worker.HasField("current_rollout_id"), worker.current_rollout_id)

    unknown = "ro-000000000000"
    try:
        store.GetRollout(pb.GetRolloutRequest(rollout_id=unknown), timeout=t)
    except grpc.RpcError as err:
        checks.equal("unknown rollout gives NOT_FOUND", err.code(), grpc.StatusCode.NOT_FOUND)
        checks.that("NOT_FOUND names the rollout", unknown in (err.details() or ""), err.details())
    else:
        checks.that("unknown rollout gives NOT_FOUND", False, "the call succeeded")

    channel.close()


def main(argv: list[str]) -> int:
    address = argv[1] if len(argv) > 1 else os.environ.get("LIGHTNING_STORE_SERVER") or DEFAULT_ADDRESS
    checks = Checks()
    failed = 0
    try:
        run(address, checks)
    except CheckFailed as err:
        failed = 1
        print(f"FAIL {err}")
    except Exception as err:  # an RPC error or a broken setup is a failure too
        failed = 1
        sys.stdout.flush()
        traceback.print_exc()
        sys.stderr.flush()
        print(f"FAIL {type(err).__name__}: {err}")
    print(f"{checks.passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
