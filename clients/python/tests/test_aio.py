"""The asyncio client: the same API as the sync one, on its event loop."""

from __future__ import annotations

import asyncio
import inspect
import pickle

import pytest

from lightning_store import AsyncClient, Client, NotFound, calls, rollout_spec, to_attributes
from lightning_store.local_server import LocalServer
from lightning_store.proto import types_pb2 as types
from lightning_store.values import ROLLOUT_STATUS, from_json

UNARY = [
    name
    for name, function in inspect.getmembers(calls, inspect.isfunction)
    if function.__module__ == calls.__name__
    and not name.startswith("_")
    and inspect.signature(function).return_annotation.startswith("Call[")
]


def test_both_clients_offer_every_unary_call_with_its_signature() -> None:
    assert len(UNARY) == 35
    for name in UNARY:
        expected = inspect.signature(getattr(calls, name))
        assert inspect.signature(getattr(Client, name)) == expected, name
        assert inspect.signature(getattr(AsyncClient, name)) == expected, name
        assert getattr(Client, name).__doc__ == getattr(calls, name).__doc__


async def test_a_whole_rollout_through_the_async_client(server: LocalServer) -> None:
    async with AsyncClient(server.address) as client:
        queued = await client.enqueue_rollouts([rollout_spec({"q": i}, mode="train") for i in range(2)])
        claimed = await client.dequeue_rollout(worker_id="Worker-0", wait=5.0)
        assert claimed is not None
        assert claimed.rollout_id == queued[0].rollout_id
        spans = [
            types.Span(
                rollout_id=claimed.rollout_id,
                attempt_id=claimed.attempt.attempt_id,
                trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
                span_id=f"00f067aa0ba902b{i}",
                name="agent.step",
                attributes=to_attributes({"step": i}),
            )
            for i in range(3)
        ]
        assert [s.sequence_id for s in await client.add_spans(spans)] == [1, 2, 3]
        await client.update_attempt(claimed.rollout_id, status="succeeded")
        finished = await client.wait_for_rollouts([claimed.rollout_id], timeout=5.0)
        assert [ROLLOUT_STATUS.name(r.status) for r in finished] == ["succeeded"]
        assert (await client.query_spans(claimed.rollout_id)).total == 3
        assert from_json((await client.get_rollout(queued[1].rollout_id)).input_json) == {"q": 1}
        with pytest.raises(NotFound):
            await client.get_worker("nobody")
        # calls run concurrently on one channel
        rollouts = await asyncio.gather(*(client.enqueue_rollout(i) for i in range(20)))
        assert len({r.rollout_id for r in rollouts}) == 20


def test_an_async_client_serves_one_event_loop(server: LocalServer) -> None:
    client = AsyncClient(server.address)
    assert asyncio.run(client.get_statistics()).total_rollouts == 0
    with pytest.raises(RuntimeError, match="one per loop"):
        asyncio.run(client.get_statistics())
    copy = pickle.loads(pickle.dumps(client))  # a copy starts unbound, on the loop that first uses it
    assert asyncio.run(copy.get_statistics()).total_rollouts == 0
