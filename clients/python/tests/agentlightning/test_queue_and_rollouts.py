"""agent-lightning's LightningStore contract over gRPC: rollouts, the queue, attempts, workers, resources.

The expectations are agent-lightning 0.3.0's (its InMemoryLightningStore and
its own store tests): return values, None and empty pages where upstream
answers them, ValueError where it raises.
"""

from __future__ import annotations

import asyncio
import inspect
import warnings

import pytest
from agentlightning.store.base import UNSET
from agentlightning.store.base import LightningStore as UpstreamStore
from agentlightning.types import (
    LLM,
    AttemptedRollout,
    EnqueueRolloutRequest,
    PaginatedResult,
    PromptTemplate,
    ResourcesUpdate,
    Rollout,
    RolloutConfig,
)

from lightning_store.agentlightning import LightningStore


def test_every_method_of_the_interface_is_implemented_with_its_signature() -> None:
    public = [name for name in vars(UpstreamStore) if not name.startswith("_")]
    assert len(public) == 30
    for name in public:
        ours, theirs = inspect.getattr_static(LightningStore, name), inspect.getattr_static(UpstreamStore, name)
        assert ours is not theirs, f"{name} is inherited, not implemented"
        if callable(theirs):
            assert list(inspect.signature(ours).parameters) == list(inspect.signature(theirs).parameters), name


async def test_enqueue_creates_a_queued_rollout_without_attempt(store: LightningStore) -> None:
    config = RolloutConfig(timeout_seconds=12.0, max_attempts=3, retry_condition=["timeout"])
    rollout = await store.enqueue_rollout(
        input={"q": "2+2"}, mode="train", resources_id="rs-123", config=config, metadata={"k": 1}
    )
    assert type(rollout) is Rollout
    assert rollout.rollout_id.startswith("ro-")
    assert (rollout.input, rollout.mode, rollout.resources_id, rollout.status) == (
        {"q": "2+2"},
        "train",
        "rs-123",
        "queuing",
    )
    assert (rollout.metadata, rollout.config, rollout.end_time) == ({"k": 1}, config, None)
    stored = await store.get_rollout_by_id(rollout.rollout_id)
    assert stored == rollout
    default = await store.enqueue_rollout(input=None)
    assert (default.config, default.metadata, default.mode) == (RolloutConfig(), {}, None)


async def test_start_rollout_creates_its_first_attempt_and_a_busy_worker(store: LightningStore) -> None:
    attempted = await store.start_rollout(input="direct", config=RolloutConfig(max_attempts=2), worker_id="worker-d")
    assert isinstance(attempted, AttemptedRollout)
    assert (attempted.status, attempted.attempt.status, attempted.attempt.sequence_id) == ("preparing", "preparing", 1)
    assert (attempted.config.max_attempts, attempted.attempt.worker_id) == (2, "worker-d")
    worker = await store.get_worker_by_id("worker-d")
    assert worker is not None
    assert (worker.status, worker.current_rollout_id, worker.current_attempt_id) == (
        "busy",
        attempted.rollout_id,
        attempted.attempt.attempt_id,
    )
    assert await store.dequeue_rollout() is None  # start_rollout bypasses the queue


async def test_enqueue_many_preserves_order(store: LightningStore) -> None:
    assert await store.enqueue_many_rollouts([]) == []
    requests = [EnqueueRolloutRequest(input=i, mode="val", metadata={"i": i}) for i in range(3)]
    rollouts = await store.enqueue_many_rollouts(requests)
    assert [(r.input, r.mode, r.metadata) for r in rollouts] == [
        (0, "val", {"i": 0}),
        (1, "val", {"i": 1}),
        (2, "val", {"i": 2}),
    ]
    claimed = await store.dequeue_many_rollouts(limit=2, worker_id="w")
    assert [r.rollout_id for r in claimed] == [r.rollout_id for r in rollouts[:2]]
    assert await store.dequeue_many_rollouts(limit=0) == []


async def test_dequeue_is_fifo_claims_an_attempt_and_tracks_the_worker(store: LightningStore) -> None:
    first, second = await store.enqueue_rollout(input=1), await store.enqueue_rollout(input=2)
    claimed = await store.dequeue_rollout(worker_id="worker-q")
    assert isinstance(claimed, AttemptedRollout)
    assert (claimed.rollout_id, claimed.status) == (first.rollout_id, "preparing")
    assert (claimed.attempt.sequence_id, claimed.attempt.worker_id, claimed.attempt.status) == (
        1,
        "worker-q",
        "preparing",
    )
    busy = await store.get_worker_by_id("worker-q")
    assert busy is not None
    assert (busy.status, busy.current_rollout_id) == ("busy", first.rollout_id)
    assert busy.last_dequeue_time is not None
    assert (await store.dequeue_rollout()).rollout_id == second.rollout_id  # type: ignore[union-attr]
    assert await store.dequeue_rollout(worker_id="worker-q") is None
    idle = await store.get_worker_by_id("worker-q")
    assert idle is not None
    assert idle.status == "idle"  # an empty poll makes a worker idle


async def test_dequeue_skips_rollouts_taken_out_of_the_queue_and_requeuing_puts_them_back(
    store: LightningStore,
) -> None:
    skipped, kept = await store.enqueue_rollout(input="skip"), await store.enqueue_rollout(input="keep")
    await store.update_rollout(skipped.rollout_id, status="cancelled")
    claimed = await store.dequeue_rollout()
    assert claimed is not None
    assert claimed.rollout_id == kept.rollout_id
    await store.update_rollout(kept.rollout_id, status="requeuing")
    await store.update_rollout(kept.rollout_id, status="queuing")  # queued once, not twice
    again = await store.dequeue_rollout()
    assert again is not None
    assert (again.rollout_id, again.attempt.sequence_id) == (kept.rollout_id, 2)
    assert await store.dequeue_rollout() is None


async def test_concurrent_dequeues_never_claim_a_rollout_twice(store: LightningStore) -> None:
    queued = {
        r.rollout_id for r in await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(5)])
    }
    claims = await asyncio.gather(*(store.dequeue_rollout(worker_id=f"w{i}") for i in range(10)))
    claimed = [c.rollout_id for c in claims if c is not None]
    assert sorted(claimed) == sorted(queued)


async def test_start_attempt_ignores_max_attempts_and_needs_a_known_rollout(store: LightningStore) -> None:
    rollout = await store.start_rollout(input="x", config=RolloutConfig(max_attempts=1))
    await store.update_attempt(rollout.rollout_id, "latest", status="succeeded")
    retry = await store.start_attempt(rollout.rollout_id, worker_id="w2")
    assert (retry.attempt.sequence_id, retry.status, retry.attempt.worker_id) == (2, "preparing", "w2")
    with pytest.raises(ValueError, match="not found"):
        await store.start_attempt("ro-000000000000")


async def test_rollouts_default_to_the_latest_resources(store: LightningStore) -> None:
    assert (await store.enqueue_rollout(input=0)).resources_id is None
    first = await store.add_resources({"llm": LLM(endpoint="http://127.0.0.1:1/v1", model="a")})
    assert (await store.enqueue_rollout(input=1)).resources_id == first.resources_id
    second = await store.update_resources("fixed", {"p": PromptTemplate(template="{x}", engine="f-string")})
    started = await store.start_rollout(input=2)
    assert started.resources_id == second.resources_id == "fixed"


async def test_query_rollouts_filters_sorts_pages_and_attaches_attempts(store: LightningStore) -> None:
    rollouts = [await store.enqueue_rollout(input={"idx": i}) for i in range(4)]
    ids = [r.rollout_id for r in rollouts]
    await store.update_rollout(ids[0], status="failed")
    await store.update_rollout(ids[3], status="failed")
    claimed = await store.dequeue_rollout()
    assert claimed is not None

    failed = await store.query_rollouts(status_in=["failed"])
    assert isinstance(failed, PaginatedResult)
    assert [r.rollout_id for r in failed] == [ids[0], ids[3]]
    running = await store.query_rollouts(status_in=["preparing"])
    assert [type(r) for r in running] == [AttemptedRollout]  # the latest attempt comes along
    substring = ids[2][-5:]
    assert len(await store.query_rollouts(status_in=["failed"], rollout_id_contains=substring)) == 0
    either = await store.query_rollouts(
        status_in=["failed"], rollout_id_contains=substring, filter_logic="or", sort_by="rollout_id", limit=2, offset=1
    )
    assert [r.rollout_id for r in either] == sorted([ids[0], ids[2], ids[3]])[1:3]
    assert (either.limit, either.offset, either.total) == (2, 1, 3)
    assert [r.rollout_id for r in await store.query_rollouts(rollout_id_in=[ids[2], ids[1]])] == [ids[1], ids[2]]
    everything = await store.query_rollouts(filter_logic="or")
    assert everything.total == 4  # no condition at all: everything, whatever the logic


async def test_query_rollouts_deprecated_aliases_and_precedence(store: LightningStore) -> None:
    done = await store.enqueue_rollout(input=1)
    await store.update_rollout(done.rollout_id, status="succeeded")
    other = await store.enqueue_rollout(input=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [r.rollout_id for r in await store.query_rollouts(status=["succeeded"])] == [done.rollout_id]
        assert [r.rollout_id for r in await store.query_rollouts(rollout_ids=[other.rollout_id])] == [other.rollout_id]
    assert [w.category for w in caught] == [DeprecationWarning, DeprecationWarning]
    assert [r.rollout_id for r in await store.query_rollouts(status_in=["queuing"], status=["succeeded"])] == [
        other.rollout_id
    ]


async def test_empty_filter_lists_and_zero_limits_follow_upstream(store: LightningStore) -> None:
    rollouts = [await store.enqueue_rollout(input=i) for i in range(3)]
    assert (await store.query_rollouts(status_in=[])).total == 0  # a condition nothing meets
    assert (await store.query_rollouts(status_in=[], filter_logic="or")).total == 0
    keep = rollouts[1].rollout_id
    or_contains = await store.query_rollouts(status_in=[], rollout_id_contains=keep, filter_logic="or")
    assert [r.rollout_id for r in or_contains] == [keep]
    counted = await store.query_rollouts(limit=0)
    assert (list(counted), counted.limit, counted.total) == ([], 0, 3)
    await store.update_worker("w1")
    assert (await store.query_workers(status_in=[])).total == 0
    assert (await store.query_workers(status_in=[], worker_id_contains="w", filter_logic="or")).total == 1


async def test_attempts_are_listed_sorted_and_paged(store: LightningStore) -> None:
    rollout = await store.start_rollout(input="x")
    for _ in range(2):
        await store.start_attempt(rollout.rollout_id)
    attempts = await store.query_attempts(rollout.rollout_id)
    assert [a.sequence_id for a in attempts] == [1, 2, 3]
    newest = await store.query_attempts(rollout.rollout_id, sort_by="sequence_id", sort_order="desc", limit=2)
    assert ([a.sequence_id for a in newest], newest.total, newest.limit) == ([3, 2], 3, 2)
    assert list(await store.query_attempts(rollout.rollout_id, offset=5)) == []
    zero = await store.query_attempts(rollout.rollout_id, limit=0)
    assert (list(zero), zero.total) == ([], 3)
    latest = await store.get_latest_attempt(rollout.rollout_id)
    assert latest is not None
    assert latest.sequence_id == 3
    unknown = await store.query_attempts("ro-000000000000")
    assert (list(unknown), unknown.total) == ([], 0)  # upstream: empty, no error
    assert await store.get_latest_attempt("ro-000000000000") is None
    assert await store.get_latest_attempt((await store.enqueue_rollout(input=1)).rollout_id) is None
    assert await store.get_rollout_by_id("ro-000000000000") is None


async def test_update_rollout_keeps_unset_fields_and_writes_none(store: LightningStore) -> None:
    rollout = await store.enqueue_rollout(input={"a": 1}, mode="train", resources_id="rs-1", metadata={"m": 1})
    updated = await store.update_rollout(rollout.rollout_id, mode=None, resources_id=UNSET, metadata=None)
    assert (updated.input, updated.mode, updated.resources_id, updated.metadata) == ({"a": 1}, None, "rs-1", None)
    assert type(updated) is Rollout
    config = RolloutConfig(unresponsive_seconds=5.0, max_attempts=4, retry_condition=["unresponsive", "failed"])
    changed = await store.update_rollout(rollout.rollout_id, input=None, config=config, status="succeeded")
    assert (changed.input, changed.config, changed.status) == (None, config, "succeeded")
    assert changed.end_time is not None  # a terminal status stamps the end
    with pytest.raises(ValueError, match=r"Item.*does not exist"):  # upstream's message
        await store.update_rollout("ro-000000000000", status="cancelled")


async def test_update_attempt_drives_the_rollout_and_the_worker(store: LightningStore) -> None:
    attempted = await store.start_rollout(input="x", worker_id="worker-u")
    await store.update_worker("worker-u", heartbeat_stats={"cpu": 0.42})
    attempt = await store.update_attempt(
        attempted.rollout_id, "latest", metadata={"note": 1}, last_heartbeat_time=1_700_000_000.5
    )
    assert (attempt.metadata, attempt.last_heartbeat_time, attempt.status) == (
        {"note": 1},
        1_700_000_000.5,
        "preparing",
    )
    done = await store.update_attempt(attempted.rollout_id, attempted.attempt.attempt_id, status="succeeded")
    assert done.end_time is not None
    rollout = await store.get_rollout_by_id(attempted.rollout_id)
    assert rollout is not None
    assert (rollout.status, rollout.end_time is not None) == ("succeeded", True)
    worker = await store.get_worker_by_id("worker-u")
    assert worker is not None
    assert (worker.status, worker.current_rollout_id, worker.heartbeat_stats) == ("idle", None, {"cpu": 0.42})
    with pytest.raises(ValueError, match="not found"):
        await store.update_attempt("ro-000000000000", "latest", status="failed")
    with pytest.raises(ValueError, match="not found"):
        await store.update_attempt(attempted.rollout_id, "at-00000000", status="failed")
    queued = await store.enqueue_rollout(input=1)
    with pytest.raises(ValueError, match="No attempts"):
        await store.update_attempt(queued.rollout_id, "latest", status="failed")


async def test_retries_requeue_until_max_attempts_and_only_the_latest_attempt_counts(store: LightningStore) -> None:
    config = RolloutConfig(max_attempts=2, retry_condition=["failed"])
    rollout = await store.enqueue_rollout(input="retry", config=config)
    first = await store.dequeue_rollout()
    assert first is not None
    await store.update_attempt(rollout.rollout_id, first.attempt.attempt_id, status="failed")
    requeued = await store.get_rollout_by_id(rollout.rollout_id)
    assert requeued is not None
    assert requeued.status == "requeuing"
    second = await store.dequeue_rollout()
    assert second is not None
    assert (second.rollout_id, second.attempt.sequence_id) == (rollout.rollout_id, 2)
    # the older attempt no longer drives the rollout
    await store.update_attempt(rollout.rollout_id, first.attempt.attempt_id, status="succeeded")
    assert (await store.get_rollout_by_id(rollout.rollout_id)).status == "preparing"  # type: ignore[union-attr]
    await store.update_attempt(rollout.rollout_id, "latest", status="failed")
    assert (await store.get_rollout_by_id(rollout.rollout_id)).status == "failed"  # type: ignore[union-attr]
    assert [a.status for a in await store.query_attempts(rollout.rollout_id)] == ["succeeded", "failed"]


async def test_workers_heartbeat_list_and_sync(store: LightningStore) -> None:
    created = await store.update_worker("worker-1", heartbeat_stats={"cpu": 0.5})
    assert (created.status, created.heartbeat_stats) == ("unknown", {"cpu": 0.5})
    assert created.last_heartbeat_time is not None
    kept = await store.update_worker("worker-1")
    assert kept.heartbeat_stats == {"cpu": 0.5}  # UNSET keeps the statistics
    with pytest.raises(TypeError):
        await store.update_worker("worker-1", heartbeat_stats=None)  # type: ignore[arg-type]
    await store.dequeue_rollout(worker_id="worker-2")  # empty queue: idle
    await store.start_rollout(input=1, worker_id="worker-3")
    assert [w.worker_id for w in await store.query_workers(status_in=["busy"])] == ["worker-3"]
    either = await store.query_workers(
        status_in=["idle"], worker_id_contains="-1", filter_logic="or", sort_by="worker_id"
    )
    assert [w.worker_id for w in either] == ["worker-1", "worker-2"]
    page = await store.query_workers(sort_by="worker_id", sort_order="desc", limit=1, offset=1)
    assert ([w.worker_id for w in page], page.total) == (["worker-2"], 3)
    assert await store.get_worker_by_id("nobody") is None


async def test_resources_are_versioned_snapshots(store: LightningStore) -> None:
    assert await store.get_latest_resources() is None
    llm = LLM(endpoint="http://127.0.0.1:1/v1", model="m", sampling_parameters={"temperature": 0.7})
    added = await store.add_resources({"main_llm": llm})
    assert isinstance(added, ResourcesUpdate)
    assert (added.resources_id.startswith("rs-"), added.version, added.resources) == (True, 1, {"main_llm": llm})
    assert added.create_time == added.update_time
    updated = await store.update_resources(added.resources_id, {"main_llm": llm.model_copy(update={"model": "m2"})})
    assert (updated.version, updated.create_time, updated.update_time > added.update_time) == (
        2,
        added.create_time,
        True,
    )
    upserted = await store.update_resources("my-id", {"prompt": PromptTemplate(template="{q}", engine="f-string")})
    assert (upserted.resources_id, upserted.version) == ("my-id", 1)
    latest = await store.get_latest_resources()
    assert latest is not None
    assert latest.resources_id == "my-id"
    fetched = await store.get_resources_by_id(added.resources_id)
    assert fetched is not None
    assert fetched.resources["main_llm"].model == "m2"  # type: ignore[union-attr]
    assert await store.get_resources_by_id("rs-000000000000") is None
    assert [r.resources_id for r in await store.query_resources()] == [added.resources_id, "my-id"]
    assert [r.resources_id for r in await store.query_resources(resources_id_contains="my")] == ["my-id"]
    page = await store.query_resources(sort_by="version", sort_order="desc", limit=1)
    assert ([r.version for r in page], page.total) == ([2], 2)
    assert list(await store.query_resources(resources_id="my-id", resources_id_contains="zzz")) == []
