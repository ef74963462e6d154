"""agent-lightning's own `LightningStoreClient`, unchanged, through every
method of the `LightningStore` interface against lightning-store, asserting
upstream's return values and errors (agentlightning 0.3.0 semantics)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

import pytest
from agentlightning.store.base import UNSET
from agentlightning.store.client_server import LightningStoreClient
from agentlightning.types import (
    LLM,
    AttemptedRollout,
    EnqueueRolloutRequest,
    PromptTemplate,
    Rollout,
    RolloutConfig,
    Span,
)
from aiohttp import ClientResponseError
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from helpers import drain, drive, make_span


def test_capabilities_and_otlp_endpoint(store_url: str) -> None:
    client = LightningStoreClient(store_url)
    assert client.capabilities == {
        "thread_safe": True,
        "async_safe": True,
        "zero_copy": True,
        "otlp_traces": True,
    }
    assert client.otlp_traces_endpoint() == f"{store_url}/v1/traces"


def test_rollouts_queue_and_attempts(store_url: str) -> None:
    async def scenario(c: LightningStoreClient) -> None:
        await drain(c)
        resources = await c.add_resources({"main": LLM(endpoint="http://llm/v1", model="m")})

        started = await c.start_rollout(
            input={"task": "s"}, mode="train", config=RolloutConfig(timeout_seconds=30.0), worker_id="W-s"
        )
        assert isinstance(started, AttemptedRollout)
        assert (started.status, started.attempt.status, started.attempt.sequence_id) == (
            "preparing",
            "preparing",
            1,
        )
        assert started.resources_id == resources.resources_id  # latest resources by default
        assert started.metadata == {}
        assert started.config.timeout_seconds == 30.0
        worker = await c.get_worker_by_id("W-s")
        assert worker is not None
        assert (worker.status, worker.current_rollout_id) == ("busy", started.rollout_id)

        first = await c.enqueue_rollout(input=1, metadata={"k": "v"})
        assert isinstance(first, Rollout) and not isinstance(first, AttemptedRollout)
        assert (first.status, first.metadata, first.end_time) == ("queuing", {"k": "v"}, None)
        more = await c.enqueue_many_rollouts(
            [
                EnqueueRolloutRequest(input=2),
                EnqueueRolloutRequest(input=3, mode="val", resources_id="pinned"),
            ]
        )
        assert [r.input for r in more] == [2, 3]
        assert more[1].resources_id == "pinned"
        assert await c.enqueue_many_rollouts([]) == []

        claimed = await c.dequeue_rollout(worker_id="W-1")
        assert claimed is not None and claimed.rollout_id == first.rollout_id
        assert (claimed.status, claimed.attempt.sequence_id, claimed.attempt.worker_id) == (
            "preparing",
            1,
            "W-1",
        )
        batch = await c.dequeue_many_rollouts(limit=5, worker_id="W-2")
        assert [r.rollout_id for r in batch] == [r.rollout_id for r in more]
        w2 = await c.get_worker_by_id("W-2")
        assert w2 is not None and w2.current_rollout_id == more[1].rollout_id  # synced with the last
        assert w2.last_dequeue_time is not None
        # An empty queue: None, and the polling worker becomes idle.
        assert await c.dequeue_rollout(worker_id="W-1") is None
        w1 = await c.get_worker_by_id("W-1")
        assert w1 is not None and w1.status == "idle"

        retried = await c.start_attempt(first.rollout_id, worker_id="W-3")
        assert (retried.attempt.sequence_id, retried.status) == (2, "preparing")
        attempts = await c.query_attempts(first.rollout_id)
        assert [a.sequence_id for a in attempts] == [1, 2]
        assert attempts.total == 2
        desc = await c.query_attempts(first.rollout_id, sort_order="desc", limit=1)
        assert [a.sequence_id for a in desc] == [2] and desc.total == 2
        latest = await c.get_latest_attempt(first.rollout_id)
        assert latest is not None and latest.attempt_id == retried.attempt.attempt_id

        read = await c.get_rollout_by_id(first.rollout_id)
        assert isinstance(read, AttemptedRollout) and read.attempt.sequence_id == 2

        with pytest.raises(ClientResponseError) as error:
            await c.start_attempt("ro-does-not-exist")
        assert error.value.status == 404

    drive(store_url, scenario)


def test_unknown_ids_answer_as_upstream(store_url: str) -> None:
    async def scenario(c: LightningStoreClient) -> None:
        began = time.monotonic()
        assert await c.get_rollout_by_id("ro-missing") is None
        assert await c.get_latest_attempt("ro-missing") is None
        assert await c.get_resources_by_id("rs-missing") is None
        assert await c.get_worker_by_id("nobody") is None
        empty = await c.query_attempts("ro-missing")
        assert (list(empty), empty.total) == ([], 0)
        no_spans = await c.query_spans("ro-missing")
        assert (list(no_spans), no_spans.total) == ([], 0)
        # No retries hide these answers (upstream's server fails and its
        # client retries for seconds before giving up).
        assert time.monotonic() - began < 5
        for update in (
            c.update_rollout("ro-missing", status="running"),
            c.update_attempt("ro-missing", "latest", status="running"),
        ):
            with pytest.raises(ClientResponseError) as error:
                await update
            assert error.value.status == 404

    drive(store_url, scenario)


def test_updates_write_given_fields_and_drive_the_lifecycle(store_url: str) -> None:
    async def scenario(c: LightningStoreClient) -> None:
        await drain(c)
        rollout = await c.start_rollout(input={"p": 1}, metadata={"keep": True}, worker_id="W-u")
        rid, aid = rollout.rollout_id, rollout.attempt.attempt_id

        updated = await c.update_rollout(rid, mode="train", metadata={"extra": 1})
        assert (updated.mode, updated.metadata) == ("train", {"extra": 1})
        cleared = await c.update_rollout(rid, mode=None, resources_id=None, input=None)
        assert (cleared.mode, cleared.resources_id, cleared.input, cleared.metadata) == (
            None,
            None,
            None,
            {"extra": 1},
        )
        config = RolloutConfig(max_attempts=3, retry_condition=["failed"])
        assert (await c.update_rollout(rid, config=config, status=UNSET)).config == config

        same = await c.update_attempt(rid, aid, worker_id="", metadata={})
        assert (same.worker_id, same.metadata) == ("", {})
        heartbeat = time.time() - 5
        beat = await c.update_attempt(rid, "latest", last_heartbeat_time=heartbeat)
        assert beat.last_heartbeat_time == heartbeat

        # A failed latest attempt with a retry left requeues the rollout.
        failed = await c.update_attempt(rid, aid, status="failed")
        assert failed.end_time is not None
        requeued = await c.get_rollout_by_id(rid)
        assert requeued is not None and requeued.status == "requeuing"
        again = await c.dequeue_rollout(worker_id="W-u")
        assert again is not None and (again.rollout_id, again.attempt.sequence_id) == (rid, 2)
        done = await c.update_attempt(rid, "latest", status="succeeded")
        assert done.status == "succeeded"
        finished = await c.get_rollout_by_id(rid)
        assert finished is not None and finished.status == "succeeded" and finished.end_time is not None
        worker = await c.get_worker_by_id("W-u")
        assert worker is not None and (worker.status, worker.current_rollout_id) == ("idle", None)

        # Cancelling stamps end_time; requeuing puts the rollout back once.
        cancelled = await c.update_rollout(rid, status="cancelled")
        assert cancelled.status == "cancelled"
        await c.update_rollout(rid, status="requeuing")
        await c.update_rollout(rid, status="queuing")
        back = await c.dequeue_rollout()
        assert back is not None and back.rollout_id == rid
        assert await c.dequeue_rollout() is None

        with pytest.raises(ClientResponseError) as error:
            await c.update_attempt(rid, "at-missing", status="running")
        assert error.value.status == 404

    drive(store_url, scenario)


def test_queries_filter_sort_and_paginate(store_url: str) -> None:
    async def scenario(c: LightningStoreClient) -> None:
        await drain(c)
        made = [await c.enqueue_rollout(input=i) for i in range(4)]
        ids = [r.rollout_id for r in made]
        claimed = await c.dequeue_rollout(worker_id="W-q")
        assert claimed is not None and claimed.rollout_id == ids[0]

        mine = await c.query_rollouts(rollout_id_in=ids)
        assert [r.rollout_id for r in mine] == ids and mine.total == 4
        assert isinstance(mine[0], AttemptedRollout) and not isinstance(mine[1], AttemptedRollout)
        queued = await c.query_rollouts(rollout_id_in=ids, status_in=["queuing"])
        assert [r.rollout_id for r in queued] == ids[1:]
        # Deprecated parameter names still work.
        assert len(await c.query_rollouts(rollout_ids=ids, status=["preparing"])) == 1
        either = await c.query_rollouts(
            status_in=["preparing"], rollout_id_contains=ids[3], filter_logic="or"
        )
        assert {ids[0], ids[3]} <= {r.rollout_id for r in either}
        page = await c.query_rollouts(
            rollout_id_in=ids, sort_by="rollout_id", sort_order="desc", limit=2, offset=1
        )
        assert [r.rollout_id for r in page] == sorted(ids, reverse=True)[1:3]
        assert (page.limit, page.offset, page.total) == (2, 1, 4)
        assert (await c.query_rollouts(rollout_id_in=[])).total == 0  # an empty list matches nothing
        everything = await c.query_rollouts(filter_logic="or")  # no condition: no filter
        assert set(ids) <= {r.rollout_id for r in everything}
        with pytest.raises(ClientResponseError) as error:
            await c.query_rollouts(sort_by="nope")
        assert error.value.status == 400

        await drain(c)
        workers = await c.query_workers(worker_id_contains="W-q")
        assert [w.worker_id for w in workers] == ["W-q"]
        busy = await c.query_workers(status_in=["busy"], worker_id_contains="W-q")
        assert [w.worker_id for w in busy] == ["W-q"]
        assert (await c.query_workers(status_in=["idle"], worker_id_contains="W-q")).total == 0

    drive(store_url, scenario)


def test_resources_are_versioned_snapshots(store_url: str) -> None:
    async def scenario(c: LightningStoreClient) -> None:
        llm = LLM(endpoint="http://llm/v1", model="m1", sampling_parameters={"temperature": 0.5})
        prompt = PromptTemplate(template="Hi {name}", engine="f-string")
        added = await c.add_resources({"llm": llm, "prompt": prompt})
        assert added.resources_id.startswith("rs-") and len(added.resources_id) == 15
        assert added.version == 1 and added.create_time == added.update_time
        assert added.resources["llm"] == llm and added.resources["prompt"] == prompt
        got = await c.get_resources_by_id(added.resources_id)
        assert got == added

        upsert = await c.update_resources("my resources", {"llm": llm})
        assert (upsert.resources_id, upsert.version) == ("my resources", 1)
        bumped = await c.update_resources("my resources", {"llm": llm.model_copy(update={"model": "m2"})})
        assert bumped.version == 2 and bumped.create_time == upsert.create_time
        latest = await c.get_latest_resources()
        assert latest is not None and latest.resources_id == "my resources"

        found = await c.query_resources(resources_id_contains="my res")
        assert [r.resources_id for r in found] == ["my resources"]
        by_version = await c.query_resources(sort_by="version", sort_order="desc", limit=1)
        assert by_version[0].version == 2

    drive(store_url, scenario)


class _Collect(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def _otel_span(name: str) -> ReadableSpan:
    exporter = _Collect()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("agl0-tests").start_as_current_span(name) as span:
        span.set_attribute("gen_ai.request.model", "m")
        span.add_event("token", {"n": 1})
    return exporter.spans[0]


def test_spans_sequence_ids_heartbeats_and_queries(store_url: str) -> None:
    async def scenario(c: LightningStoreClient) -> None:
        await drain(c)
        rollout = await c.enqueue_rollout(input="spans")
        claimed = await c.dequeue_rollout(worker_id="W-sp")
        assert claimed is not None and claimed.rollout_id == rollout.rollout_id
        rid, aid = claimed.rollout_id, claimed.attempt.attempt_id

        # Sequence ids: one counter per rollout, consecutive in request order,
        # handed out for any pair (upstream does not look them up).
        other = await c.start_rollout(input="other")
        pairs = [(rid, aid), (other.rollout_id, other.attempt.attempt_id), (rid, aid), (rid, aid)]
        assert await c.get_many_span_sequence_ids(pairs) == [1, 1, 2, 3]
        nowhere = f"ro-nowhere-{uuid.uuid4().hex}"
        assert await c.get_next_span_sequence_id(nowhere, "at-nowhere") == 1

        first = make_span(rid, aid, 10, "llm.call", custom_field={"kept": [1, 2]})
        stored = await c.add_span(first)
        assert stored == first  # every field, the extra one included
        assert await c.add_span(first) is None  # a duplicate
        # A span is a heartbeat: the attempt and the rollout run.
        running = await c.get_rollout_by_id(rid)
        assert isinstance(running, AttemptedRollout)
        assert (running.status, running.attempt.status) == ("running", "running")
        assert running.attempt.last_heartbeat_time is not None
        # An explicit sequence id raises the counter.
        assert await c.get_next_span_sequence_id(rid, aid) == 11

        batch = [make_span(rid, aid, n, f"step-{n}") for n in (20, 21)]
        assert await c.add_many_spans(batch) == batch
        otel = _otel_span("otel.step")
        converted = await c.add_otel_span(rid, aid, otel)
        assert converted is not None and converted.sequence_id == 22
        assert converted == Span.from_opentelemetry(otel, rid, aid, 22)

        every = await c.query_spans(rid)
        assert [s.sequence_id for s in every] == [10, 20, 21, 22] and every.total == 4
        latest = await c.query_spans(rid, "latest", name_contains="step-")
        assert [s.name for s in latest] == ["step-20", "step-21"]
        either = await c.query_spans(rid, name="llm.call", trace_id=f"{21:032x}", filter_logic="or")
        assert [s.sequence_id for s in either] == [10, 21]
        # upstream's pool: OR without text conditions finds no span
        assert (await c.query_spans(rid, filter_logic="or")).total == 0
        page = await c.query_spans(rid, sort_by="sequence_id", sort_order="desc", limit=2, offset=1)
        assert [s.sequence_id for s in page] == [21, 20] and page.total == 4
        assert (await c.query_spans(rid, attempt_id=other.attempt.attempt_id)).total == 0

    drive(store_url, scenario)


def test_waits_workers_and_statistics(store_url: str) -> None:
    async def scenario(c: LightningStoreClient) -> None:
        await drain(c)
        before = await c.statistics()
        done = await c.start_rollout(input="w1")
        pending = await c.start_rollout(input="w2")
        await c.update_attempt(done.rollout_id, "latest", status="succeeded")
        waited = await c.wait_for_rollouts(
            rollout_ids=[done.rollout_id, pending.rollout_id, "ro-x"], timeout=0.05
        )
        assert [r.rollout_id for r in waited] == [done.rollout_id]
        assert not isinstance(waited[0], AttemptedRollout)
        assert await c.wait_for_rollouts(rollout_ids=[pending.rollout_id], timeout=0.0) == []
        with pytest.raises(ValueError):  # the client's own limit
            await c.wait_for_rollouts(rollout_ids=[pending.rollout_id], timeout=5)

        stats = {"cpu": 0.5, "host": "h"}
        worker = await c.update_worker("W-hb", heartbeat_stats=stats)
        assert (worker.status, worker.heartbeat_stats) == ("unknown", stats)
        assert worker.last_heartbeat_time is not None
        again = await c.update_worker("W-hb")
        assert again.heartbeat_stats == stats and again.last_heartbeat_time is not None
        assert again.last_heartbeat_time >= worker.last_heartbeat_time

        after = await c.statistics()
        assert after["total_rollouts"] == before["total_rollouts"] + 2
        assert after["total_attempts"] == before["total_attempts"] + 2
        assert after["total_workers"] == before["total_workers"] + 1
        assert after["uptime"] >= before["uptime"]

    drive(store_url, scenario)
