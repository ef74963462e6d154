"""Worker sessions: pushed assignments within the slots, heartbeats, revocations, reconnection."""

from __future__ import annotations

import asyncio
import threading

import pytest

from lightning_store import Aborted, Assignment, AsyncClient, AttemptRevoked, Client, FailedPrecondition
from lightning_store.local_server import LocalServer
from lightning_store.values import ROLLOUT_STATUS, WORKER_STATUS, from_json

WAIT = 20.0  # bound of every wait for something the server pushes


def next_assignment(session: object) -> Assignment:
    assignment = session.next_assignment(WAIT)  # type: ignore[attr-defined]
    assert assignment is not None, "no assignment arrived"
    return assignment  # type: ignore[no-any-return]


def test_assignments_are_pushed_into_free_slots_only(client: Client) -> None:
    ids = [client.enqueue_rollout(i).rollout_id for i in range(3)]
    with client.worker_session("Worker-S", slots=2) as session:
        first, second = next_assignment(session), next_assignment(session)
        assert [first.rollout_id, second.rollout_id] == ids[:2]
        assert first.rollout.attempt.worker_id == "Worker-S"
        # both slots are held: the third stays queued until one is released
        assert ROLLOUT_STATUS.name(client.get_rollout(ids[2]).status) == "queuing"
        assert WORKER_STATUS.name(client.get_worker("Worker-S").status) == "busy"
        with first:  # leaving the block releases the slot
            client.update_attempt(first.rollout_id, first.attempt_id, status="succeeded", owner_epoch=first.owner_epoch)
        assert next_assignment(session).rollout_id == ids[2]
        assert {a.rollout_id for a in session.held} == {ids[1], ids[2]}
    # a clean close holding unfinished attempts: busy (they wait for the worker), not lost
    assert WORKER_STATUS.name(client.get_worker("Worker-S").status) == "busy"


def test_heartbeats_carry_the_worker_statistics(client: Client) -> None:
    events = client.events(kinds=["worker_changed"])
    with client.worker_session("Worker-H", heartbeat_interval=0.05, heartbeat_stats=lambda: {"cpu": 0.25}):
        for _, _ in zip(range(50), events, strict=False):
            if from_json(client.get_worker("Worker-H").heartbeat_stats_json) == {"cpu": 0.25}:
                break
        else:
            pytest.fail("no heartbeat with statistics reached the server")
    events.close()


def test_a_cancelled_rollout_is_revoked_by_callback_and_exception(client: Client) -> None:
    revoked = threading.Event()
    seen: list[Assignment] = []

    def on_revoked(assignment: Assignment) -> None:
        seen.append(assignment)
        revoked.set()

    with client.worker_session("Worker-R", on_revoked=on_revoked) as session:
        rollout = client.enqueue_rollout("cancel me")
        assignment = next_assignment(session)
        assignment.check()  # not revoked yet
        client.update_rollout(rollout.rollout_id, status="cancelled")
        assert revoked.wait(WAIT)
        assert seen == [assignment]
        assert assignment.revoked
        with pytest.raises(AttemptRevoked) as stop:
            assignment.check()
        assert (stop.value.rollout_id, stop.value.reason) == (rollout.rollout_id, "cancelled")
        assignment.release()
        assert session.held == []


def test_a_newer_session_of_the_same_worker_aborts_the_older(client: Client) -> None:
    older = client.worker_session("Worker-A")
    with client.worker_session("Worker-A"), pytest.raises(Aborted):
        older.next_assignment(WAIT)
    older.close()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_session_reconnects_after_a_restart_and_keeps_its_assignments(server: LocalServer) -> None:
    with Client(server.address) as client, client.worker_session("Worker-X", slots=2) as session:
        before = client.enqueue_rollout("before")
        held = next_assignment(session)
        assert held.rollout_id == before.rollout_id
        server.restart()
        after = client.enqueue_rollout("after")
        assert next_assignment(session).rollout_id == after.rollout_id  # pushed over the new connection
        assert held in session.held


async def test_async_sessions_receive_release_and_see_revocations(server: LocalServer) -> None:
    revoked = asyncio.Event()
    async with AsyncClient(server.address) as client:
        session = client.worker_session("Worker-Y", on_revoked=lambda _: revoked.set())
        async with session:
            first = await client.enqueue_rollout("one")
            assignment = await session.next_assignment(WAIT)
            assert assignment is not None
            assert assignment.rollout_id == first.rollout_id
            await client.update_rollout(first.rollout_id, status="cancelled")
            await asyncio.wait_for(revoked.wait(), WAIT)
            assert assignment.revocation == "cancelled"
            assignment.release()
            second = await client.enqueue_rollout("two")
            async for pushed in session:
                assert pushed.rollout_id == second.rollout_id
                with pushed:
                    await client.update_attempt(
                        pushed.rollout_id, pushed.attempt_id, status="succeeded", owner_epoch=pushed.owner_epoch
                    )
                break
        worker = await client.get_worker("Worker-Y")
        assert WORKER_STATUS.name(worker.status) == "idle"  # a clean close holding nothing


def test_a_newer_session_takes_up_the_attempts_and_fences_the_older_epoch(client: Client) -> None:
    rollout = client.enqueue_rollout("moved")
    older = client.worker_session("Worker-M")
    first = next_assignment(older)
    client.update_attempt(rollout.rollout_id, first.attempt_id, status="running", owner_epoch=first.owner_epoch)
    with client.worker_session("Worker-M") as newer:
        # the newer session adopted the running attempt this session object never held: it runs it
        adopted = next_assignment(newer)
        assert (adopted.rollout_id, adopted.attempt_id, adopted.adopted) == (rollout.rollout_id, first.attempt_id, True)
        assert ROLLOUT_STATUS.name(adopted.rollout.status) == "running"
        assert adopted.owner_epoch > first.owner_epoch
        with pytest.raises(Aborted):
            older.next_assignment(WAIT)
        with pytest.raises(FailedPrecondition, match="now has owner_epoch"):
            client.update_attempt(rollout.rollout_id, first.attempt_id, status="failed", owner_epoch=first.owner_epoch)
        with adopted:
            client.update_attempt(
                rollout.rollout_id, first.attempt_id, status="succeeded", owner_epoch=adopted.owner_epoch
            )
    older.close()
    assert ROLLOUT_STATUS.name(client.get_rollout(rollout.rollout_id).status) == "succeeded"


@pytest.mark.parametrize("backend", ["sqlite"])
def test_after_a_crash_held_live_attempts_move_to_the_new_epoch_and_finished_ones_are_revoked(
    server: LocalServer,
) -> None:
    revoked: list[Assignment] = []
    with Client(server.address) as client:
        session = client.worker_session("Worker-K", slots=2, on_revoked=revoked.append)
        with session:
            ids = [client.enqueue_rollout(name).rollout_id for name in ("live", "finished")]
            live, finished = sorted((next_assignment(session) for _ in ids), key=lambda a: ids.index(a.rollout_id))
            epoch = live.owner_epoch
            # `finished` succeeded, but the server died before the runner released its slot
            client.update_attempt(finished.rollout_id, finished.attempt_id, status="succeeded", owner_epoch=epoch)
            server.kill()
            server.start()
            after = client.enqueue_rollout("after")
            # the freed slot gets new work: the finished attempt was not adopted
            assert next_assignment(session).rollout_id == after.rollout_id
            assert live.owner_epoch > epoch
            assert not live.revoked
            assert (revoked, finished.revocation) == ([finished], "not adopted")
            with pytest.raises(FailedPrecondition):
                client.update_attempt(live.rollout_id, live.attempt_id, status="running", owner_epoch=epoch)
            client.update_attempt(live.rollout_id, live.attempt_id, status="succeeded", owner_epoch=live.owner_epoch)
        assert ROLLOUT_STATUS.name(client.get_rollout(ids[0]).status) == "succeeded"


async def test_async_sessions_take_up_adopted_attempts(server: LocalServer) -> None:
    async with AsyncClient(server.address) as client:
        rollout = await client.enqueue_rollout("adopted")
        older = await client.worker_session("Worker-Z").open()
        first = await older.next_assignment(WAIT)
        assert first is not None
        async with client.worker_session("Worker-Z") as newer:
            adopted = await newer.next_assignment(WAIT)
            assert adopted is not None
            assert (adopted.attempt_id, adopted.adopted) == (first.attempt_id, True)
            with pytest.raises(FailedPrecondition):
                await client.update_attempt(
                    rollout.rollout_id, first.attempt_id, status="running", owner_epoch=first.owner_epoch
                )
            with adopted:
                await client.update_attempt(
                    rollout.rollout_id, adopted.attempt_id, status="succeeded", owner_epoch=adopted.owner_epoch
                )
        await older.close()
        finished = await client.get_rollout(rollout.rollout_id)
        assert ROLLOUT_STATUS.name(finished.status) == "succeeded"
