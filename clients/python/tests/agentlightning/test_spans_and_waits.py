"""agent-lightning's LightningStore contract over gRPC: spans, sequence ids, waits, the watchdog,
statistics, and use from several event loops, threads and processes."""

from __future__ import annotations

import asyncio
import multiprocessing
import pickle
import threading
from typing import Any

import pytest
from agentlightning.types import (
    OtelResource,
    PromptTemplate,
    RolloutConfig,
    Span,
    SpanContext,
    TraceStatus,
)

from lightning_store import Client
from lightning_store.agentlightning import LightningStore
from lightning_store.local_server import LocalServer
from tests.agentlightning.conftest import Spans

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def make_span(rollout_id: str, attempt_id: str, span_id: str, sequence_id: int, name: str = "step") -> Span:
    return Span(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        sequence_id=sequence_id,
        trace_id=TRACE,
        span_id=span_id,
        parent_id=None,
        name=name,
        status=TraceStatus(status_code="OK"),
        attributes={"reward": 1.0, "tokens": 2**53 + 1, "ids": [1, 2, 3], "flag": True},
        events=[],
        links=[],
        start_time=1_700_000_000.0,
        end_time=1_700_000_001.0,
        context=SpanContext(trace_id=TRACE, span_id=span_id, is_remote=False, trace_state={}),
        parent=None,
        resource=OtelResource(attributes={"service.name": "runner"}, schema_url=""),
    )


async def test_every_span_field_round_trips(store: LightningStore) -> None:
    rollout = await store.start_rollout(input="x")
    context = {"trace_id": "Trace One", "is_remote": False}  # ids are opaque text, kept verbatim
    span = Span.model_validate(
        {
            "rollout_id": rollout.rollout_id,
            "attempt_id": rollout.attempt.attempt_id,
            "sequence_id": 7,
            "trace_id": "Trace One",
            "span_id": "Span/B7",
            "parent_id": "PARENT-00",
            "name": "openai.chat.completion",
            "status": {"status_code": "ERROR", "description": "rate limited", "status_extra": [1, "two"]},
            "attributes": {"s": "v", "i": -(2**63), "f": 0.25, "b": False, "list": ["a", "b"]},
            "events": [
                {"name": "first_token", "attributes": {"latency_ms": 12.5}, "timestamp": 1_700_000_000.5, "dropped": 0},
                {"name": "untimed", "attributes": {}},
            ],
            "links": [
                {"context": {**context, "span_id": "L1", "is_remote": True, "trace_state": {}}},  # attributes None
                {"context": {**context, "span_id": "L2", "trace_state": {}}, "attributes": {}},  # present but empty
                {"context": {**context, "span_id": "L3", "trace_state": {}}, "attributes": {"a": 1}, "why": "x"},
            ],
            "start_time": 1_700_000_000.0,
            "end_time": 1_700_000_002.25,
            "context": {
                **context,
                "span_id": "Span/B7",
                "trace_state": {"vendor": "x", "odd,key": "a=b", "z": ""},  # not expressible as a W3C header
                "context_extra": {"nested": True},
            },
            "parent": {**context, "span_id": "PARENT-00", "trace_state": {}},
            "resource": OtelResource(attributes={"service.name": "runner"}, schema_url="https://schema"),
            "kind": "SpanKind.CLIENT",  # extra fields, as Span.from_opentelemetry keeps them
            "limits": "SpanLimits(max_span_attributes=128)",
            "dropped_attributes": 0,
        }
    )
    assert await store.add_span(span) is span
    [stored] = await store.query_spans(rollout.rollout_id)
    assert stored.model_dump() == span.model_dump()
    assert stored.model_extra == span.model_extra
    assert [link.attributes for link in stored.links] == [None, {}, {"a": 1}]
    assert stored.context is not None
    assert list(stored.context.trace_state.items()) == [("vendor", "x"), ("odd,key", "a=b"), ("z", "")]
    assert [e.timestamp for e in stored.events] == [1_700_000_000.5, None]
    by_id = await store.query_spans(rollout.rollout_id, span_id="Span/B7", trace_id="Trace One")
    assert [s.span_id for s in by_id] == ["Span/B7"]
    assert (await store.query_spans(rollout.rollout_id, span_id="span/b7")).total == 0  # matched verbatim


async def test_spans_from_the_sdk_keep_every_extra_field(store: LightningStore, spans: Spans) -> None:
    rollout = await store.start_rollout(input="x")
    span = Span.from_opentelemetry(
        spans.make(), rollout_id=rollout.rollout_id, attempt_id=rollout.attempt.attempt_id, sequence_id=3
    )
    assert span.model_extra
    assert len(span.model_extra) > 1
    assert await store.add_span(span) is span
    [stored] = await store.query_spans(rollout.rollout_id)
    assert stored.model_dump() == span.model_dump()


async def test_add_span_validates_ids_and_ignores_duplicates(store: LightningStore) -> None:
    rollout = await store.start_rollout(input="x")
    rid, aid = rollout.rollout_id, rollout.attempt.attempt_id
    assert await store.add_span(make_span(rid, aid, "00f067aa0ba902b7", 1)) is not None
    assert await store.add_span(make_span(rid, aid, "00f067aa0ba902b7", 1)) is None  # duplicate
    with pytest.raises(ValueError, match="Rollout ro-000000000000 not found"):
        await store.add_span(make_span("ro-000000000000", aid, "00f067aa0ba902b8", 2))
    with pytest.raises(ValueError, match="not found"):
        await store.add_span(make_span(rid, "at-00000000", "00f067aa0ba902b8", 2))
    assert (await store.query_spans(rid)).total == 1


async def test_add_many_spans_across_rollouts_and_attempts(store: LightningStore) -> None:
    first, second = await store.start_rollout(input=1), await store.start_rollout(input=2)
    retry = await store.start_attempt(first.rollout_id)
    batch = [
        make_span(first.rollout_id, first.attempt.attempt_id, "00000000000000a1", 1),
        make_span(second.rollout_id, second.attempt.attempt_id, "00000000000000b1", 1),
        make_span(first.rollout_id, retry.attempt.attempt_id, "00000000000000a2", 2),
        make_span(first.rollout_id, first.attempt.attempt_id, "00000000000000a1", 1),  # duplicate in the batch
    ]
    stored = await store.add_many_spans(batch)
    assert stored == batch[:3]
    assert await store.add_many_spans([]) == []
    assert [s.span_id for s in await store.query_spans(first.rollout_id)] == ["00000000000000a1", "00000000000000a2"]
    assert [s.span_id for s in await store.query_spans(first.rollout_id, "latest")] == ["00000000000000a2"]
    by_attempt = await store.query_spans(first.rollout_id, first.attempt.attempt_id)
    assert [s.span_id for s in by_attempt] == ["00000000000000a1"]


async def test_otel_spans_get_sequence_ids_and_explicit_ones_raise_the_counter(
    store: LightningStore, spans: Spans
) -> None:
    rollout = await store.start_rollout(input="x")
    rid, aid = rollout.rollout_id, rollout.attempt.attempt_id
    readable = spans.make(prompt_token_ids=[1, 2])
    stored = await store.add_otel_span(rid, aid, readable)
    assert stored is not None
    assert (stored.sequence_id, stored.name, stored.attributes["prompt_token_ids"]) == (
        1,
        "openai.chat.completion",
        (1, 2),
    )
    assert stored.span_id == format(readable.context.span_id, "016x")
    explicit = await store.add_otel_span(rid, aid, spans.make(), sequence_id=100)
    assert explicit is not None
    assert explicit.sequence_id == 100
    assert await store.get_next_span_sequence_id(rid, aid) == 101
    [first, _] = await store.query_spans(rid)
    assert (first.status.status_code, first.events[0].name, first.model_extra) == (
        "OK",
        "first_token",
        stored.model_extra,  # every field Span.from_opentelemetry keeps, the kind among them
    )
    assert first.model_dump(mode="json") == stored.model_dump(mode="json")  # a tuple attribute reads as a list
    assert first.model_extra is not None
    assert first.model_extra["kind"] == "SpanKind.CLIENT"


async def test_sequence_ids_are_per_rollout_and_allocated_in_request_order(store: LightningStore) -> None:
    a, b = await store.start_rollout(input="a"), await store.start_rollout(input="b")
    a2 = await store.start_attempt(a.rollout_id)
    pairs = [
        (a.rollout_id, a.attempt.attempt_id),
        (b.rollout_id, b.attempt.attempt_id),
        (a.rollout_id, a2.attempt.attempt_id),
        (a.rollout_id, a.attempt.attempt_id),
    ]
    assert list(await store.get_many_span_sequence_ids(pairs)) == [1, 1, 2, 3]
    assert await store.get_many_span_sequence_ids([]) == []
    assert await store.get_next_span_sequence_id(b.rollout_id, b.attempt.attempt_id) == 2


async def test_a_span_is_a_heartbeat(store: LightningStore, spans: Spans) -> None:
    claimed = await store.start_rollout(input="x", config=RolloutConfig(unresponsive_seconds=60))
    await store.add_otel_span(claimed.rollout_id, claimed.attempt.attempt_id, spans.make())
    attempt = await store.get_latest_attempt(claimed.rollout_id)
    assert attempt is not None
    assert (attempt.status, attempt.last_heartbeat_time is not None) == ("running", True)
    assert (await store.get_rollout_by_id(claimed.rollout_id)).status == "running"  # type: ignore[union-attr]


async def test_query_spans_filters_sorts_and_pages(store: LightningStore) -> None:
    rollout = await store.start_rollout(input="x")
    rid, aid = rollout.rollout_id, rollout.attempt.attempt_id
    await store.add_many_spans(
        [make_span(rid, aid, f"00000000000000{i:02x}", i, name=f"step-{i % 2}") for i in range(1, 6)]
    )
    assert [s.sequence_id for s in await store.query_spans(rid, name="step-1")] == [1, 3, 5]
    assert [s.sequence_id for s in await store.query_spans(rid, name_contains="0", span_id="0000000000000001")] == []
    either = await store.query_spans(rid, name="step-0", span_id="0000000000000001", filter_logic="or")
    assert [s.sequence_id for s in either] == [1, 2, 4]
    page = await store.query_spans(rid, sort_by="sequence_id", sort_order="desc", limit=2, offset=1)
    assert ([s.sequence_id for s in page], page.limit, page.offset, page.total) == ([4, 3], 2, 1, 5)
    assert list(await store.query_spans(rid, filter_logic="or")) == []  # upstream: OR over nothing matches nothing
    counted = await store.query_spans(rid, limit=0)
    assert (list(counted), counted.total) == ([], 5)
    assert (await store.query_spans(rid, trace_id_contains=TRACE[:6])).total == 5
    assert (await store.query_spans("ro-000000000000")).total == 0  # unknown rollout: no spans, no error
    assert (await store.query_spans((await store.enqueue_rollout(input=1)).rollout_id, "latest")).total == 0


async def test_wait_for_rollouts_returns_what_finished_in_time(store: LightningStore) -> None:
    done, running = await store.start_rollout(input=1), await store.start_rollout(input=2)
    await store.update_attempt(done.rollout_id, "latest", status="succeeded")
    unknown = "ro-000000000000"
    assert [
        r.rollout_id
        for r in await store.wait_for_rollouts(rollout_ids=[running.rollout_id, done.rollout_id, unknown], timeout=0)
    ] == [done.rollout_id]
    partial = await store.wait_for_rollouts(rollout_ids=[running.rollout_id, done.rollout_id], timeout=0.2)
    assert [r.rollout_id for r in partial] == [done.rollout_id]
    assert all(type(r).__name__ == "Rollout" for r in partial)  # plain rollouts, no attempt

    async def finish_later() -> None:
        await store.update_attempt(running.rollout_id, "latest", status="failed")

    waiter = asyncio.create_task(
        store.wait_for_rollouts(rollout_ids=[running.rollout_id, done.rollout_id], timeout=None)
    )
    await asyncio.sleep(0)  # let the wait subscribe first: the finish below must wake it
    await finish_later()
    finished = await asyncio.wait_for(waiter, 20)
    assert [(r.rollout_id, r.status) for r in finished] == [
        (running.rollout_id, "failed"),
        (done.rollout_id, "succeeded"),
    ]


async def test_a_wait_without_timeout_can_be_cancelled(store: LightningStore) -> None:
    rollout = await store.start_rollout(input=1)
    waiter = asyncio.create_task(store.wait_for_rollouts(rollout_ids=[rollout.rollout_id]))
    await asyncio.sleep(0.05)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert await store.wait_for_rollouts(rollout_ids=[rollout.rollout_id], timeout=0) == []


async def test_the_watchdog_fails_an_unresponsive_attempt_and_requeues_a_timed_out_one(
    store: LightningStore, server: LocalServer
) -> None:
    silent = await store.start_rollout(
        input="silent", config=RolloutConfig(unresponsive_seconds=0.2, max_attempts=3, retry_condition=["timeout"])
    )
    [failed] = await store.wait_for_rollouts(rollout_ids=[silent.rollout_id], timeout=20)
    assert failed.status == "failed"  # unresponsive is not in retry_condition
    assert (await store.get_latest_attempt(silent.rollout_id)).status == "unresponsive"  # type: ignore[union-attr]

    slow = await store.start_rollout(
        input="slow",
        config=RolloutConfig(timeout_seconds=0.1, max_attempts=2, retry_condition=["timeout"]),
        worker_id="w",
    )
    with Client(server.address) as client:  # the requeue is no terminal status: wait for its event
        requeued = client.events(
            after=0, kinds=["rollout_changed"], rollout_ids=[slow.rollout_id], rollout_status_in=["requeuing"]
        )
        with requeued:
            assert next(requeued).rollout_id == slow.rollout_id
    assert (await store.get_latest_attempt(slow.rollout_id)).status == "timeout"  # type: ignore[union-attr]
    assert (await store.get_worker_by_id("w")).status == "unknown"  # type: ignore[union-attr]


async def test_statistics_and_capabilities(store: LightningStore, backend: str, spans: Spans) -> None:
    before = await store.statistics()
    rollout = await store.start_rollout(input="stats")
    await store.add_otel_span(rollout.rollout_id, rollout.attempt.attempt_id, spans.make())
    await store.add_resources({"p": PromptTemplate(template="t", engine="jinja")})
    await store.update_worker("stats-worker", heartbeat_stats={"cpu": 0.5})
    after = await store.statistics()
    assert (after["name"], after["backend"]) == ("LightningStore", backend)
    for key in ("total_rollouts", "total_attempts", "total_spans", "total_resources", "total_workers"):
        assert after[key] == before[key] + 1, key
    assert after["uptime"] > before["uptime"]
    assert store.capabilities == {"thread_safe": True, "async_safe": True, "zero_copy": True, "otlp_traces": False}
    with pytest.raises(NotImplementedError):
        store.otlp_traces_endpoint()
    exporting = LightningStore(store.options, otlp_traces=True)
    assert exporting.otlp_traces_endpoint() == f"http://{store.options.target}/v1/traces"  # the server's own port


def test_the_otlp_endpoint_follows_the_address_unless_given() -> None:
    assert LightningStore("127.0.0.1:1", otlp_traces=True).otlp_traces_endpoint() == "http://127.0.0.1:1/v1/traces"
    assert LightningStore("http://h:2/", otlp_traces=True).otlp_traces_endpoint() == "http://h:2/v1/traces"
    assert LightningStore("https://h:3", otlp_traces=True).otlp_traces_endpoint() == "https://h:3/v1/traces"
    given = LightningStore("127.0.0.1:1", otlp_traces=True, otlp_traces_endpoint="http://collector:4318/v1/traces")
    assert given.otlp_traces_endpoint() == "http://collector:4318/v1/traces"
    assert pickle.loads(pickle.dumps(given)).otlp_traces_endpoint() == "http://collector:4318/v1/traces"
    off = pickle.loads(pickle.dumps(LightningStore("127.0.0.1:1", otlp_traces=False)))
    assert off.capabilities["otlp_traces"] is False
    with pytest.raises(NotImplementedError):
        off.otlp_traces_endpoint()


def test_one_store_serves_several_event_loops_and_threads(store: LightningStore) -> None:
    created: list[str] = []

    def in_own_loop(index: int) -> None:
        created.append(asyncio.run(store.enqueue_rollout(input=index)).rollout_id)

    threads = [threading.Thread(target=in_own_loop, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    in_own_loop(4)  # and the main thread, again in a fresh loop
    total = asyncio.run(store.query_rollouts(rollout_id_in=created)).total
    assert (len(created), total) == (5, 5)


def _claim_in_child(store: LightningStore, results: multiprocessing.Queue[str | None]) -> None:
    claimed = asyncio.run(store.dequeue_rollout(worker_id="Worker-child"))
    results.put(claimed.rollout_id if claimed is not None else None)


@pytest.mark.parametrize("backend", ["memory"])  # about processes, not storage: one backend is enough
@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_runner_subprocesses_use_the_store_after_fork_or_pickling(store: LightningStore, start_method: str) -> None:
    rollout = asyncio.run(store.enqueue_rollout(input="for a child"))  # the parent's channel exists before the fork
    assert pickle.loads(pickle.dumps(store)).options == store.options
    context: Any = multiprocessing.get_context(start_method)
    results: multiprocessing.Queue[str | None] = context.Queue()
    child = context.Process(target=_claim_in_child, args=(store, results))
    child.start()
    claimed = results.get(timeout=120)
    child.join(60)
    assert (claimed, child.exitcode) == (rollout.rollout_id, 0)
