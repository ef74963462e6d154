"""Completion watches and event subscriptions: delivery, filters, and resumption across server restarts."""

from __future__ import annotations

import threading

import pytest

from lightning_store import AsyncClient, Client, OutOfRange
from lightning_store.local_server import LocalServer
from lightning_store.proto import types_pb2 as types
from lightning_store.values import EVENT_KIND, ROLLOUT_STATUS


def finish(client: Client, rollout_id: str, status: str = "succeeded") -> None:
    client.update_rollout(rollout_id, status=status)  # type: ignore[arg-type]


def test_completions_come_finished_first_then_live_and_the_watch_ends(client: Client) -> None:
    done, pending, unknown = client.enqueue_rollout(1), client.enqueue_rollout(2), "ro-000000000000"
    finish(client, done.rollout_id, "failed")
    with client.watch_completions([pending.rollout_id, done.rollout_id, unknown]) as watch:
        first = next(watch)
        assert (first.rollout_id, ROLLOUT_STATUS.name(first.status)) == (done.rollout_id, "failed")
        finish(client, pending.rollout_id)
        assert [r.rollout_id for r in watch] == [pending.rollout_id]  # then the stream ends: the unknown id is skipped
    assert watch.state.pending == {unknown: None}


def test_a_completion_watch_ends_at_its_timeout(client: Client) -> None:
    rollout = client.enqueue_rollout(1)
    assert list(client.watch_completions([rollout.rollout_id], timeout=0.3)) == []


def test_events_start_now_filter_and_resume_after_a_cursor(client: Client) -> None:
    client.enqueue_rollout("before")  # not delivered: the subscription starts after it
    events = client.events(kinds=["rollout_created", "rollout_changed"])
    rollout = client.enqueue_rollout("after")
    finish(client, rollout.rollout_id, "cancelled")
    created, changed = next(events), next(events)
    assert [EVENT_KIND.name(e.kind) for e in (created, changed)] == ["rollout_created", "rollout_changed"]
    assert (created.rollout_id, changed.rollout_status) == (rollout.rollout_id, types.ROLLOUT_STATUS_CANCELLED)
    assert changed.seq > created.seq
    assert events.state.cursor == changed.seq
    assert events.state.progress is not None
    assert events.state.progress.latest_seq < created.seq
    events.close()

    # a new subscription after the first event's cursor gets exactly the second again
    with client.events(after=created.seq, rollout_ids=[rollout.rollout_id], kinds=["rollout_changed"]) as again:
        assert next(again).seq == changed.seq


def test_closing_a_stream_from_another_thread_ends_a_blocked_iteration(client: Client) -> None:
    events = client.events()
    seen: list[types.Event] = []
    reader = threading.Thread(target=lambda: seen.extend(events))
    reader.start()
    client.enqueue_rollout("one")
    events.close()
    reader.join(10)
    assert not reader.is_alive()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_events_and_completions_resume_across_a_restart_without_gaps_or_duplicates(server: LocalServer) -> None:
    with Client(server.address) as client:
        rollouts = [client.enqueue_rollout(i).rollout_id for i in range(4)]
        events = client.events(kinds=["rollout_changed"])
        watch = client.watch_completions(rollouts)
        finish(client, rollouts[0])
        assert next(events).rollout_id == rollouts[0]
        assert next(watch).rollout_id == rollouts[0]

        server.stop()  # both streams drop (UNAVAILABLE) and reconnect
        server.start()
        for rollout_id in rollouts[1:]:
            finish(client, rollout_id)
        assert [next(events).rollout_id for _ in rollouts[1:]] == rollouts[1:]
        assert [r.rollout_id for r in watch] == rollouts[1:]
        events.close()


@pytest.mark.parametrize("backend", ["memory"])
def test_a_cursor_the_server_no_longer_has_raises_out_of_range(server: LocalServer, client: Client) -> None:
    client.enqueue_rollout(1)
    events = client.events(after=0)
    assert EVENT_KIND.name(next(events).kind) == "rollout_created"
    server.restart()  # a memory store forgets its history: the cursor is now in the future
    with pytest.raises(OutOfRange):
        next(events)


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_async_streams_resume_across_a_restart(server: LocalServer) -> None:
    async with AsyncClient(server.address) as client:
        rollouts = [(await client.enqueue_rollout(i)).rollout_id for i in range(3)]
        events = await client.events(kinds=["rollout_changed"], rollout_status_in=["succeeded"])
        await client.update_rollout(rollouts[0], status="succeeded")
        assert (await anext(events)).rollout_id == rollouts[0]
        server.restart()
        await client.update_rollout(rollouts[1], status="cancelled")  # filtered out by status
        await client.update_rollout(rollouts[2], status="succeeded")
        assert (await anext(events)).rollout_id == rollouts[2]
        events.close()
        async with client.watch_completions(rollouts) as watch:
            assert [r.rollout_id async for r in watch] == [rollouts[0], rollouts[1], rollouts[2]]
