#!/usr/bin/env python3
"""A plain runner (no agent-lightning) on a worker session, exporting spans with OpenTelemetry's OTLP/gRPC exporter.

The runner opens a session with two slots: the server pushes each queued
rollout into a free slot, no polling. For each assignment it records spans
with the OpenTelemetry SDK, routed to the attempt by agent-lightning's span
attributes and exported over OTLP/gRPC to the store's own port, then reports
the attempt and releases the slot. One rollout is cancelled while the runner
works on it: the server revokes the attempt, and the runner stops.

The algorithm's side runs in the main thread: it enqueues the rollouts,
follows the store's event stream and reads the results back.

Usage: python session_runner.py [ADDRESS]   (default $LIGHTNING_STORE_SERVER, then 127.0.0.1:4747)
With $LIGHTNING_STORE_NAMESPACE set, everything happens in that namespace, the spans included.
Exit status 0 when every check passed; the last line is `N passed, M failed`.
"""

from __future__ import annotations

import os
import sys
import threading

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer

from lightning_store import Assignment, AttemptRevoked, Client, WorkerSession, from_json
from lightning_store.values import ROLLOUT_STATUS, WORKER_STATUS

WORKER_ID = "Worker-session-example"
TASKS = [{"a": a, "b": 10 * a} for a in range(5)]
WAIT = 30.0  # bound of every wait for the server


def work(assignment: Assignment, tracer: Tracer, provider: TracerProvider, client: Client) -> None:
    """Runs one assignment: spans over OTLP, then the attempt's result."""
    task = from_json(assignment.rollout.input_json)
    routing = {"agentlightning.rollout_id": assignment.rollout_id, "agentlightning.attempt_id": assignment.attempt_id}
    with tracer.start_as_current_span("agent.rollout", attributes=routing) as root:
        with tracer.start_as_current_span("tool.add", attributes=routing) as step:
            step.set_attribute("tool.input", [task.get("a", 0), task.get("b", 0)])
        if task.get("wait_for_cancel"):
            provider.force_flush()  # the spans reach the store: the algorithm sees the rollout running
            revoked.wait(WAIT)
            assignment.check()  # raises AttemptRevoked: the rollout was cancelled meanwhile
        root.set_attribute("agentlightning.reward.0.value", 1.0)
    provider.force_flush()  # every span is stored before the attempt is reported
    # The owner epoch fences the write: refused (FailedPrecondition) if the attempt has another owner now.
    client.update_attempt(
        assignment.rollout_id, assignment.attempt_id, status="succeeded", owner_epoch=assignment.owner_epoch
    )


revoked = threading.Event()


def run_runner(session: WorkerSession, client: Client, address: str, expected: int, outcomes: list[str]) -> None:
    """The runner: takes assignments until it handled `expected` of them."""
    provider = TracerProvider(resource=Resource.create({"service.name": "session-runner"}))
    # In a namespace (LIGHTNING_STORE_NAMESPACE, which the client reads too), the spans carry its metadata.
    namespace = client.options.namespace
    headers = {"lightning-store-namespace": namespace} if namespace is not None else None
    exporter = OTLPSpanExporter(endpoint=address, insecure=True, headers=headers)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracer = provider.get_tracer("session_runner")
    while len(outcomes) < expected:
        assignment = session.next_assignment(WAIT)
        if assignment is None:
            break
        with assignment:  # the slot is released when the work ends, however it ends
            try:
                work(assignment, tracer, provider, client)
                outcomes.append("succeeded")
            except AttemptRevoked as stop:
                outcomes.append(f"revoked: {stop.reason}")
    provider.shutdown()


class Checks:
    """Counts checks; prints each."""

    def __init__(self) -> None:
        self.passed = self.failed = 0

    def that(self, name: str, condition: bool, detail: object = "") -> None:
        if condition:
            self.passed += 1
            print(f"ok   {name}")
        else:
            self.failed += 1
            print(f"FAIL {name}: {detail}")


def main(argv: list[str]) -> int:
    address = argv[1] if len(argv) > 1 else os.environ.get("LIGHTNING_STORE_SERVER", "127.0.0.1:4747")
    checks = Checks()
    with Client(address) as client:
        session = client.worker_session(WORKER_ID, slots=2, heartbeat_interval=1.0, on_revoked=lambda _: revoked.set())
        outcomes: list[str] = []
        runner = threading.Thread(target=run_runner, args=(session, client, address, len(TASKS) + 1, outcomes))
        runner.start()

        # The algorithm: a rollout to cancel once it runs, then the tasks. The subscription is
        # confirmed before the enqueue, so the rollout's first spans cannot slip past it.
        with client.events(kinds=["spans_added"]) as spans_added:
            to_cancel = client.enqueue_rollout({"wait_for_cancel": True})
            next(event for event in spans_added if event.rollout_id == to_cancel.rollout_id)
        client.update_rollout(to_cancel.rollout_id, status="cancelled")
        ids = [client.enqueue_rollout(task, mode="train").rollout_id for task in TASKS]
        finished = list(client.watch_completions(ids, timeout=WAIT))
        runner.join(WAIT)
        session.close()

        checks.that("every task finished", sorted(r.rollout_id for r in finished) == sorted(ids), finished)
        checks.that(
            "every task succeeded", {ROLLOUT_STATUS.name(r.status) for r in finished} == {"succeeded"}, finished
        )
        checks.that("the cancelled rollout was revoked", outcomes.count("revoked: cancelled") == 1, outcomes)
        cancelled = client.get_rollout(to_cancel.rollout_id)
        checks.that("and stays cancelled", ROLLOUT_STATUS.name(cancelled.status) == "cancelled", cancelled)
        for rollout_id in ids:
            spans = client.query_spans(rollout_id, "latest")
            names = sorted(s.name for s in spans)
            if names != ["agent.rollout", "tool.add"]:
                checks.that(f"spans of {rollout_id} came over OTLP", False, names)
                break
        else:
            checks.that("every rollout's spans came over OTLP/gRPC", True)
        assigned = {r.attempt.worker_id for r in finished}
        checks.that("the session's worker ran them all", assigned == {WORKER_ID}, assigned)
        worker = client.get_worker(WORKER_ID)
        checks.that(
            "the worker is idle once its session closed cleanly", WORKER_STATUS.name(worker.status) == "idle", worker
        )
    print(f"{checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
