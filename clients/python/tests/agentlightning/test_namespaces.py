"""agent-lightning's store interface in a namespace: `LightningStore(address, namespace=...)`, its OTLP/HTTP
endpoint under `/ns/{namespace}`, and agent-lightning's own runner loop working there alone."""

from __future__ import annotations

import pickle

import pytest
from agentlightning.emitter.message import emit_message
from agentlightning.litagent import LitAgent
from agentlightning.runner.agent import LitAgentRunner
from agentlightning.tracer.otel import OtelTracer
from agentlightning.types import LLM, NamedResources, Rollout

from lightning_store import Client
from lightning_store.agentlightning import LightningStore
from lightning_store.local_server import LocalServer


class Echo(LitAgent[str]):
    """Emits a message span with its task."""

    def rollout(self, task: str, resources: NamedResources, rollout: Rollout) -> float:
        emit_message(f"working on {task}")
        return 1.0


@pytest.mark.parametrize("backend", ["memory"])
async def test_a_runner_in_one_namespace_works_and_traces_there_alone(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Client(server.address) as admin:
        admin.create_namespace("run-a")
        admin.create_namespace("run-b")
    store = LightningStore(server.address, namespace="run-a", otlp_traces=True)
    other = LightningStore(server.address, namespace="run-b")
    default = LightningStore(server.address)
    endpoint = store.otlp_traces_endpoint()
    assert endpoint == f"http://{server.address}/ns/run-a/v1/traces"
    assert pickle.loads(pickle.dumps(store)).options.namespace == "run-a"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)  # see test_tracer.py

    await store.add_resources({"main": LLM(endpoint="http://127.0.0.1:1/v1", model="none")})
    queued = [await store.enqueue_rollout(input=f"task {i}") for i in range(2)]
    await other.enqueue_rollout(input="run-b's own")
    tracer = OtelTracer()  # type: ignore[no-untyped-call]
    runner: LitAgentRunner[str] = LitAgentRunner(
        tracer=tracer, max_rollouts=len(queued), poll_interval=0.05, interval_jitter=0.0
    )
    runner.init(Echo())
    runner.init_worker(0, store)
    try:
        await runner.iter()
    finally:
        runner.teardown_worker(0)
        runner.teardown()

    for i, rollout in enumerate(queued):
        read = await store.get_rollout_by_id(rollout.rollout_id)
        assert read is not None
        assert read.status == "succeeded", read
        spans = await store.query_spans(rollout.rollout_id, "latest")
        bodies = [s.attributes.get("agentlightning.message.body") for s in spans]
        assert f"working on task {i}" in bodies  # exported over OTLP/HTTP to /ns/run-a/v1/traces
        assert await other.get_rollout_by_id(rollout.rollout_id) is None
    (left,) = await other.query_rollouts()
    assert (left.input, left.status) == ("run-b's own", "queuing")  # the runner never took it
    assert list(await default.query_rollouts()) == []
    assert await default.get_latest_resources() is None
    for each in (store, other, default):
        await each.close()
