"""agent-lightning's own runner loop (`LitAgentRunner` with its `OtelTracer`)
against lightning-store: a trivial agent with a reward function and no LLM.
Its spans reach the store both ways runners send them: OTLP/HTTP from the
tracer (one export per ended span) and `add_span` for the returned reward.

With the OpenTelemetry SDK this environment pins (1.45), the OTLP/HTTP
exporter keeps the endpoint it was built with, so agent-lightning 0.3.0's
switch to `store.otlp_traces_endpoint()` has no effect (against `agl store`
too); the standard `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` points it at the
store instead, as docs/agent-lightning-0x.md tells users to do.
"""

from __future__ import annotations

import os
from typing import Any

from agentlightning.emitter.message import emit_message
from agentlightning.emitter.reward import find_final_reward
from agentlightning.litagent import LitAgent
from agentlightning.runner.agent import LitAgentRunner
from agentlightning.store.client_server import LightningStoreClient
from agentlightning.tracer.otel import OtelTracer
from agentlightning.types import LLM, NamedResources, Rollout

from helpers import drain, drive

TASKS = [
    {"a": a, "b": b, "expected": a + b + (1 if a % 3 == 0 else 0)}
    for a, b in zip(range(6), range(10, 16), strict=True)
]


class Adder(LitAgent[dict[str, int]]):
    """Adds two numbers; the reward says whether the sum is the expected one."""

    def rollout(self, task: dict[str, int], resources: NamedResources, rollout: Rollout) -> float:
        assert "main" in resources
        emit_message(f"adding {task['a']} and {task['b']}")
        return 1.0 if task["a"] + task["b"] == task["expected"] else 0.0


def test_runner_loop_completes_every_rollout(store_url: str) -> None:
    async def scenario(client: LightningStoreClient) -> dict[str, Any]:
        await drain(client)
        before = await client.statistics()
        await client.add_resources({"main": LLM(endpoint="http://unused/v1", model="none")})
        queued = [await client.enqueue_rollout(input=task, mode="train") for task in TASKS]

        os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = client.otlp_traces_endpoint()
        runner: LitAgentRunner[dict[str, int]] = LitAgentRunner(
            tracer=OtelTracer(), max_rollouts=len(TASKS), poll_interval=0.05, interval_jitter=0.0
        )
        runner.init(Adder())
        runner.init_worker(0, client)
        try:
            await runner.iter()
        finally:
            runner.teardown_worker(0)
            runner.teardown()

        results: dict[str, Any] = {"before": before, "after": await client.statistics(), "rollouts": []}
        for rollout, task in zip(queued, TASKS, strict=True):
            read = await client.get_rollout_by_id(rollout.rollout_id)
            spans = await client.query_spans(rollout.rollout_id, "latest")
            results["rollouts"].append((task, read, list(spans)))
        results["worker"] = await client.get_worker_by_id("Worker-0")
        return results

    results = drive(store_url, scenario)
    for task, rollout, spans in results["rollouts"]:
        assert rollout is not None and rollout.status == "succeeded", rollout
        assert rollout.attempt.worker_id == "Worker-0"
        names = [span.name for span in spans]
        # The tracer's span came over OTLP/HTTP, the reward through add_span.
        assert "agentlightning.message" in names, names
        message = next(span for span in spans if span.name == "agentlightning.message")
        assert message.attributes["agentlightning.message.body"] == f"adding {task['a']} and {task['b']}"
        assert message.resource.attributes["agentlightning.rollout_id"] == rollout.rollout_id
        expected = 1.0 if task["a"] + task["b"] == task["expected"] else 0.0
        assert find_final_reward(spans) == expected
        assert [span.sequence_id for span in spans] == sorted(span.sequence_id for span in spans)
    before, after = results["before"], results["after"]
    assert after["total_rollouts"] - before["total_rollouts"] == len(TASKS)
    assert after["total_attempts"] - before["total_attempts"] == len(TASKS)
    assert after["total_spans"] - before["total_spans"] == sum(len(s) for _, _, s in results["rollouts"])
    worker = results["worker"]
    assert worker is not None and worker.status == "idle"
