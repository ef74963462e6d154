"""Namespaces: clients made with `namespace=` work in that namespace alone, streams and worker sessions included."""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import pytest

from lightning_store import (
    AlreadyExists,
    AsyncClient,
    Client,
    ConnectionOptions,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
)
from lightning_store.local_server import LocalServer
from lightning_store.values import ROLLOUT_STATUS, from_json

WAIT = 20.0  # bound of every wait for something the server pushes


@pytest.fixture
def runs(server: LocalServer, client: Client) -> Iterator[dict[str, Client]]:
    """Namespaces run-a and run-b, created by the admin API, each with a client of its own."""
    client.create_namespace("run-a")
    client.create_namespace("run-b", span_retention_age=7 * 86400, span_retention_max_bytes=1 << 20)
    opened = {name: Client(server.address, namespace=name) for name in ("run-a", "run-b")}
    yield opened
    for each in opened.values():
        each.close()


def test_a_rollout_enqueued_in_one_namespace_is_not_seen_in_another(client: Client, runs: dict[str, Client]) -> None:
    a, b = runs["run-a"], runs["run-b"]
    queued = a.enqueue_rollout({"task": "for run a"})
    assert b.dequeue_rollout() is None
    assert client.dequeue_rollout() is None  # nor in default
    assert b.query_rollouts().total == 0
    assert client.query_rollouts().total == 0
    with pytest.raises(NotFound):
        b.get_rollout(queued.rollout_id)
    assert [r.rollout_id for r in a.query_rollouts()] == [queued.rollout_id]
    claimed = a.dequeue_rollout(worker_id="runner-a")
    assert claimed is not None
    assert claimed.rollout_id == queued.rollout_id
    assert (a.get_statistics().total_rollouts, b.get_statistics().total_rollouts) == (1, 0)

    listed = {summary.namespace.name: summary for summary in client.list_namespaces()}
    assert list(listed) == ["default", "run-a", "run-b"]
    assert [listed[name].statistics.total_rollouts for name in listed] == [0, 1, 0]
    retention = listed["run-b"].namespace.span_retention
    assert (retention.max_age.seconds, retention.max_bytes) == (7 * 86400, 1 << 20)
    assert not listed["run-a"].namespace.HasField("span_retention")


def test_resources_and_workers_are_per_namespace(client: Client, runs: dict[str, Client]) -> None:
    a, b = runs["run-a"], runs["run-b"]
    a.add_resources({"model": "a"})
    b.add_resources({"model": "b"})
    latest_a, latest_b = a.get_latest_resources(), b.get_latest_resources()
    assert latest_a is not None
    assert latest_b is not None
    assert (from_json(latest_a.resources_json), from_json(latest_b.resources_json)) == ({"model": "a"}, {"model": "b"})
    assert client.get_latest_resources() is None
    a.update_worker("worker-1")
    assert a.get_worker("worker-1").worker_id == "worker-1"
    with pytest.raises(NotFound):
        b.get_worker("worker-1")


def test_streams_carry_the_namespace(runs: dict[str, Client]) -> None:
    a, b = runs["run-a"], runs["run-b"]
    with b.events(kinds=["rollout_created"]) as events_b:
        in_a = a.enqueue_rollout("a")
        in_b = b.enqueue_rollout("b")
        assert next(events_b).rollout_id == in_b.rollout_id  # run-a's creation, made first, never came
    # run-a's rollout is unknown in run-b: the watch there skips it and ends at once
    assert list(b.watch_completions([in_a.rollout_id], timeout=WAIT)) == []
    a.update_rollout(in_a.rollout_id, status="succeeded")
    with a.watch_completions([in_a.rollout_id], timeout=WAIT) as watch:
        done = next(watch)
    assert (done.rollout_id, ROLLOUT_STATUS.name(done.status)) == (in_a.rollout_id, "succeeded")


def test_a_worker_session_is_assigned_its_namespaces_rollouts_only(runs: dict[str, Client]) -> None:
    a, b = runs["run-a"], runs["run-b"]
    in_b = b.enqueue_rollout("b")
    in_a = a.enqueue_rollout("a")
    with a.worker_session("worker-a", slots=2) as session:
        assignment = session.next_assignment(WAIT)
        assert assignment is not None
        assert assignment.rollout_id == in_a.rollout_id
        assert session.next_assignment(0.2) is None  # run-b's rollout, queued first, is not offered
    assert ROLLOUT_STATUS.name(b.get_rollout(in_b.rollout_id).status) == "queuing"
    assert a.get_worker("worker-a").worker_id == "worker-a"
    with pytest.raises(NotFound):
        b.get_worker("worker-a")


async def test_the_asyncio_client_takes_the_namespace_too(server: LocalServer, runs: dict[str, Client]) -> None:
    async with (
        AsyncClient(server.address, namespace="run-a") as a,
        AsyncClient(server.address, namespace="run-b") as b,
    ):
        queued = await a.enqueue_rollout("a")
        assert await b.dequeue_rollout() is None
        events = await b.events(kinds=["rollout_created"])
        mine = await b.enqueue_rollout("b")
        await a.enqueue_rollout("a again")
        assert (await events.__anext__()).rollout_id == mine.rollout_id
        events.close()
        async with a.worker_session("worker-a") as session:
            assignment = await session.next_assignment(WAIT)
            assert assignment is not None
            assert assignment.rollout_id == queued.rollout_id
    assert runs["run-a"].get_statistics().total_rollouts == 2


def test_namespaces_are_managed_by_the_admin_api(server: LocalServer, client: Client) -> None:
    with Client(server.address, namespace="missing") as missing, pytest.raises(NotFound, match="missing"):
        missing.get_statistics()  # a typo does not start a new queue
    created = client.create_namespace("run-c")
    assert created.name == "run-c"
    with pytest.raises(AlreadyExists):
        client.create_namespace("run-c")
    with pytest.raises(InvalidArgument):
        client.create_namespace("Run_C")
    with Client(server.address, namespace="run-c") as run_c:
        run_c.enqueue_rollout("c")
        assert client.delete_namespace("run-c").name == "run-c"
        with pytest.raises(NotFound):
            run_c.query_rollouts()
    with pytest.raises(FailedPrecondition):
        client.delete_namespace("default")
    assert [s.namespace.name for s in client.list_namespaces()] == ["default"]


def test_create_namespaces_on_first_use() -> None:
    with (
        LocalServer("memory", args=["--create-namespaces"]) as server,
        Client(server.address, namespace="run-x") as run_x,
        Client(server.address) as default,
    ):
        run_x.enqueue_rollout("x")
        assert [s.namespace.name for s in default.list_namespaces()] == ["default", "run-x"]
        assert default.query_rollouts().total == 0


def test_the_namespace_is_an_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIGHTNING_STORE_SERVER", "store.example:4747")
    monkeypatch.setenv("LIGHTNING_STORE_TOKEN", "s3cret")
    monkeypatch.setenv("LIGHTNING_STORE_NAMESPACE", "run-a")
    options = ConnectionOptions.from_env(metadata=(("x-team", "rl"),))
    assert options.namespace == "run-a"
    assert options.call_metadata() == (
        ("authorization", "Bearer s3cret"),
        ("lightning-store-namespace", "run-a"),
        ("x-team", "rl"),
    )
    assert options.namespace_url == "http://store.example:4747/ns/run-a"
    assert pickle.loads(pickle.dumps(options)) == options
    assert ConnectionOptions.from_env(namespace=None).call_metadata() == (("authorization", "Bearer s3cret"),)
    assert ConnectionOptions("https://h:3").namespace_url == "https://h:3"
    client = Client("127.0.0.1:1", namespace="run-b")
    assert ("lightning-store-namespace", "run-b") in client.metadata
    assert pickle.loads(pickle.dumps(client)).options.namespace == "run-b"
    client.close()
    for bad in ("Run-A", "-a", "a-", "", "a" * 64, "a_b", "a/b"):
        with pytest.raises(ValueError, match="not a namespace name"):
            ConnectionOptions(namespace=bad)
    assert ConnectionOptions(namespace="a" * 63).namespace == "a" * 63


def test_a_namespace_quota_refuses_what_would_exceed_it(server: LocalServer, client: Client) -> None:
    created = client.create_namespace("run-q", max_queued_rollouts=1)
    assert created.quotas.max_queued_rollouts == 1
    with Client(server.address, namespace="run-q") as run_q:
        run_q.enqueue_rollout("first")
        with pytest.raises(ResourceExhausted, match="max_queued_rollouts"):
            run_q.enqueue_rollout("second")
        assert run_q.get_statistics().total_rollouts == 1
        assert run_q.dequeue_rollout() is not None
        run_q.enqueue_rollout("second")  # the dequeue made room
    client.enqueue_rollout("default has no quota")
    client.enqueue_rollout("so a second one is taken")
