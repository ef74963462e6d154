"""The unary calls of the API, written once for the sync and the asyncio client.

Each function takes Python arguments and returns a `Call`: the RPC's name, its
request message, how to read the answer, and whether the call may be retried.
`Client` and `AsyncClient` expose every function here as a method of the same
name and signature (see `client.py` and `aio.py`), so both clients always
offer the same API.

Results are the generated protobuf messages (`lightning_store.proto.types_pb2`:
`Rollout`, `Attempt`, `Span`, `ResourcesUpdate`, `Worker`); payloads stay JSON
text in their `*_json` fields (`json.loads(rollout.input_json)`), statuses are
enums (`lightning_store.values.ROLLOUT_STATUS.name(rollout.status)` gives
`"succeeded"`).

Queries return a `Page`. Their `limit` is None for every match, or a count;
`limit=0` answers no items and the total. A filter list (`status_in`,
`rollout_id_in`) left at None is no condition, while an empty list is a
condition nothing meets, as agent-lightning's store reads them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar, overload

from google.protobuf.duration_pb2 import Duration
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from lightning_store.proto import store_pb2 as pb
from lightning_store.proto import types_pb2 as types
from lightning_store.values import (
    ATTEMPT_STATUS,
    NO_TRAINING_ROWS_REASON,
    ROLLOUT_MODE,
    ROLLOUT_STATUS,
    TIMELINE_RESOLUTION,
    UNSET,
    WORKER_STATUS,
    AttemptStatusName,
    FilterLogicName,
    NoTrainingRowsReasonName,
    RolloutModeName,
    RolloutStatusName,
    SortOrderName,
    TimelineResolutionName,
    Unset,
    WorkerStatusName,
    to_json,
    to_timestamp,
)

R = TypeVar("R")
T = TypeVar("T")
L = TypeVar("L", bound=Message)
V = TypeVar("V")

LATEST = "latest"
"""Stands for the latest attempt of a rollout where an attempt id is expected."""


@dataclass(frozen=True)
class Call(Generic[R]):
    """One unary RPC, ready to send."""

    method: str
    """The RPC's name in `LightningStoreService`."""
    request: Message
    """The request message."""
    parse: Callable[[Any], R]
    """Reads the result from the response message."""
    safe: bool = False
    """Whether repeating the call cannot write twice, so that it may be retried."""
    wait: float | None = 0.0
    """Seconds the server may legitimately wait before answering, added to the deadline; None: unbounded."""


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a query: the items, the window applied and the number of matches before paging."""

    items: list[T] = field(default_factory=list)
    limit: int = -1
    """The limit applied; -1 for none, 0 when only the total was asked for."""
    offset: int = 0
    total: int = 0
    """Matches before pagination."""

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        return self.items[index]


def _page_of(field_name: str) -> Callable[[Any], Page[Any]]:
    """Reads a Query* response whose list is the field `field_name` (`rollouts`, `spans`, ...)."""

    def read(response: Any) -> Page[Any]:
        return Page(list(getattr(response, field_name)), response.limit, response.offset, response.total)

    return read


def _page(sort_by: str | None, sort_order: SortOrderName, limit: int | None, offset: int) -> pb.PageRequest:
    if sort_order not in ("asc", "desc"):
        raise ValueError(f"sort_order must be 'asc' or 'desc', got {sort_order!r}")
    return pb.PageRequest(sort_by=sort_by, sort_order=f"SORT_ORDER_{sort_order.upper()}", limit=limit, offset=offset)


def _list(message: Callable[..., L], values: Iterable[V] | None, convert: Callable[[V], Any]) -> L | None:
    """Returns an explicit filter list (None: no condition; empty: a condition nothing meets)."""
    return None if values is None else message(values=[convert(v) for v in values])


def _logic(filter_logic: FilterLogicName) -> str:
    if filter_logic not in ("and", "or"):
        raise ValueError(f"filter_logic must be 'and' or 'or', got {filter_logic!r}")
    return f"FILTER_LOGIC_{filter_logic.upper()}"


def _seconds(seconds: float) -> Duration:
    duration = Duration()
    duration.FromNanoseconds(round(seconds * 1e9))
    return duration


def _mode(mode: RolloutModeName | None) -> str | None:
    return ROLLOUT_MODE.value(mode) if mode is not None else None


def _time(seconds: float | None) -> Timestamp | None:
    return to_timestamp(seconds) if seconds is not None else None


def _without_rows(reason: NoTrainingRowsReasonName | Literal["any"] | None) -> str | None:
    """The filter of rollouts without training rows: "any" is any reason."""
    if reason is None:
        return None
    if reason == "any":
        return "NO_TRAINING_ROWS_REASON_UNSPECIFIED"
    return NO_TRAINING_ROWS_REASON.value(reason)


def rollout_spec(
    input: Any = None,
    *,
    mode: RolloutModeName | None = None,
    resources_id: str | None = None,
    config: types.RolloutConfig | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> pb.RolloutSpec:
    """Returns the description of a rollout to create; `input` and `metadata` must be JSON-serialisable.

    `resources_id=None` lets the server pick the latest resources snapshot.
    """
    return pb.RolloutSpec(
        input_json=to_json(input),
        mode=_mode(mode),
        resources_id=resources_id,
        config=config,
        metadata_json=to_json(dict(metadata or {})),
    )


def _optional(response: Any, name: str) -> Any:
    return getattr(response, name) if response.HasField(name) else None


def get_capabilities() -> Call[pb.GetCapabilitiesResponse]:
    """Returns what the store supports."""
    return Call("GetCapabilities", pb.GetCapabilitiesRequest(), lambda r: r, safe=True)


def get_statistics() -> Call[pb.GetStatisticsResponse]:
    """Returns entity counts, per-status counts and uptime."""
    return Call("GetStatistics", pb.GetStatisticsRequest(), lambda r: r, safe=True)


def start_rollout(
    input: Any = None,
    *,
    mode: RolloutModeName | None = None,
    resources_id: str | None = None,
    config: types.RolloutConfig | None = None,
    metadata: Mapping[str, Any] | None = None,
    worker_id: str | None = None,
) -> Call[types.Rollout]:
    """Creates a rollout with its first attempt, bypassing the queue (status `preparing`)."""
    spec = rollout_spec(input, mode=mode, resources_id=resources_id, config=config, metadata=metadata)
    return Call("StartRollout", pb.StartRolloutRequest(rollout=spec, worker_id=worker_id), lambda r: r.rollout)


def enqueue_rollout(
    input: Any = None,
    *,
    mode: RolloutModeName | None = None,
    resources_id: str | None = None,
    config: types.RolloutConfig | None = None,
    metadata: Mapping[str, Any] | None = None,
    request_id: str | None = None,
) -> Call[types.Rollout]:
    """Appends a rollout (status `queuing`) to the queue.

    With a `request_id` (e.g. `new_request_id()`), repeating the call enqueues once: the client
    retries it while the server is unavailable, and a caller that retries it itself with the same id
    gets the first call's rollout.
    """
    spec = rollout_spec(input, mode=mode, resources_id=resources_id, config=config, metadata=metadata)
    request = pb.EnqueueRolloutRequest(rollout=spec, request_id=request_id)
    return Call("EnqueueRollout", request, lambda r: r.rollout, safe=request_id is not None)


def enqueue_rollouts(rollouts: Iterable[pb.RolloutSpec], *, request_id: str | None = None) -> Call[list[types.Rollout]]:
    """Appends several rollouts (made with `rollout_spec`) atomically, in order; `request_id` as `enqueue_rollout`."""
    request = pb.EnqueueRolloutsRequest(rollouts=rollouts, request_id=request_id)
    return Call("EnqueueRollouts", request, lambda r: list(r.rollouts), safe=request_id is not None)


def new_request_id() -> str:
    """Returns a fresh request id (a UUID) for an enqueue that must not write twice when retried."""
    return uuid.uuid4().hex


def dequeue_rollout(*, worker_id: str | None = None, wait: float = 0.0) -> Call[types.Rollout | None]:
    """Claims the head of the queue (a new attempt), waiting up to `wait` seconds for one; None if none came."""
    request = pb.DequeueRolloutRequest(worker_id=worker_id, wait=_seconds(wait))
    return Call("DequeueRollout", request, lambda r: _optional(r, "rollout"), wait=wait)


def dequeue_rollouts(*, limit: int = 1, worker_id: str | None = None, wait: float = 0.0) -> Call[list[types.Rollout]]:
    """Claims up to `limit` rollouts from the head of the queue, waiting up to `wait` seconds for the first."""
    request = pb.DequeueRolloutsRequest(limit=limit, worker_id=worker_id, wait=_seconds(wait))
    return Call("DequeueRollouts", request, lambda r: list(r.rollouts), wait=wait)


def start_attempt(rollout_id: str, *, worker_id: str | None = None) -> Call[types.Rollout]:
    """Creates a new attempt of a rollout, whatever its status; returns the rollout with it."""
    request = pb.StartAttemptRequest(rollout_id=rollout_id, worker_id=worker_id)
    return Call("StartAttempt", request, lambda r: r.rollout)


def add_span(span: types.Span, *, owner_epoch: int | None = None) -> Call[types.Span | None]:
    """Stores a span (a heartbeat of its attempt); None when it was a duplicate.

    Retried when the server is unavailable: a span that did arrive is then a
    duplicate, ignored, and the answer is None. `owner_epoch` (an
    `Assignment`'s) makes the server refuse the span with `FailedPrecondition`
    once the worker session no longer owns the attempt.
    """
    request = pb.AddSpanRequest(span=span, owner_epoch=owner_epoch)
    return Call("AddSpan", request, lambda r: _optional(r, "span"), safe=True)


def add_spans(spans: Iterable[types.Span], *, owner_epoch: int | None = None) -> Call[list[types.Span]]:
    """Stores many spans atomically; returns those stored, duplicates left out (safe to retry, as `add_span`)."""
    request = pb.AddSpansRequest(spans=spans, owner_epoch=owner_epoch)
    return Call("AddSpans", request, lambda r: list(r.spans), safe=True)


def next_span_sequence_id(rollout_id: str, attempt_id: str, *, allow_unknown: bool = False) -> Call[int]:
    """Allocates the next span sequence id of a rollout.

    The rollout and the attempt must exist (NotFound otherwise), unless
    `allow_unknown`: then, as in agent-lightning's stores, the counter of
    the rollout id answers for any attempt id and an unknown rollout id
    gets a counter of its own.
    """
    request = pb.GetNextSpanSequenceIdRequest(rollout_id=rollout_id, attempt_id=attempt_id, allow_unknown=allow_unknown)
    return Call("GetNextSpanSequenceId", request, lambda r: int(r.sequence_id))


def span_sequence_ids(attempts: Iterable[tuple[str, str]], *, allow_unknown: bool = False) -> Call[list[int]]:
    """Allocates one sequence id per (rollout id, attempt id) pair, in order (`allow_unknown` as above)."""
    refs = [pb.RolloutAttemptRef(rollout_id=r, attempt_id=a) for r, a in attempts]
    request = pb.GetSpanSequenceIdsRequest(attempts=refs, allow_unknown=allow_unknown)
    return Call("GetSpanSequenceIds", request, lambda r: list(r.sequence_ids))


def query_rollouts(
    *,
    status_in: Iterable[RolloutStatusName] | None = None,
    rollout_id_in: Iterable[str] | None = None,
    rollout_id_contains: str | None = None,
    filter_logic: FilterLogicName = "and",
    mode_in: Iterable[RolloutModeName | None] | None = None,
    start_time_from: float | None = None,
    start_time_until: float | None = None,
    end_time_from: float | None = None,
    end_time_until: float | None = None,
    worker_id: str | None = None,
    resources_id: str | None = None,
    reward_min: float | None = None,
    reward_max: float | None = None,
    model_version: int | None = None,
    without_training_rows: NoTrainingRowsReasonName | Literal["any"] | None = None,
    sort_by: str | None = None,
    sort_order: SortOrderName = "asc",
    limit: int | None = None,
    offset: int = 0,
) -> Call[Page[types.Rollout]]:
    """Lists rollouts, each with its latest attempt.

    A filter list left at None is no condition; an empty list is a condition
    no rollout meets (agent-lightning's `status_in=[]`). `limit=0` answers the
    total only.

    The conditions from `mode_in` on are not agent-lightning's: each one given
    narrows the answer of the others, whatever `filter_logic`. `mode_in` takes
    modes and None (no mode); times are seconds since the epoch, each window
    from inclusive, until exclusive (a rollout that has not ended is outside
    every end window); `worker_id` keeps rollouts with an attempt on that
    worker; `reward_min` and `reward_max` bound the final reward, inclusive
    (a rollout without one is outside); `model_version` keeps the
    agent-lightning 1.x rollouts whose first model call that version served;
    `without_training_rows` keeps the 1.x rollouts that gave their trainer no
    training row, for any reason (`"any"`) or for the one named.
    Sort by `reward` too: unrewarded rollouts first (last when descending).
    """
    if mode_in is not None:
        mode_in = list(mode_in)
        if not mode_in:
            raise ValueError("mode_in=[] would match no rollout; pass None for no condition on the mode")
    request = pb.QueryRolloutsRequest(
        status_in_list=_list(pb.RolloutStatusList, status_in, ROLLOUT_STATUS.value),
        rollout_id_in_list=_list(pb.StringList, rollout_id_in, str),
        filter_logic=_logic(filter_logic),
        rollout_id_contains=rollout_id_contains,
        mode_in=[_mode(mode) or "ROLLOUT_MODE_UNSPECIFIED" for mode in mode_in or ()],
        start_time_from=_time(start_time_from),
        start_time_until=_time(start_time_until),
        end_time_from=_time(end_time_from),
        end_time_until=_time(end_time_until),
        worker_id=worker_id,
        resources_id=resources_id,
        reward_min=reward_min,
        reward_max=reward_max,
        model_version=model_version,
        without_training_rows=_without_rows(without_training_rows),
        page=_page(sort_by, sort_order, limit, offset),
    )
    return Call("QueryRollouts", request, _page_of("rollouts"), safe=True)


def get_rollout(rollout_id: str) -> Call[types.Rollout]:
    """Returns a rollout with its latest attempt; raises NotFound."""
    return Call("GetRollout", pb.GetRolloutRequest(rollout_id=rollout_id), lambda r: r.rollout, safe=True)


def update_rollout(
    rollout_id: str,
    *,
    input: Any | Unset = UNSET,
    mode: RolloutModeName | Unset | None = UNSET,
    resources_id: str | Unset | None = UNSET,
    status: RolloutStatusName | Unset = UNSET,
    config: types.RolloutConfig | Unset | None = UNSET,
    metadata: Mapping[str, Any] | Unset | None = UNSET,
) -> Call[types.Rollout]:
    """Writes the given fields of a rollout (`UNSET` leaves a field, `None` writes null)."""
    given: dict[str, Any] = {}
    if not isinstance(input, Unset):
        given["input_json"] = to_json(input)
    if not isinstance(mode, Unset):
        given["mode"] = _mode(mode)
    if not isinstance(resources_id, Unset):
        given["resources_id"] = resources_id
    if not isinstance(status, Unset):
        given["status"] = ROLLOUT_STATUS.value(status)
    if not isinstance(config, Unset):
        given["config"] = config
    if not isinstance(metadata, Unset):
        given["metadata_json"] = "" if metadata is None else to_json(dict(metadata))
    request = pb.UpdateRolloutRequest(rollout_id=rollout_id, update_mask=FieldMask(paths=given), **given)
    return Call("UpdateRollout", request, lambda r: r.rollout)


def query_attempts(
    rollout_id: str,
    *,
    sort_by: str | None = None,
    sort_order: SortOrderName = "asc",
    limit: int | None = None,
    offset: int = 0,
) -> Call[Page[types.Attempt]]:
    """Lists the attempts of a rollout (by sequence id unless `sort_by` says otherwise); raises NotFound."""
    request = pb.QueryAttemptsRequest(rollout_id=rollout_id, page=_page(sort_by, sort_order, limit, offset))
    return Call("QueryAttempts", request, _page_of("attempts"), safe=True)


def get_latest_attempt(rollout_id: str) -> Call[types.Attempt | None]:
    """Returns the latest attempt of a rollout, None when it has none; raises NotFound."""
    request = pb.GetLatestAttemptRequest(rollout_id=rollout_id)
    return Call("GetLatestAttempt", request, lambda r: _optional(r, "attempt"), safe=True)


def attempt_update(
    rollout_id: str,
    attempt_id: str = LATEST,
    *,
    status: AttemptStatusName | Unset = UNSET,
    worker_id: str | Unset = UNSET,
    last_heartbeat_time: float | Unset = UNSET,
    metadata: Mapping[str, Any] | Unset | None = UNSET,
    owner_epoch: int | None = None,
) -> pb.UpdateAttemptRequest:
    """Returns an update of the given fields of an attempt (`latest` by default), for `update_attempts`."""
    given: dict[str, Any] = {}
    if not isinstance(status, Unset):
        given["status"] = ATTEMPT_STATUS.value(status)
    if not isinstance(worker_id, Unset):
        given["worker_id"] = worker_id
    if not isinstance(last_heartbeat_time, Unset):
        given["last_heartbeat_time"] = to_timestamp(last_heartbeat_time)
    if not isinstance(metadata, Unset):
        given["metadata_json"] = "" if metadata is None else to_json(dict(metadata))
    return pb.UpdateAttemptRequest(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        update_mask=FieldMask(paths=given),
        owner_epoch=owner_epoch,
        **given,
    )


def update_attempt(
    rollout_id: str,
    attempt_id: str = LATEST,
    *,
    status: AttemptStatusName | Unset = UNSET,
    worker_id: str | Unset = UNSET,
    last_heartbeat_time: float | Unset = UNSET,
    metadata: Mapping[str, Any] | Unset | None = UNSET,
    owner_epoch: int | None = None,
) -> Call[types.Attempt]:
    """Writes the given fields of an attempt (`latest` by default); a status change drives the rollout.

    `owner_epoch` (an `Assignment`'s) makes the server refuse the write with
    `FailedPrecondition` once the worker session no longer owns the attempt
    (it moved to a newer session, or the attempt was retried): stop working
    on it then.
    """
    request = attempt_update(
        rollout_id,
        attempt_id,
        status=status,
        worker_id=worker_id,
        last_heartbeat_time=last_heartbeat_time,
        metadata=metadata,
        owner_epoch=owner_epoch,
    )
    return Call("UpdateAttempt", request, lambda r: r.attempt)


def update_attempts(updates: Iterable[pb.UpdateAttemptRequest]) -> Call[list[types.Attempt]]:
    """Applies several updates (made with `attempt_update`) in one transaction, in order: all or none.

    Each update sees the ones before it; the answer holds each update's
    attempt in order. A refused update fails the whole call, its message
    naming it (`updates[3]: ...`).
    """
    request = pb.UpdateAttemptsRequest(updates=updates)
    return Call("UpdateAttempts", request, lambda r: list(r.attempts))


def wait_for_rollouts(rollout_ids: Iterable[str], *, timeout: float | None = None) -> Call[list[types.Rollout]]:
    """Waits until the rollouts are terminal or `timeout` seconds passed; returns the terminal ones.

    `timeout=0` checks once, `None` waits as long as it takes. Unknown ids are
    left out. Prefer `watch_completions` to handle each rollout as it finishes.
    """
    limit = None if timeout is None else _seconds(max(timeout, 0.0))
    request = pb.WaitForRolloutsRequest(rollout_ids=rollout_ids, timeout=limit)
    return Call("WaitForRollouts", request, lambda r: list(r.rollouts), safe=True, wait=timeout)


def query_spans(
    rollout_id: str,
    attempt_id: str | None = None,
    *,
    trace_id: str | None = None,
    trace_id_contains: str | None = None,
    span_id: str | None = None,
    span_id_contains: str | None = None,
    parent_id: str | None = None,
    parent_id_contains: str | None = None,
    name: str | None = None,
    name_contains: str | None = None,
    filter_logic: FilterLogicName = "and",
    sort_by: str | None = None,
    sort_order: SortOrderName = "asc",
    limit: int | None = None,
    offset: int = 0,
) -> Call[Page[types.Span]]:
    """Lists the spans of a rollout: of one attempt, of `latest`, or of every attempt (None)."""
    request = pb.QuerySpansRequest(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        trace_id=trace_id,
        trace_id_contains=trace_id_contains,
        span_id=span_id,
        span_id_contains=span_id_contains,
        parent_id=parent_id,
        parent_id_contains=parent_id_contains,
        name=name,
        name_contains=name_contains,
        filter_logic=_logic(filter_logic),
        page=_page(sort_by, sort_order, limit, offset),
    )
    return Call("QuerySpans", request, _page_of("spans"), safe=True)


def add_resources(resources: Mapping[str, Any]) -> Call[types.ResourcesUpdate]:
    """Stores a new resources snapshot (version 1), now the latest."""
    request = pb.AddResourcesRequest(resources_json=to_json(dict(resources)))
    return Call("AddResources", request, lambda r: r.resources)


def update_resources(resources_id: str, resources: Mapping[str, Any]) -> Call[types.ResourcesUpdate]:
    """Replaces a snapshot's resources (version + 1; an unknown id is created), now the latest."""
    request = pb.UpdateResourcesRequest(resources_id=resources_id, resources_json=to_json(dict(resources)))
    return Call("UpdateResources", request, lambda r: r.resources)


def get_resources(resources_id: str) -> Call[types.ResourcesUpdate]:
    """Returns a resources snapshot; raises NotFound."""
    request = pb.GetResourcesRequest(resources_id=resources_id)
    return Call("GetResources", request, lambda r: r.resources, safe=True)


def get_latest_resources() -> Call[types.ResourcesUpdate | None]:
    """Returns the latest resources snapshot, None when there is none."""
    return Call("GetLatestResources", pb.GetLatestResourcesRequest(), lambda r: _optional(r, "resources"), safe=True)


def query_resources(
    *,
    resources_id: str | None = None,
    resources_id_contains: str | None = None,
    sort_by: str | None = None,
    sort_order: SortOrderName = "asc",
    limit: int | None = None,
    offset: int = 0,
) -> Call[Page[types.ResourcesUpdate]]:
    """Lists resources snapshots (both id filters must match)."""
    request = pb.QueryResourcesRequest(
        resources_id=resources_id,
        resources_id_contains=resources_id_contains,
        page=_page(sort_by, sort_order, limit, offset),
    )
    return Call("QueryResources", request, _page_of("resources"), safe=True)


def query_workers(
    *,
    status_in: Iterable[WorkerStatusName] | None = None,
    worker_id_contains: str | None = None,
    filter_logic: FilterLogicName = "and",
    sort_by: str | None = None,
    sort_order: SortOrderName = "asc",
    limit: int | None = None,
    offset: int = 0,
) -> Call[Page[types.Worker]]:
    """Lists workers; `status_in=None` is no condition, an empty list one no worker meets."""
    request = pb.QueryWorkersRequest(
        status_in_list=_list(pb.WorkerStatusList, status_in, WORKER_STATUS.value),
        filter_logic=_logic(filter_logic),
        worker_id_contains=worker_id_contains,
        page=_page(sort_by, sort_order, limit, offset),
    )
    return Call("QueryWorkers", request, _page_of("workers"), safe=True)


def get_worker(worker_id: str) -> Call[types.Worker]:
    """Returns a worker; raises NotFound."""
    return Call("GetWorker", pb.GetWorkerRequest(worker_id=worker_id), lambda r: r.worker, safe=True)


def update_worker(worker_id: str, *, heartbeat_stats: Mapping[str, Any] | Unset = UNSET) -> Call[types.Worker]:
    """Records a worker heartbeat (creating the worker if needed), with new statistics if given."""
    stats = None if isinstance(heartbeat_stats, Unset) else to_json(dict(heartbeat_stats))
    request = pb.UpdateWorkerRequest(worker_id=worker_id, heartbeat_stats_json=stats)
    return Call("UpdateWorker", request, lambda r: r.worker, safe=True)


def training_summary(
    *,
    mode: RolloutModeName | None = None,
    version_from: int | None = None,
    version_to: int | None = None,
) -> Call[list[pb.VersionSummary]]:
    """Returns the training summary: per policy version and mode, the ended rollouts and their rewards.

    A version is a resources snapshot (`version` is its place in creation order, from 1) or an
    agent-lightning 1.x model version (`model_version`); `version_from` and `version_to` bound
    either number, inclusive. `mode=None` gives every mode, each on its own row. The summary is
    kept as the store changes, so reading it costs no scan.
    """
    request = pb.GetTrainingSummaryRequest(mode=_mode(mode), version_from=version_from, version_to=version_to)
    return Call("GetTrainingSummary", request, lambda r: list(r.versions), safe=True)


def reward_timeline(
    *,
    mode: RolloutModeName | None = None,
    resolution: TimelineResolutionName | None = None,
    start_time: float | None = None,
    end_time: float | None = None,
) -> Call[pb.GetRewardTimelineResponse]:
    """Returns the rewards of the rollouts that ended, by the minute or hour they ended in.

    `resolution=None` lets the server choose (minutes for a run under three hours); `start_time`
    and `end_time` (seconds since the epoch) bound the periods' starts. The answer names the
    resolution read and its `periods`, in time order, then by mode.
    """
    request = pb.GetRewardTimelineRequest(
        mode=_mode(mode),
        resolution=TIMELINE_RESOLUTION.value(resolution) if resolution is not None else None,
        start_time=_time(start_time),
        end_time=_time(end_time),
    )
    return Call("GetRewardTimeline", request, lambda r: r, safe=True)


def compare_versions(
    mode: RolloutModeName,
    *,
    version_before: int | None = None,
    version_after: int | None = None,
    model_version_before: int | None = None,
    model_version_after: int | None = None,
    max_tasks: int | None = None,
) -> Call[pb.CompareVersionsResponse]:
    """Compares two policy versions in `mode`: their reward distributions, and the tasks whose reward changed most.

    Name each side once: a resources version by number (`version_before`, `version_after`) or
    an agent-lightning 1.x model version (`model_version_before`, `model_version_after`). A task
    is the rollouts with the same input; its change is its mean reward after less before.
    """
    for side, number, model_version in (
        ("before", version_before, model_version_before),
        ("after", version_after, model_version_after),
    ):
        if (number is None) == (model_version is None):
            raise ValueError(f"name the {side} version once: version_{side} or model_version_{side}")
    request = pb.CompareVersionsRequest(
        mode=_mode(mode),
        version_before=version_before or 0,
        version_after=version_after or 0,
        model_version_before=model_version_before,
        model_version_after=model_version_after,
        max_tasks=max_tasks,
    )
    return Call("CompareVersions", request, lambda r: r, safe=True)


def span_retention(max_age: float | None = None, max_bytes: int = 0) -> pb.SpanRetention | None:
    """Returns a namespace's span retention, or None when neither limit is set (the server's retention applies).

    Spans of rollouts finished over `max_age` seconds ago are deleted, and the oldest while they take over
    `max_bytes` (0: no limit).
    """
    if max_age is None and not max_bytes:
        return None
    return pb.SpanRetention(max_age=None if max_age is None else _seconds(max_age), max_bytes=max_bytes)


def create_namespace(
    name: str,
    *,
    span_retention_age: float | None = None,
    span_retention_max_bytes: int = 0,
    max_queued_rollouts: int = 0,
    max_spans: int = 0,
    max_span_bytes: int = 0,
) -> Call[pb.Namespace]:
    """Creates a namespace (admin), with its own span retention (seconds, bytes) and quotas if given.

    A quota of 0 is no limit; past one, an enqueue or a write of spans in the namespace raises
    ResourceExhausted naming the quota. Raises AlreadyExists, InvalidArgument for a name outside
    the rule, FailedPrecondition past the server's `--max-namespaces`.
    """
    quotas = (
        pb.NamespaceQuotas(max_queued_rollouts=max_queued_rollouts, max_spans=max_spans, max_span_bytes=max_span_bytes)
        if max_queued_rollouts or max_spans or max_span_bytes
        else None
    )
    request = pb.CreateNamespaceRequest(
        name=name, span_retention=span_retention(span_retention_age, span_retention_max_bytes), quotas=quotas
    )
    return Call("CreateNamespace", request, lambda r: r.namespace)


def list_namespaces() -> Call[list[pb.NamespaceSummary]]:
    """Lists the namespaces (admin), `default` first, each with its statistics and the bytes it takes."""
    return Call("ListNamespaces", pb.ListNamespacesRequest(), lambda r: list(r.namespaces), safe=True)


def delete_namespace(name: str) -> Call[pb.Namespace]:
    """Deletes a namespace and every record in it (admin); raises NotFound, FailedPrecondition for `default`."""
    return Call("DeleteNamespace", pb.DeleteNamespaceRequest(name=name), lambda r: r.namespace)
