"""What agent-lightning 0.3.0's own store tests found (`clients/python/upstream/run_suite.py`), kept in CI.

Each case is one cause of a failure of those tests against this package, fixed:
spans built with `unittest.mock.Mock` (upstream ignores the instrumentation
scope), sequence ids for any attempt id (upstream never looks the pair up),
the statistics' `name` (the class name), the error upstream logs for a
duplicate span, and agent-lightning's own HTTP server wrapping this store.
"""

from __future__ import annotations

import logging
import time
from itertools import count
from types import SimpleNamespace
from typing import Any
from unittest.mock import Mock

import pytest
from agentlightning.store.client_server import LightningStoreClient, LightningStoreServer
from agentlightning.utils.server_launcher import PythonServerLauncherArgs
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from lightning_store import Client
from lightning_store.agentlightning import LightningStore
from lightning_store.local_server import LocalServer
from tests.agentlightning.conftest import Spans


def mock_readable_span() -> Any:
    """Returns a span double as agent-lightning's own tests build it: a `Mock`, each context new."""
    span = Mock()
    span.name = "test_span"
    span_ids = count(1)

    def new_context() -> Mock:
        context = Mock()
        context.trace_id = 111111
        context.span_id = 222222 + next(span_ids)
        context.is_remote = False
        context.trace_state = {}
        return context

    span.get_span_context = Mock(side_effect=new_context)
    span.parent = None
    status_code = Mock()
    status_code.name = "OK"
    span.status = Mock(status_code=status_code, description=None)
    span.attributes = {"test": "value"}
    span.events = []
    span.links = []
    span.start_time = time.time_ns()
    span.end_time = time.time_ns() + 1_000_000
    span.resource = Mock(attributes={}, schema_url="")
    return span


async def test_a_mock_span_is_stored_and_drives_the_attempt(store: LightningStore, server: LocalServer) -> None:
    # Its instrumentation scope is a Mock too: upstream never reads it, so it must not refuse the span.
    queued = await store.enqueue_rollout(input="x")
    claimed = await store.dequeue_rollout()
    assert claimed is not None
    stored = await store.add_otel_span(queued.rollout_id, claimed.attempt.attempt_id, mock_readable_span())
    assert stored is not None
    assert (stored.sequence_id, stored.name, stored.attributes, stored.status.status_code) == (
        1,
        "test_span",
        {"test": "value"},
        "OK",
    )
    [read] = await store.query_spans(queued.rollout_id)
    assert read.model_dump() == stored.model_dump()  # the Mock's own fields, as upstream keeps them, included
    assert (await store.get_latest_attempt(queued.rollout_id)).status == "running"  # type: ignore[union-attr]
    assert (await store.get_rollout_by_id(queued.rollout_id)).status == "running"  # type: ignore[union-attr]
    with Client(server.address) as client:
        [message] = client.query_spans(queued.rollout_id).items
        assert not message.HasField("scope")


async def test_a_scope_is_kept_as_far_as_it_is_one(store: LightningStore, server: LocalServer, spans: Spans) -> None:
    rollout = await store.start_rollout(input="x")
    rid, aid = rollout.rollout_id, rollout.attempt.attempt_id
    await store.add_otel_span(rid, aid, spans.make())  # the SDK's scope: kept whole
    odd_scope = SimpleNamespace(name="lib", version=3, attributes={"kept": 1, "dropped": object(), 7: "no text key"})
    context = SpanContext(trace_id=1, span_id=2, is_remote=False, trace_flags=TraceFlags(1))
    odd = ReadableSpan(name="odd", context=context, instrumentation_scope=odd_scope)  # type: ignore[arg-type]
    assert await store.add_otel_span(rid, aid, odd) is not None
    with Client(server.address) as client:
        real, kept = (span.scope for span in client.query_spans(rid).items)
    assert (real.name, real.version) == ("agentlightning.test", "0.3.0")
    assert (kept.name, kept.version, [kv.key for kv in kept.attributes]) == ("lib", "", ["kept"])


async def test_sequence_ids_never_look_the_pair_up(store: LightningStore) -> None:
    # The counter belongs to the rollout id: `latest`, an unknown attempt and an unknown rollout get values.
    rollout = await store.start_rollout(input="x")
    rid, aid = rollout.rollout_id, rollout.attempt.attempt_id
    assert await store.get_next_span_sequence_id(rid, aid) == 1
    assert await store.get_next_span_sequence_id(rid, "latest") == 2
    assert await store.get_next_span_sequence_id(rid, "attempt-does-not-exist") == 3
    assert await store.get_next_span_sequence_id("ro-unknown", "at-unknown") == 1
    assert list(await store.get_many_span_sequence_ids([(rid, "latest"), ("ro-unknown", "x"), (rid, aid)])) == [
        4,
        2,
        5,
    ]


async def test_statistics_name_the_class_and_the_backend(store: LightningStore, backend: str) -> None:
    statistics = await store.statistics()
    assert (statistics["name"], statistics["backend"]) == ("LightningStore", backend)

    class Renamed(LightningStore):
        pass

    assert (await Renamed(store.options).statistics())["name"] == "Renamed"  # as upstream: the class's name


async def test_a_duplicate_span_logs_upstreams_error(store: LightningStore, caplog: pytest.LogCaptureFixture) -> None:
    rollout = await store.start_rollout(input="x")
    rid, aid = rollout.rollout_id, rollout.attempt.attempt_id
    span = mock_readable_span()
    span.get_span_context = Mock(return_value=span.get_span_context())  # the same span id every time
    caplog.set_level(logging.ERROR)
    assert await store.add_otel_span(rid, aid, span) is not None
    assert caplog.records == []
    assert await store.add_otel_span(rid, aid, span) is None
    stored = (await store.query_spans(rid)).items[0]
    assert await store.add_span(stored) is None
    assert await store.add_many_spans([stored]) == []
    expected = f"Duplicated span added for rollout={rid}, attempt={aid}, span={stored.span_id}. Skipping."
    assert [record.getMessage() for record in caplog.records] == [expected] * 3


async def test_agent_lightnings_server_serves_this_store(store: LightningStore) -> None:
    # The server answers what the store answers: a sequence id for `latest` (it answered 500 when
    # the store refused the pair), the same statistics as the store.
    launcher = PythonServerLauncherArgs(host="127.0.0.1", launch_mode="asyncio", healthcheck_url="/v1/agl/health")
    server = LightningStoreServer(store, launcher_args=launcher)
    await server.start()  # type: ignore[no-untyped-call]  # agent-lightning leaves these unannotated
    client = LightningStoreClient(server.endpoint)
    try:
        rollout = await client.start_rollout(input="x")
        pairs = [(rollout.rollout_id, rollout.attempt.attempt_id), (rollout.rollout_id, "latest")]
        assert list(await client.get_many_span_sequence_ids(pairs)) == [1, 2]
        over_http, direct = await client.statistics(), await store.statistics()
        assert over_http["name"] == "LightningStore"
        assert {k: v for k, v in over_http.items() if k != "uptime"} == {
            k: v for k, v in direct.items() if k != "uptime"
        }
    finally:
        await client.close()  # type: ignore[no-untyped-call]
        await server.stop()  # type: ignore[no-untyped-call]
