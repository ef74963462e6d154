"""agent-lightning's own runner loop and `OtelTracer` on this `LightningStore` with
`otlp_traces=True`: the tracer sees `otlp_traces` in the capabilities and exports its spans over OTLP/HTTP to
`store.otlp_traces_endpoint()`, the server's `/v1/traces` on its one port.

With the OpenTelemetry SDK the `agl0` environment pins (1.45), the OTLP/HTTP
exporter keeps the endpoint it was built with, so agent-lightning 0.3.0's switch
to `store.otlp_traces_endpoint()` does not reach the wire (against `agl store`
too); `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` set to that endpoint does, as the
docs/agent-lightning-0x.md tells users.
"""

from __future__ import annotations

import pytest
from agentlightning.emitter.message import emit_message
from agentlightning.emitter.reward import find_final_reward
from agentlightning.litagent import LitAgent
from agentlightning.runner.agent import LitAgentRunner
from agentlightning.tracer.otel import OtelTracer
from agentlightning.types import LLM, NamedResources, Rollout
from agentlightning.utils.otlp import LightningStoreOTLPExporter

from lightning_store.agentlightning import LightningStore

TASKS = [{"a": a, "b": 10 + a} for a in range(4)]


class Adder(LitAgent[dict[str, int]]):
    """Emits a message span and rewards an even sum."""

    def rollout(self, task: dict[str, int], resources: NamedResources, rollout: Rollout) -> float:
        emit_message(f"adding {task['a']} and {task['b']}")
        return 1.0 if (task["a"] + task["b"]) % 2 == 0 else 0.0


async def test_the_tracer_exports_over_otlp_http_to_the_servers_port(
    store: LightningStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not store.capabilities["otlp_traces"]  # off unless asked for: spans go over gRPC
    store = LightningStore(store.options, otlp_traces=True)
    assert store.capabilities["otlp_traces"]
    endpoint = store.otlp_traces_endpoint()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
    await store.add_resources({"main": LLM(endpoint="http://127.0.0.1:1/v1", model="none")})  # the runner needs some
    queued = [await store.enqueue_rollout(input=task) for task in TASKS]
    tracer = OtelTracer()  # type: ignore[no-untyped-call]
    runner: LitAgentRunner[dict[str, int]] = LitAgentRunner(
        tracer=tracer, max_rollouts=len(TASKS), poll_interval=0.05, interval_jitter=0.0
    )
    runner.init(Adder())
    runner.init_worker(0, store)
    try:
        await runner.iter()
        processors = tracer._get_tracer_provider()._active_span_processor._span_processors
        exporters = [
            exporter
            for exporter in (getattr(processor, "span_exporter", None) for processor in processors)
            if isinstance(exporter, LightningStoreOTLPExporter)
        ]
    finally:
        runner.teardown_worker(0)
        runner.teardown()
    # agent-lightning asked this store for its endpoint and pointed its exporter there
    assert [exporter._endpoint for exporter in exporters] == [endpoint]

    for rollout, task in zip(queued, TASKS, strict=True):
        read = await store.get_rollout_by_id(rollout.rollout_id)
        assert read is not None
        assert read.status == "succeeded", read
        spans = list(await store.query_spans(rollout.rollout_id, "latest"))
        message = next(span for span in spans if span.name == "agentlightning.message")
        assert message.attributes["agentlightning.message.body"] == f"adding {task['a']} and {task['b']}"
        assert message.resource.attributes["agentlightning.rollout_id"] == rollout.rollout_id
        # It came over OTLP: the SDK span's Python-only fields (sampler, limits...) that
        # `add_otel_span` keeps as extra fields do not travel in OTLP, only its kind does.
        assert set(message.model_extra or {}) == {"kind"}
        assert find_final_reward(spans) == (1.0 if (task["a"] + task["b"]) % 2 == 0 else 0.0)
