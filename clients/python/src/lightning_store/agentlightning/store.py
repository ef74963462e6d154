"""agent-lightning 0.3's `LightningStore` interface, served by a lightning-store server over gRPC.

Every public method keeps upstream's signature and return conventions:
`None` or an empty page where upstream returns them (the server answers
NOT_FOUND there), `ValueError` where upstream raises it, `UNSET` versus
`None` on updates. The remaining differences are listed in the package README.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import warnings
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal, TypeVar

from agentlightning.store.base import UNSET as UPSTREAM_UNSET
from agentlightning.store.base import LightningStore as UpstreamStore
from agentlightning.store.base import LightningStoreCapabilities, LightningStoreStatistics
from agentlightning.store.base import Unset as UpstreamUnset
from agentlightning.types import (
    Attempt,
    AttemptedRollout,
    AttemptStatus,
    EnqueueRolloutRequest,
    NamedResources,
    PaginatedResult,
    ResourcesUpdate,
    Rollout,
    RolloutConfig,
    RolloutMode,
    RolloutStatus,
    Span,
    TaskInput,
    Worker,
    WorkerStatus,
)
from opentelemetry.sdk.trace import ReadableSpan

from lightning_store import calls
from lightning_store.agentlightning._convert import (
    attempt_from_proto,
    attempted_from_proto,
    config_to_proto,
    jsonable,
    named_resources_json,
    resources_from_proto,
    rollout_from_proto,
    scope_to_proto,
    span_from_proto,
    span_to_proto,
    worker_from_proto,
)
from lightning_store.agentlightning._pages import empty, paginated, server_limit
from lightning_store.calls import Call
from lightning_store.client import Client, Stream, resolve_options
from lightning_store.errors import FailedPrecondition, InvalidArgument, NotFound, OutOfRange
from lightning_store.options import ConnectionOptions
from lightning_store.values import UNSET, Unset

__all__ = ["LightningStore"]

logger = logging.getLogger(__name__)

R = TypeVar("R")
T = TypeVar("T")
U = TypeVar("U")

# Errors of a well-formed call about the store's content: upstream raises ValueError for all of them.
_VALUE_ERRORS = (NotFound, InvalidArgument, FailedPrecondition, OutOfRange)


class Statistics(LightningStoreStatistics, total=False):
    """agent-lightning's store statistics, with the server's backend."""

    backend: str
    """The server's storage backend: `memory`, `sqlite` or `postgres`."""


def _given(value: Any) -> Any:
    """Maps agent-lightning's `UNSET` to ours; other values pass."""
    return UNSET if isinstance(value, UpstreamUnset) else value


class LightningStore(UpstreamStore):
    """agent-lightning's `LightningStore`, backed by a lightning-store server.

    Pass it to `agentlightning.Trainer(store=...)` with
    `ClientServerExecutionStrategy(managed_store=False)` (the runners then use
    this store directly instead of an HTTP server in the trainer), or call it
    from any algorithm or runner. It is usable from any event loop and thread
    (one gRPC channel, independent of event loops), and after `fork` or
    pickling (runner subprocesses connect afresh).

    `dequeue_wait` lets `dequeue_rollout` wait server-side up to that many
    seconds for a rollout instead of returning None at once (upstream's
    contract, and the default): runners polling every few seconds then start
    work the moment it is queued.

    By default agent-lightning's tracer sends spans through `add_otel_span`
    over gRPC, which needs no configuration. `otlp_traces=True` makes it
    export them over OTLP/HTTP to `otlp_traces_endpoint()` instead: the
    server's own `/v1/traces` on its one port (`http(s)://host:port/v1/traces`
    from the address, `.../ns/{namespace}/v1/traces` in a namespace), or the `otlp_traces_endpoint` given. With the
    OpenTelemetry SDK 1.4x that also needs `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
    set to that endpoint (the SDK ignores the one agent-lightning sets), so it
    is not the default: a store must not lose spans silently.

    `namespace="run-a"` puts everything it does in that namespace (one
    training among several on the server); None is the `default` namespace.
    """

    def __init__(
        self,
        address: str | ConnectionOptions | None = None,
        *,
        dequeue_wait: float = 0.0,
        otlp_traces: bool = False,
        otlp_traces_endpoint: str | None = None,
        **options: Any,
    ) -> None:
        self.options = resolve_options(address, options)
        """The connection options."""
        self.dequeue_wait = dequeue_wait
        self._otlp_traces = otlp_traces
        self._otlp_traces_endpoint = otlp_traces_endpoint
        self._connection: Client | None = None
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {
            "options": self.options,
            "dequeue_wait": self.dequeue_wait,
            "otlp_traces": self._otlp_traces,
            "otlp_traces_endpoint": self._otlp_traces_endpoint,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        options = state.pop("options")
        self.__init__(options, **state)  # type: ignore[misc]

    @property
    def client(self) -> Client:
        """Returns this process's client of the server (made on first use, and again after a fork).

        Its channel belongs to no event loop: every loop and thread shares it.
        """
        with self._lock:
            if self._connection is None or os.getpid() != self._pid:
                # After a fork the parent's channel is unusable here, and is left alone: it is the parent's.
                self._connection = Client(self.options)
                self._pid = os.getpid()
            return self._connection

    async def close(self) -> None:
        """Closes the channel (a later call opens a new one)."""
        with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None and self._pid == os.getpid():
            connection.close()

    async def _call(self, call: Call[R]) -> R:
        try:
            return await self.client.call_async(call)
        except _VALUE_ERRORS as error:
            raise ValueError(error.details) from error

    async def _call_or(self, call: Call[R], missing: U) -> R | U:
        """Sends a call; answers `missing` where the server says NOT_FOUND and upstream returns None or empty."""
        try:
            return await self.client.call_async(call)
        except NotFound:
            return missing
        except _VALUE_ERRORS as error:
            raise ValueError(error.details) from error

    @property
    def capabilities(self) -> LightningStoreCapabilities:
        """Returns the capabilities: thread- and async-safe, one store for every process, OTLP/HTTP traces."""
        return LightningStoreCapabilities(
            thread_safe=True, async_safe=True, zero_copy=True, otlp_traces=self._otlp_traces
        )

    def otlp_traces_endpoint(self) -> str:
        """Returns where agent-lightning's tracer exports spans: the server's `/v1/traces`, unless given."""
        if not self._otlp_traces:
            raise NotImplementedError("OTLP traces are off for this store (pass otlp_traces=True)")
        if self._otlp_traces_endpoint is not None:
            return self._otlp_traces_endpoint
        return f"{self.options.namespace_url}/v1/traces"

    async def statistics(self) -> Statistics:
        """Returns the entity counts; `name` is the class name (as upstream's), `backend` the server's backend."""
        stats = await self._call(calls.get_statistics())
        return Statistics(
            name=type(self).__name__,
            backend=stats.name,
            total_rollouts=stats.total_rollouts,
            total_attempts=stats.total_attempts,
            total_spans=stats.total_spans,
            total_resources=stats.total_resources,
            total_workers=stats.total_workers,
            uptime=stats.uptime_seconds,
            total_span_bytes=stats.total_span_bytes,
        )

    async def start_rollout(
        self,
        input: TaskInput,
        mode: RolloutMode | None = None,
        resources_id: str | None = None,
        config: RolloutConfig | None = None,
        metadata: dict[str, Any] | None = None,
        worker_id: str | None = None,
    ) -> AttemptedRollout:
        """Creates a rollout with its first attempt (status `preparing`), bypassing the queue."""
        call = calls.start_rollout(
            jsonable(input),
            mode=mode,
            resources_id=resources_id,
            config=config_to_proto(config),
            metadata=jsonable(metadata),
            worker_id=worker_id,
        )
        return attempted_from_proto(await self._call(call))

    async def enqueue_rollout(
        self,
        input: TaskInput,
        mode: Literal["train", "val", "test"] | None = None,
        resources_id: str | None = None,
        config: RolloutConfig | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Rollout:
        """Queues a rollout (status `queuing`)."""
        call = calls.enqueue_rollout(
            jsonable(input),
            mode=mode,
            resources_id=resources_id,
            config=config_to_proto(config),
            metadata=jsonable(metadata),
        )
        return rollout_from_proto(await self._call(call))

    async def enqueue_many_rollouts(self, rollouts: Sequence[EnqueueRolloutRequest]) -> Sequence[Rollout]:
        """Queues several rollouts in one atomic call, in order."""
        if not rollouts:
            return []
        specs = [
            calls.rollout_spec(
                jsonable(r.input),
                mode=r.mode,
                resources_id=r.resources_id,
                config=config_to_proto(r.config),
                metadata=jsonable(r.metadata),
            )
            for r in rollouts
        ]
        return [rollout_from_proto(r) for r in await self._call(calls.enqueue_rollouts(specs))]

    async def dequeue_rollout(self, worker_id: str | None = None) -> AttemptedRollout | None:
        """Claims the head of the queue (waiting up to `dequeue_wait` seconds); None when it is empty."""
        rollout = await self._call(calls.dequeue_rollout(worker_id=worker_id, wait=self.dequeue_wait))
        return attempted_from_proto(rollout) if rollout is not None else None

    async def dequeue_many_rollouts(
        self, *, limit: int = 1, worker_id: str | None = None
    ) -> Sequence[AttemptedRollout]:
        """Claims up to `limit` rollouts from the head of the queue in one atomic call."""
        if limit <= 0:
            return []
        claimed = await self._call(calls.dequeue_rollouts(limit=limit, worker_id=worker_id))
        return [attempted_from_proto(r) for r in claimed]

    async def start_attempt(self, rollout_id: str, worker_id: str | None = None) -> AttemptedRollout:
        """Creates a new attempt of a rollout, whatever its status."""
        return attempted_from_proto(await self._call(calls.start_attempt(rollout_id, worker_id=worker_id)))

    async def add_span(self, span: Span) -> Span | None:
        """Stores a span; returns it, or None when it was a duplicate."""
        stored = await self._call(calls.add_span(span_to_proto(span)))
        if stored is None:
            _log_duplicate(span)
            return None
        return span

    async def add_many_spans(self, spans: Sequence[Span]) -> Sequence[Span]:
        """Stores the spans in one atomic call; returns those stored (duplicates left out)."""
        if not spans:
            return []
        stored = await self._call(calls.add_spans([span_to_proto(s) for s in spans]))
        kept = Counter((s.rollout_id, s.attempt_id, s.span_id) for s in stored)
        result = []
        for span in spans:
            key = (span.rollout_id, span.attempt_id, span.span_id)
            if kept[key] > 0:
                kept[key] -= 1
                result.append(span)
            else:
                _log_duplicate(span)
        return result

    async def add_otel_span(
        self, rollout_id: str, attempt_id: str, readable_span: ReadableSpan, sequence_id: int | None = None
    ) -> Span | None:
        """Stores an OpenTelemetry span; without `sequence_id` the server allocates one in the same call."""
        span = Span.from_opentelemetry(
            readable_span, rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=sequence_id or 0
        )
        message = span_to_proto(span, allocate=sequence_id is None)
        scope = scope_to_proto(readable_span)
        if scope is not None:
            message.scope.CopyFrom(scope)
        stored = await self._call(calls.add_span(message))
        if stored is None:
            _log_duplicate(span)
            return None
        return span.model_copy(update={"sequence_id": stored.sequence_id})

    async def query_rollouts(
        self,
        *,
        status_in: Sequence[RolloutStatus] | None = None,
        rollout_id_in: Sequence[str] | None = None,
        rollout_id_contains: str | None = None,
        filter_logic: Literal["and", "or"] = "and",
        sort_by: str | None = None,
        sort_order: Literal["asc", "desc"] = "asc",
        limit: int = -1,
        offset: int = 0,
        status: Sequence[RolloutStatus] | None = None,
        rollout_ids: Sequence[str] | None = None,
    ) -> PaginatedResult[Rollout | AttemptedRollout]:
        """Lists rollouts, each with its latest attempt; the deprecated `status`/`rollout_ids` still work."""
        if status_in is None and status is not None:
            warnings.warn("status is deprecated, use status_in instead", DeprecationWarning, stacklevel=2)
            status_in = status
        if rollout_id_in is None and rollout_ids is not None:
            warnings.warn("rollout_ids is deprecated, use rollout_id_in instead", DeprecationWarning, stacklevel=2)
            rollout_id_in = rollout_ids
        call = calls.query_rollouts(
            status_in=status_in,  # an empty list is a condition nothing meets, as upstream
            rollout_id_in=rollout_id_in,
            rollout_id_contains=rollout_id_contains,
            filter_logic=filter_logic,
            sort_by=sort_by,
            sort_order=sort_order,
            limit=server_limit(limit),
            offset=offset,
        )
        return paginated(await self._call(call), rollout_from_proto)

    async def query_attempts(
        self,
        rollout_id: str,
        *,
        sort_by: str | None = "sequence_id",
        sort_order: Literal["asc", "desc"] = "asc",
        limit: int = -1,
        offset: int = 0,
    ) -> PaginatedResult[Attempt]:
        """Lists the attempts of a rollout; an unknown rollout has none."""
        call = calls.query_attempts(
            rollout_id, sort_by=sort_by, sort_order=sort_order, limit=server_limit(limit), offset=offset
        )
        page = await self._call_or(call, None)
        if page is None:
            return empty(limit, offset)
        return paginated(page, attempt_from_proto)

    async def get_rollout_by_id(self, rollout_id: str) -> Rollout | None:
        """Returns a rollout (with its latest attempt, if any), or None."""
        rollout = await self._call_or(calls.get_rollout(rollout_id), None)
        return rollout_from_proto(rollout) if rollout is not None else None

    async def get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        """Returns the latest attempt of a rollout, or None (also for an unknown rollout)."""
        attempt = await self._call_or(calls.get_latest_attempt(rollout_id), None)
        return attempt_from_proto(attempt) if attempt is not None else None

    async def query_resources(
        self,
        *,
        resources_id: str | None = None,
        resources_id_contains: str | None = None,
        sort_by: str | None = None,
        sort_order: Literal["asc", "desc"] = "asc",
        limit: int = -1,
        offset: int = 0,
    ) -> PaginatedResult[ResourcesUpdate]:
        """Lists resources snapshots."""
        call = calls.query_resources(
            resources_id=resources_id,
            resources_id_contains=resources_id_contains,
            sort_by=sort_by,
            sort_order=sort_order,
            limit=server_limit(limit),
            offset=offset,
        )
        return paginated(await self._call(call), resources_from_proto)

    async def get_resources_by_id(self, resources_id: str) -> ResourcesUpdate | None:
        """Returns a resources snapshot, or None."""
        update = await self._call_or(calls.get_resources(resources_id), None)
        return resources_from_proto(update) if update is not None else None

    async def get_latest_resources(self) -> ResourcesUpdate | None:
        """Returns the latest resources snapshot, or None."""
        update = await self._call(calls.get_latest_resources())
        return resources_from_proto(update) if update is not None else None

    async def add_resources(self, resources: NamedResources) -> ResourcesUpdate:
        """Stores a new resources snapshot, now the latest."""
        return resources_from_proto(await self._call(calls.add_resources(named_resources_json(resources))))

    async def update_resources(self, resources_id: str, resources: NamedResources) -> ResourcesUpdate:
        """Replaces (or creates) a resources snapshot, now the latest."""
        call = calls.update_resources(resources_id, named_resources_json(resources))
        return resources_from_proto(await self._call(call))

    async def get_next_span_sequence_id(self, rollout_id: str, attempt_id: str) -> int:
        """Allocates the next span sequence id of a rollout.

        As upstream's stores, the ids are not looked up: the counter belongs
        to the rollout id, so any attempt id (`latest` too) gets the
        rollout's next value and an unknown rollout id a counter of its own.
        """
        return await self._call(calls.next_span_sequence_id(rollout_id, attempt_id, allow_unknown=True))

    async def get_many_span_sequence_ids(self, rollout_attempt_ids: Sequence[tuple[str, str]]) -> Sequence[int]:
        """Allocates one sequence id per (rollout, attempt) pair in one call, unchecked as above."""
        if not rollout_attempt_ids:
            return []
        return await self._call(calls.span_sequence_ids(rollout_attempt_ids, allow_unknown=True))

    async def wait_for_rollouts(self, *, rollout_ids: list[str], timeout: float | None = None) -> list[Rollout]:
        """Returns the rollouts terminal by the deadline, in request order; unknown ids are left out.

        Waits on the server's completion stream (no polling, any timeout, and
        it survives a server restart); `timeout <= 0` checks once.
        """
        if timeout is not None and timeout <= 0:
            finished = await self._call(calls.wait_for_rollouts(rollout_ids, timeout=0))
        else:
            try:
                finished = await _drain(self.client.watch_completions(rollout_ids, timeout=timeout))
            except _VALUE_ERRORS as error:
                raise ValueError(error.details) from error
        by_id = {r.rollout_id: rollout_from_proto(r, with_attempt=False) for r in finished}
        return [by_id[rollout_id] for rollout_id in rollout_ids if rollout_id in by_id]

    async def query_spans(
        self,
        rollout_id: str,
        attempt_id: str | Literal["latest"] | None = None,
        *,
        trace_id: str | None = None,
        trace_id_contains: str | None = None,
        span_id: str | None = None,
        span_id_contains: str | None = None,
        parent_id: str | None = None,
        parent_id_contains: str | None = None,
        name: str | None = None,
        name_contains: str | None = None,
        filter_logic: Literal["and", "or"] = "and",
        limit: int = -1,
        offset: int = 0,
        sort_by: str | None = "sequence_id",
        sort_order: Literal["asc", "desc"] = "asc",
    ) -> PaginatedResult[Span]:
        """Lists the spans of a rollout; unknown rollouts and attempts have none.

        RuntimeError once span retention deleted the rollout's spans, as upstream's eviction.
        """
        filters = {
            "trace_id": trace_id,
            "trace_id_contains": trace_id_contains,
            "span_id": span_id,
            "span_id_contains": span_id_contains,
            "parent_id": parent_id,
            "parent_id_contains": parent_id_contains,
            "name": name,
            "name_contains": name_contains,
        }
        call = calls.query_spans(
            rollout_id,
            attempt_id,
            **filters,
            filter_logic=filter_logic,
            sort_by=sort_by,
            sort_order=sort_order,
            limit=server_limit(limit),
            offset=offset,
        )
        try:
            page = await self._call_or(call, None)
        except ValueError as error:
            if isinstance(error.__cause__, FailedPrecondition):
                raise RuntimeError(str(error)) from error.__cause__
            raise
        if page is None:
            return empty(limit, offset)
        return paginated(page, span_from_proto)

    async def update_rollout(
        self,
        rollout_id: str,
        input: TaskInput | UpstreamUnset = UPSTREAM_UNSET,
        mode: Literal["train", "val", "test"] | UpstreamUnset | None = UPSTREAM_UNSET,
        resources_id: str | UpstreamUnset | None = UPSTREAM_UNSET,
        status: RolloutStatus | UpstreamUnset = UPSTREAM_UNSET,
        config: RolloutConfig | UpstreamUnset = UPSTREAM_UNSET,
        metadata: dict[str, Any] | UpstreamUnset | None = UPSTREAM_UNSET,
    ) -> Rollout:
        """Writes the given fields of a rollout: `UNSET` leaves a field, `None` writes null."""
        call = calls.update_rollout(
            rollout_id,
            input=_jsonable_given(input),
            mode=_given(mode),
            resources_id=_given(resources_id),
            status=_given(status),
            config=UNSET if isinstance(config, UpstreamUnset) else config_to_proto(config),
            metadata=_jsonable_given(metadata),
        )
        return rollout_from_proto(await self._call(call), with_attempt=False)

    async def update_attempt(
        self,
        rollout_id: str,
        attempt_id: str | Literal["latest"],
        status: AttemptStatus | UpstreamUnset = UPSTREAM_UNSET,
        worker_id: str | UpstreamUnset = UPSTREAM_UNSET,
        last_heartbeat_time: float | UpstreamUnset = UPSTREAM_UNSET,
        metadata: dict[str, Any] | UpstreamUnset | None = UPSTREAM_UNSET,
    ) -> Attempt:
        """Writes the given fields of an attempt (or of the `latest` one); a status change drives the rollout."""
        call = calls.update_attempt(
            rollout_id,
            attempt_id,
            status=_given(status),
            worker_id=_given(worker_id),
            last_heartbeat_time=_given(last_heartbeat_time),
            metadata=_jsonable_given(metadata),
        )
        return attempt_from_proto(await self._call(call))

    async def query_workers(
        self,
        *,
        status_in: Sequence[WorkerStatus] | None = None,
        worker_id_contains: str | None = None,
        filter_logic: Literal["and", "or"] = "and",
        sort_by: str | None = None,
        sort_order: Literal["asc", "desc"] = "asc",
        limit: int = -1,
        offset: int = 0,
    ) -> PaginatedResult[Worker]:
        """Lists workers."""
        call = calls.query_workers(
            status_in=status_in,  # an empty list is a condition nothing meets, as upstream
            worker_id_contains=worker_id_contains,
            filter_logic=filter_logic,
            sort_by=sort_by,
            sort_order=sort_order,
            limit=server_limit(limit),
            offset=offset,
        )
        return paginated(await self._call(call), worker_from_proto)

    async def get_worker_by_id(self, worker_id: str) -> Worker | None:
        """Returns a worker, or None."""
        worker = await self._call_or(calls.get_worker(worker_id), None)
        return worker_from_proto(worker) if worker is not None else None

    async def update_worker(
        self, worker_id: str, heartbeat_stats: dict[str, Any] | UpstreamUnset = UPSTREAM_UNSET
    ) -> Worker:
        """Records a worker heartbeat (creating the worker), with new statistics if given."""
        stats = _given(heartbeat_stats)
        if stats is None:
            raise TypeError("heartbeat_stats must be a dict when given")
        call = calls.update_worker(worker_id, heartbeat_stats=_jsonable_given(stats))
        return worker_from_proto(await self._call(call))


def _log_duplicate(span: Span) -> None:
    """Logs a span the server ignored as a duplicate, in upstream's words (its users' log checks find it)."""
    logger.error(
        "Duplicated span added for rollout=%s, attempt=%s, span=%s. Skipping.",
        span.rollout_id,
        span.attempt_id,
        span.span_id,
    )


async def _drain(stream: Stream[Any, T]) -> list[T]:
    """Returns every item of a blocking stream, read on a thread of its own; cancelling closes the stream."""
    loop = asyncio.get_running_loop()
    drained: asyncio.Future[list[T]] = loop.create_future()

    def settle(items: list[T] | None, error: BaseException | None) -> None:
        if drained.done():
            return
        if error is not None:
            drained.set_exception(error)
        else:
            drained.set_result(items or [])

    def read() -> None:
        try:
            items, error = list(stream), None
        except Exception as failure:  # handed to the awaiting task
            items, error = None, failure
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(settle, items, error)

    threading.Thread(target=read, name="lightning-store-wait", daemon=True).start()
    try:
        return await drained
    finally:
        stream.close()


def _jsonable_given(value: Any) -> Any:
    given = _given(value)
    return given if isinstance(given, Unset) else jsonable(given)
