"""The sync client against a real server: every unary method, errors, retries and options."""

from __future__ import annotations

import json
import pickle
import threading
import time

import grpc
import pytest

from lightning_store import (
    UNSET,
    Client,
    ConnectionOptions,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    RetryPolicy,
    TlsOptions,
    Unavailable,
    attempt_update,
    from_attributes,
    from_json,
    rollout_config,
    rollout_spec,
    to_attributes,
)
from lightning_store.local_server import LocalServer
from lightning_store.proto import types_pb2 as types
from lightning_store.values import ATTEMPT_STATUS, ROLLOUT_STATUS, WORKER_STATUS

BIG = 2**53 + 1  # a double cannot hold it: only 64-bit integers all the way keep it


def span(rollout: types.Rollout, span_id: str, name: str = "step", sequence_id: int | None = None) -> types.Span:
    return types.Span(
        rollout_id=rollout.rollout_id,
        attempt_id=rollout.attempt.attempt_id,
        sequence_id=sequence_id,
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        span_id=span_id,
        name=name,
        attributes=to_attributes({"reward": 0.5, "tokens": BIG, "ok": True, "ids": [1, 2], "nested": {"k": "v"}}),
    )


def test_capabilities_and_statistics_count_what_was_written(client: Client, backend: str) -> None:
    capabilities = client.get_capabilities()
    assert (capabilities.thread_safe, capabilities.async_safe, capabilities.otlp_traces) == (True, True, True)
    before = client.get_statistics()
    assert before.name == backend
    client.enqueue_rollout({"q": 1})
    client.add_resources({"prompt": {"resource_type": "prompt_template", "template": "hi", "engine": "f-string"}})
    after = client.get_statistics()
    assert (after.total_rollouts, after.total_resources, after.queued_rollouts) == (
        before.total_rollouts + 1,
        before.total_resources + 1,
        before.queued_rollouts + 1,
    )
    assert after.rollouts_by_status["queuing"] == before.rollouts_by_status["queuing"] + 1


def test_enqueue_keeps_every_field_and_start_rollout_makes_the_worker_busy(client: Client) -> None:
    config = rollout_config(timeout_seconds=30.0, max_attempts=3, retry_condition=["failed", "timeout"])
    queued = client.enqueue_rollout({"question": "2+2", "big": BIG}, mode="val", config=config, metadata={"a": [1]})
    assert ROLLOUT_STATUS.name(queued.status) == "queuing"
    assert json.loads(queued.input_json) == {"question": "2+2", "big": BIG}
    assert (queued.mode, from_json(queued.metadata_json)) == (types.ROLLOUT_MODE_VAL, {"a": [1]})
    assert (queued.config.timeout_seconds, queued.config.max_attempts) == (30.0, 3)
    assert [ATTEMPT_STATUS.name(s) for s in queued.config.retry_condition] == ["failed", "timeout"]
    assert not queued.HasField("attempt")

    started = client.start_rollout("direct", worker_id="Worker-7")
    assert ROLLOUT_STATUS.name(started.status) == "preparing"
    assert (started.attempt.sequence_id, started.attempt.worker_id) == (1, "Worker-7")
    worker = client.get_worker("Worker-7")
    assert WORKER_STATUS.name(worker.status) == "busy"
    assert worker.current_rollout_id == started.rollout_id


def test_dequeue_is_fifo_and_empty_queue_gives_none(client: Client) -> None:
    ids = [r.rollout_id for r in client.enqueue_rollouts([rollout_spec(i) for i in range(3)])]
    assert [from_json(r.input_json) for r in client.query_rollouts(rollout_id_in=ids)] == [0, 1, 2]
    first = client.dequeue_rollout(worker_id="w")
    assert first is not None
    assert (first.rollout_id, first.attempt.sequence_id, ROLLOUT_STATUS.name(first.status)) == (ids[0], 1, "preparing")
    assert [r.rollout_id for r in client.dequeue_rollouts(limit=5)] == ids[1:]
    assert client.dequeue_rollout(worker_id="w") is None
    assert WORKER_STATUS.name(client.get_worker("w").status) == "idle"  # an empty poll makes the worker idle


def test_a_waiting_dequeue_returns_when_a_rollout_is_queued(client: Client) -> None:
    claimed: list[types.Rollout | None] = []
    waiter = threading.Thread(target=lambda: claimed.append(client.dequeue_rollout(worker_id="w", wait=20.0)))
    started = time.monotonic()
    waiter.start()
    queued = client.enqueue_rollout("late")
    waiter.join(30)
    assert claimed
    assert claimed[0] is not None
    assert claimed[0].rollout_id == queued.rollout_id
    assert time.monotonic() - started < 15  # the enqueue woke it, long before its 20 s wait


def test_attempts_spans_and_sequence_ids(client: Client) -> None:
    rollout = client.start_rollout({"q": 1})
    assert client.add_span(span(rollout, "00f067aa0ba902b7")) is not None
    stored = client.add_spans([span(rollout, "00f067aa0ba902b8"), span(rollout, "00f067aa0ba902b7")])
    assert [s.span_id for s in stored] == ["00f067aa0ba902b8"]  # the duplicate is left out
    assert client.add_span(span(rollout, "00f067aa0ba902b8")) is None  # and a single duplicate is None
    spans = client.query_spans(rollout.rollout_id, "latest")
    assert [s.sequence_id for s in spans] == [1, 2]
    assert from_attributes(spans[0].attributes) == {
        "reward": 0.5,
        "tokens": BIG,
        "ok": True,
        "ids": [1, 2],
        "nested": {"k": "v"},
    }
    # ids were allocated for the two duplicates too, as upstream allocates before it deduplicates
    assert client.next_span_sequence_id(rollout.rollout_id, rollout.attempt.attempt_id) == 5
    other = client.start_rollout({"q": 2})
    pairs = [(rollout.rollout_id, rollout.attempt.attempt_id), (other.rollout_id, other.attempt.attempt_id)]
    assert client.span_sequence_ids([pairs[0], pairs[1], pairs[0]]) == [6, 1, 7]
    # the pairs must exist, unless allow_unknown asks for agent-lightning's counters by rollout id
    with pytest.raises(NotFound, match="Attempt latest not found"):
        client.next_span_sequence_id(rollout.rollout_id, "latest")
    assert client.next_span_sequence_id(rollout.rollout_id, "latest", allow_unknown=True) == 8
    assert client.span_sequence_ids([("ro-unknown", "x"), pairs[1]], allow_unknown=True) == [1, 2]
    # a span is a heartbeat: the attempt and its rollout run
    assert ROLLOUT_STATUS.name(client.get_rollout(rollout.rollout_id).status) == "running"

    retry = client.start_attempt(rollout.rollout_id, worker_id="w2")
    assert retry.attempt.sequence_id == 2
    attempts = client.query_attempts(rollout.rollout_id, sort_by="sequence_id", sort_order="desc")
    assert [a.sequence_id for a in attempts] == [2, 1]
    assert attempts.total == 2
    latest = client.get_latest_attempt(rollout.rollout_id)
    assert latest is not None
    assert latest.attempt_id == retry.attempt.attempt_id
    assert client.get_latest_attempt(client.enqueue_rollout(None).rollout_id) is None


def test_updates_distinguish_unset_from_none(client: Client) -> None:
    rollout = client.enqueue_rollout({"q": 1}, mode="train", metadata={"keep": True})
    updated = client.update_rollout(rollout.rollout_id, mode=None, metadata=UNSET, status="cancelled")
    assert (updated.mode, from_json(updated.metadata_json)) == (types.ROLLOUT_MODE_UNSPECIFIED, {"keep": True})
    assert ROLLOUT_STATUS.name(updated.status) == "cancelled"
    assert updated.HasField("end_time")
    cleared = client.update_rollout(rollout.rollout_id, metadata=None, input={"q": 2})
    assert (from_json(cleared.metadata_json), from_json(cleared.input_json)) == (None, {"q": 2})

    started = client.start_rollout("x", worker_id="w")
    attempt = client.update_attempt(started.rollout_id, metadata={"note": 1}, last_heartbeat_time=1_700_000_000.25)
    assert from_json(attempt.metadata_json) == {"note": 1}
    assert abs(attempt.last_heartbeat_time.ToNanoseconds() / 1e9 - 1_700_000_000.25) < 1e-6
    finished = client.update_attempt(started.rollout_id, started.attempt.attempt_id, status="succeeded")
    assert ATTEMPT_STATUS.name(finished.status) == "succeeded"
    assert ROLLOUT_STATUS.name(client.get_rollout(started.rollout_id).status) == "succeeded"
    assert WORKER_STATUS.name(client.get_worker("w").status) == "idle"
    assert [r.rollout_id for r in client.wait_for_rollouts([started.rollout_id, "ro-000000000000"], timeout=0)] == [
        started.rollout_id
    ]


def test_update_attempts_applies_all_or_none_in_order(client: Client) -> None:
    client.enqueue_rollouts([rollout_spec(i) for i in range(2)])
    claimed = [r.rollout_id for r in client.dequeue_rollouts(limit=2)]
    with pytest.raises(NotFound, match=r"updates\[1\]: Rollout ro-000000000000 not found"):
        client.update_attempts(
            [attempt_update(claimed[0], status="succeeded"), attempt_update("ro-000000000000", status="failed")]
        )
    assert ROLLOUT_STATUS.name(client.get_rollout(claimed[0]).status) == "preparing"
    updated = client.update_attempts(
        [
            attempt_update(claimed[0], metadata={"step": 1}),
            attempt_update(claimed[0], status="succeeded"),
            attempt_update(claimed[1], status="failed"),
        ]
    )
    assert [(a.rollout_id, ATTEMPT_STATUS.name(a.status), from_json(a.metadata_json)) for a in updated] == [
        (claimed[0], "preparing", {"step": 1}),
        (claimed[0], "succeeded", {"step": 1}),
        (claimed[1], "failed", None),
    ]
    assert [ROLLOUT_STATUS.name(client.get_rollout(r).status) for r in claimed] == ["succeeded", "failed"]


def test_queries_filter_sort_and_page(client: Client) -> None:
    ids = [client.enqueue_rollout(i).rollout_id for i in range(5)]
    client.update_rollout(ids[1], status="cancelled")
    client.update_rollout(ids[3], status="cancelled")
    page = client.query_rollouts(status_in=["cancelled"])
    assert [r.rollout_id for r in page] == [ids[1], ids[3]]
    either = client.query_rollouts(status_in=["cancelled"], rollout_id_in=[ids[0]], filter_logic="or")
    assert sorted(r.rollout_id for r in either) == sorted([ids[0], ids[1], ids[3]])
    window = client.query_rollouts(sort_by="rollout_id", sort_order="desc", limit=2, offset=1)
    assert (window.total, window.limit, window.offset, len(window)) == (5, 2, 1, 2)
    assert [r.rollout_id for r in window] == sorted(ids, reverse=True)[1:3]
    assert window[0].rollout_id == window.items[0].rollout_id
    with pytest.raises(InvalidArgument, match="sort_by") as bad_sort:
        client.query_rollouts(sort_by="no_such_field")
    assert isinstance(bad_sort.value, ValueError)


def test_explicit_empty_lists_match_nothing_and_limit_zero_counts(client: Client) -> None:
    ids = [client.enqueue_rollout(i).rollout_id for i in range(3)]
    client.update_worker("Worker-1")
    # None is no condition; an empty list is a condition nothing meets, with AND and with OR
    assert client.query_rollouts(status_in=None).total == 3
    assert (client.query_rollouts(status_in=[]).total, client.query_rollouts(rollout_id_in=[]).total) == (0, 0)
    assert client.query_rollouts(status_in=[], filter_logic="or").total == 0
    either = client.query_rollouts(status_in=[], rollout_id_in=[ids[1]], filter_logic="or")
    assert [r.rollout_id for r in either] == [ids[1]]
    assert client.query_rollouts(filter_logic="or").total == 3  # OR without conditions: everything
    assert (client.query_workers(status_in=[]).total, client.query_workers(status_in=None).total) == (0, 1)
    assert client.query_workers(status_in=[], worker_id_contains="-1", filter_logic="or").total == 1
    # limit=0: no items, the total (the server answers it; the page says limit 0)
    counted = client.query_rollouts(limit=0, offset=1)
    assert (counted.items, counted.limit, counted.offset, counted.total) == ([], 0, 1, 3)
    assert (len(client.query_workers(limit=0)), client.query_workers(limit=0).total) == (0, 1)


def test_span_ids_are_opaque_and_worker_ids_may_be_empty(client: Client) -> None:
    client.enqueue_rollout(None)
    rollout = client.dequeue_rollout(worker_id="")
    assert rollout is not None
    assert rollout.attempt.HasField("worker_id")
    assert rollout.attempt.worker_id == ""
    opaque = span(rollout, "Span 1 (ABC)")
    opaque.trace_id = "Trace/UPPER case"
    opaque.parent_id = "PARENT"
    assert client.add_span(opaque) is not None
    stored = client.query_spans(rollout.rollout_id, span_id="Span 1 (ABC)")
    assert [(s.trace_id, s.span_id, s.parent_id) for s in stored] == [("Trace/UPPER case", "Span 1 (ABC)", "PARENT")]
    assert client.query_spans(rollout.rollout_id, trace_id="trace/upper case").total == 0  # matched verbatim
    attempt = client.update_attempt(rollout.rollout_id, worker_id="")
    assert attempt.worker_id == ""


def test_resources_and_workers(client: Client) -> None:
    llm = {"main": {"resource_type": "llm", "endpoint": "http://127.0.0.1:1/v1", "model": "m"}}
    added = client.add_resources(llm)
    assert (added.version, from_json(added.resources_json)) == (1, llm)
    assert client.update_resources(added.resources_id, {"main": {**llm["main"], "model": "m2"}}).version == 2
    named = client.update_resources("my-prompts", {"p": {"resource_type": "prompt_template", "template": "t"}})
    assert (named.resources_id, named.version) == ("my-prompts", 1)
    latest = client.get_latest_resources()
    assert latest is not None
    assert latest.resources_id == "my-prompts"
    assert client.get_resources(added.resources_id).version == 2
    assert [r.resources_id for r in client.query_resources(resources_id_contains="prompts")] == ["my-prompts"]
    # a rollout without resources_id takes the latest snapshot
    assert client.enqueue_rollout(None).resources_id == "my-prompts"

    worker = client.update_worker("Worker-1", heartbeat_stats={"cpu": 0.5})
    assert (WORKER_STATUS.name(worker.status), from_json(worker.heartbeat_stats_json)) == ("unknown", {"cpu": 0.5})
    assert from_json(client.update_worker("Worker-1").heartbeat_stats_json) == {"cpu": 0.5}  # UNSET keeps them
    client.dequeue_rollout(worker_id="Worker-2")
    assert [w.worker_id for w in client.query_workers(status_in=["busy"])] == ["Worker-2"]
    assert [w.worker_id for w in client.query_workers(worker_id_contains="-1")] == ["Worker-1"]


def test_errors_carry_the_status_the_message_and_the_request_id(client: Client) -> None:
    with pytest.raises(NotFound) as missing:
        client.get_rollout("ro-000000000000")
    assert missing.value.code == grpc.StatusCode.NOT_FOUND
    assert missing.value.details == "Rollout ro-000000000000 not found"
    assert missing.value.request_id
    assert isinstance(missing.value, LookupError)
    with pytest.raises(InvalidArgument):
        client.enqueue_rollout(None, config=rollout_config(max_attempts=0))
    with pytest.raises(ValueError, match="unknown rollout status"):
        client.update_rollout("ro-000000000000", status="done")  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_calls_wait_for_a_restarting_server_and_writes_land_once(server: LocalServer) -> None:
    with Client(server.address) as client:
        rollout = client.enqueue_rollout({"durable": True})
        server.stop()
        answers: list[object] = []
        caller = threading.Thread(
            target=lambda: answers.extend([client.get_rollout(rollout.rollout_id), client.enqueue_rollout("later")])
        )
        caller.start()  # waits while the server is down: nothing was sent yet
        server.start()
        caller.join(30)
        assert [type(a) for a in answers] == [types.Rollout, types.Rollout]
        assert client.query_rollouts().total == 2  # the write landed once


def test_an_enqueue_repeated_under_its_request_id_lands_once(client: Client) -> None:
    first = client.enqueue_rollout({"n": 1}, request_id="retry-me")
    again = client.enqueue_rollout({"n": 1}, request_id="retry-me")
    assert again.rollout_id == first.rollout_id
    batch = [rollout_spec({"n": 2}), rollout_spec({"n": 3})]
    created = client.enqueue_rollouts(batch, request_id="batch")
    assert [r.rollout_id for r in client.enqueue_rollouts(batch, request_id="batch")] == [r.rollout_id for r in created]
    assert client.query_rollouts().total == 3
    with pytest.raises(FailedPrecondition):
        client.enqueue_rollout({"n": 4}, request_id="retry-me")


@pytest.mark.parametrize("backend", ["sqlite"])
def test_failing_fast_without_retries(server: LocalServer) -> None:
    with Client(server.address, wait_for_ready=False, retry=RetryPolicy(timeout=0)) as client:
        client.enqueue_rollout("stored")
        server.stop()
        started = time.monotonic()
        with pytest.raises(Unavailable):
            client.get_statistics()
        with pytest.raises(Unavailable):
            client.enqueue_rollout("refused")
        assert time.monotonic() - started < 5
    server.start()
    with Client(server.address) as fresh:
        assert fresh.query_rollouts().total == 1  # the refused write left nothing behind


@pytest.mark.parametrize("backend", ["sqlite"])
def test_safe_calls_are_retried_when_the_server_drops_them(server: LocalServer) -> None:
    with Client(server.address, wait_for_ready=False) as client:
        client.get_statistics()
        server.stop()
        answers: list[object] = []
        reader = threading.Thread(target=lambda: answers.append(client.get_statistics()))
        reader.start()  # fails fast with UNAVAILABLE, then retries with backoff
        server.start()
        reader.join(30)
        assert len(answers) == 1


def test_a_client_pickles_as_its_options(server: LocalServer) -> None:
    with Client(server.address, timeout=5.0) as client:
        rollout = client.enqueue_rollout({"q": 1})
        copy = pickle.loads(pickle.dumps(client))
        assert copy.options == client.options
        assert copy.get_rollout(rollout.rollout_id).rollout_id == rollout.rollout_id
        copy.close()


def test_connection_options_in_one_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIGHTNING_STORE_SERVER", "http://store.example:4747")
    monkeypatch.setenv("LIGHTNING_STORE_TOKEN", "s3cret")
    options = ConnectionOptions.from_env(timeout=3.0)
    assert (options.target, options.uses_tls, options.timeout) == ("store.example:4747", False, 3.0)
    assert options.call_metadata() == (("authorization", "Bearer s3cret"),)
    assert "s3cret" not in repr(options)
    secure = ConnectionOptions("https://store.example:443", metadata=(("x-team", "rl"),))
    assert (secure.target, secure.uses_tls, secure.call_metadata()) == ("store.example:443", True, (("x-team", "rl"),))
    named = ConnectionOptions("10.0.0.1:4747", tls=TlsOptions(server_name="store.internal"))
    assert ("grpc.ssl_target_name_override", "store.internal") in named.channel_options("ua")
    assert isinstance(named.credentials(), grpc.ChannelCredentials)
    assert ConnectionOptions().credentials() is None
    assert pickle.loads(pickle.dumps(named)) == named
