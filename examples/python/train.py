#!/usr/bin/env python3
"""agent-lightning trains a trivial agent with lightning-store as its store, over gRPC.

The agent adds two numbers plus a `bias` it reads from its resources (a
prompt template standing in for a model); its reward is 1 when the answer is
right. The algorithm runs two epochs: it enqueues the dataset, waits for the
rollouts on the server's completion stream, reads the rewards back from the
spans, "trains" (sets the bias to what the rewards tell), and publishes the new
resources. Three runner processes (agent-lightning's own LitAgentRunner and
OtelTracer, forked by its ClientServerExecutionStrategy) claim the rollouts,
record spans (exported over OTLP/HTTP to the server's port) and report
results. No LLM is involved.

Usage: python train.py [ADDRESS]   (default $LIGHTNING_STORE_SERVER, then 127.0.0.1:4747)
Use a fresh server. Exit status 0 when every check passed; the last line is `N passed, M failed`.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # agent-lightning imports litellm: stay offline

from agentlightning import LitAgent, LitAgentRunner, OtelTracer, Trainer
from agentlightning.algorithm import Algorithm
from agentlightning.emitter import emit_message
from agentlightning.execution import ClientServerExecutionStrategy
from agentlightning.store.base import LightningStore as UpstreamStore
from agentlightning.types import EnqueueRolloutRequest, NamedResources, PromptTemplate, Rollout

from lightning_store.agentlightning import LightningStore

RUNNERS = 3
DATASET = [{"a": a, "b": b} for a in range(4) for b in range(3)]  # 12 tasks


def resources(bias: int) -> NamedResources:
    """The agent's "model": a template whose variable is the bias it adds."""
    return {"policy": PromptTemplate(template=str(bias), engine="f-string")}


class Adder(LitAgent[dict[str, int]]):
    """Answers a + b + bias; rewarded 1.0 for the right sum, less the further it is off."""

    def rollout(self, task: dict[str, int], resources: NamedResources, rollout: Rollout) -> float:
        policy = resources["policy"]
        assert isinstance(policy, PromptTemplate)
        answer = task["a"] + task["b"] + int(policy.template)
        error = abs(answer - (task["a"] + task["b"]))
        emit_message(f"{task['a']} + {task['b']} = {answer}")  # a span, through agent-lightning's tracer
        return 1.0 / (1 + error)  # the runner stores it as the rollout's reward span


class BiasSearch(Algorithm):
    """Two epochs: measure the reward, then correct the bias and measure again."""

    def __init__(self) -> None:
        super().__init__()
        self.mean_rewards: list[float] = []

    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        store = self.get_store()
        bias = 3
        for _ in range(2):
            published = await store.update_resources("policy", resources(bias))
            queued = await store.enqueue_many_rollouts(
                [
                    EnqueueRolloutRequest(input=task, mode="train", resources_id=published.resources_id)
                    for task in train_dataset
                ]
            )
            ids = [rollout.rollout_id for rollout in queued]
            finished = await store.wait_for_rollouts(rollout_ids=ids, timeout=120)
            assert len(finished) == len(ids), f"only {len(finished)} of {len(ids)} rollouts finished"
            rewards = [await final_reward(store, rollout_id) for rollout_id in ids]
            self.mean_rewards.append(sum(rewards) / len(rewards))
            bias = 0  # what a reward of 1 / (1 + error) says the error was


async def final_reward(store: UpstreamStore, rollout_id: str) -> float:
    """Returns the reward of a rollout's latest attempt, as the runner recorded it."""
    spans = await store.query_spans(rollout_id, "latest", name="agentlightning.annotation")
    values = [s.attributes.get("agentlightning.reward.0.value") for s in spans]
    rewards = [float(v) for v in values if isinstance(v, (int, float))]
    assert rewards, f"rollout {rollout_id} has no reward span"
    return rewards[-1]


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
    # The runners call dequeue_rollout every poll_interval; a server-side wait makes them start at once.
    # otlp_traces=True: the tracer exports spans over OTLP/HTTP (the default sends them over gRPC).
    store = LightningStore(address, dequeue_wait=1.0, otlp_traces=True)
    # The tracer exports spans over OTLP/HTTP to the server's /v1/traces; OpenTelemetry SDKs 1.4x
    # build the exporter's endpoint from this variable (the runners inherit it) and ignore the
    # endpoint agent-lightning 0.3.0 sets later.
    os.environ.setdefault("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", store.otlp_traces_endpoint())
    algorithm = BiasSearch()
    trainer = Trainer(
        store=store,
        algorithm=algorithm,
        runner=LitAgentRunner(OtelTracer(), poll_interval=0.1),  # type: ignore[no-untyped-call]
        # managed_store=False: runners use this store directly instead of an HTTP server in the trainer
        strategy=ClientServerExecutionStrategy(role="both", n_runners=RUNNERS, managed_store=False),
    )
    trainer.fit(Adder(), train_dataset=DATASET)

    checks = Checks()
    checks.that("the algorithm ran two epochs", len(algorithm.mean_rewards) == 2, algorithm.mean_rewards)
    if len(algorithm.mean_rewards) == 2:
        before, after = algorithm.mean_rewards
        checks.that("training improved the mean reward to 1.0", before == 0.25 and after == 1.0, (before, after))
    asyncio.run(check_store(store, checks))
    print(f"{checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed else 0


async def check_store(store: LightningStore, checks: Checks) -> None:
    rollouts = await store.query_rollouts()
    checks.that("every rollout was stored", rollouts.total == 2 * len(DATASET), rollouts.total)
    checks.that("every rollout succeeded", {r.status for r in rollouts} == {"succeeded"}, {r.status for r in rollouts})
    workers = {r.attempt.worker_id for r in rollouts if hasattr(r, "attempt")}  # AttemptedRollout carries its attempt
    checks.that(f"the {RUNNERS} runners all worked", len(workers) == RUNNERS, workers)
    first = rollouts[0]
    spans = await store.query_spans(first.rollout_id)
    names = [s.name for s in spans]
    checks.that(
        "spans came through the tracer and the runner",
        {"agentlightning.message", "agentlightning.annotation"} <= set(names),
        names,
    )
    checks.that(
        "spans are ordered by sequence id", [s.sequence_id for s in spans] == sorted(s.sequence_id for s in spans)
    )
    stats = await store.statistics()
    checks.that("statistics count every span", stats["total_spans"] >= 2 * len(rollouts), stats)
    await store.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
