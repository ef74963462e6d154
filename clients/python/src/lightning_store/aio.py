"""The asyncio client: the same API as `Client`, awaited, over `grpc.aio`.

An `AsyncClient` opens its channel on first use, in the running event loop,
and must then stay on that loop (gRPC's asyncio channels are bound to one).
To call the store from several loops or threads, or from processes forked
after it was used (gRPC supports `fork` for its blocking stack only), use
`Client`, whose `call_async` awaits any call from any loop.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

import grpc

from lightning_store import calls
from lightning_store._version import USER_AGENT
from lightning_store.calls import Call
from lightning_store.client import deadline_of, resolve_options, retry_delay
from lightning_store.errors import NotFound, StoreError, Unavailable, error_from_rpc
from lightning_store.options import ConnectionOptions
from lightning_store.proto import store_pb2 as pb
from lightning_store.proto import store_pb2_grpc
from lightning_store.proto import types_pb2 as types
from lightning_store.session import Assignment, SessionState
from lightning_store.streams import CompletionWatch, EventSubscription, StreamState, resumes
from lightning_store.values import AttemptStatusName, EventKindName, RolloutStatusName

__all__ = ["AsyncClient", "AsyncStream", "AsyncWorkerSession"]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound=StreamState[Any])
Item = TypeVar("Item")


def _awaited(spec: Callable[P, Call[R]]) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, R]]:
    """Makes a method of `AsyncClient` that sends the call `spec` builds and returns its result."""

    @functools.wraps(spec)
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.call(spec(*args, **kwargs))

    return method


class AsyncClient:
    """An asyncio lightning-store client; the same methods as `Client`, as coroutines."""

    def __init__(self, address: str | ConnectionOptions | None = None, **options: Any) -> None:
        self.options = resolve_options(address, options)
        """The connection options."""
        self.metadata = self.options.call_metadata()
        """The metadata sent with every call."""
        self._channel: grpc.aio.Channel | None = None
        self._stub: store_pb2_grpc.LightningStoreServiceAsyncStub | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __getstate__(self) -> ConnectionOptions:
        return self.options

    def __setstate__(self, options: ConnectionOptions) -> None:
        self.__init__(options)  # type: ignore[misc]

    @property
    def stub(self) -> store_pb2_grpc.LightningStoreServiceAsyncStub:
        """Returns the generated stub on this client's channel (opened in the running loop on first use)."""
        loop = asyncio.get_running_loop()
        if self._stub is None:
            credentials = self.options.credentials()
            channel_options = self.options.channel_options(USER_AGENT)
            self._channel = (
                grpc.aio.secure_channel(self.options.target, credentials, channel_options)
                if credentials is not None
                else grpc.aio.insecure_channel(self.options.target, channel_options)
            )
            self._stub = store_pb2_grpc.LightningStoreServiceStub(self._channel)
            self._loop = loop
        elif loop is not self._loop:
            raise RuntimeError("an AsyncClient serves the event loop it was first used in; make one per loop")
        return self._stub

    async def close(self) -> None:
        """Closes the channel; calls in flight are cancelled."""
        if self._channel is not None:
            await self._channel.close()
            self._channel = self._stub = self._loop = None

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def call(self, call: Call[R]) -> R:
        """Sends a unary call, retrying it while the server is unavailable if it is safe to repeat."""
        method = getattr(self.stub, call.method)
        delays = self.options.retry.delays() if call.safe else iter(())
        while True:
            try:
                response = await method(
                    call.request,
                    timeout=deadline_of(self.options, call),
                    metadata=self.metadata,
                    wait_for_ready=self.options.wait_for_ready,
                )
            except grpc.RpcError as rpc_error:
                error = error_from_rpc(rpc_error)
                delay = retry_delay(error, delays)
                if delay is None:
                    raise error from None
                await asyncio.sleep(delay)
                continue
            return call.parse(response)

    get_capabilities = _awaited(calls.get_capabilities)
    get_statistics = _awaited(calls.get_statistics)
    start_rollout = _awaited(calls.start_rollout)
    enqueue_rollout = _awaited(calls.enqueue_rollout)
    enqueue_rollouts = _awaited(calls.enqueue_rollouts)
    dequeue_rollout = _awaited(calls.dequeue_rollout)
    dequeue_rollouts = _awaited(calls.dequeue_rollouts)
    start_attempt = _awaited(calls.start_attempt)
    add_span = _awaited(calls.add_span)
    add_spans = _awaited(calls.add_spans)
    next_span_sequence_id = _awaited(calls.next_span_sequence_id)
    span_sequence_ids = _awaited(calls.span_sequence_ids)
    query_rollouts = _awaited(calls.query_rollouts)
    get_rollout = _awaited(calls.get_rollout)
    update_rollout = _awaited(calls.update_rollout)
    query_attempts = _awaited(calls.query_attempts)
    get_latest_attempt = _awaited(calls.get_latest_attempt)
    update_attempt = _awaited(calls.update_attempt)
    update_attempts = _awaited(calls.update_attempts)
    wait_for_rollouts = _awaited(calls.wait_for_rollouts)
    query_spans = _awaited(calls.query_spans)
    add_resources = _awaited(calls.add_resources)
    update_resources = _awaited(calls.update_resources)
    get_resources = _awaited(calls.get_resources)
    get_latest_resources = _awaited(calls.get_latest_resources)
    query_resources = _awaited(calls.query_resources)
    query_workers = _awaited(calls.query_workers)
    get_worker = _awaited(calls.get_worker)
    update_worker = _awaited(calls.update_worker)
    training_summary = _awaited(calls.training_summary)
    reward_timeline = _awaited(calls.reward_timeline)
    compare_versions = _awaited(calls.compare_versions)
    create_namespace = _awaited(calls.create_namespace)
    list_namespaces = _awaited(calls.list_namespaces)
    delete_namespace = _awaited(calls.delete_namespace)

    def watch_completions(
        self, rollout_ids: Iterable[str], *, timeout: float | None = None
    ) -> AsyncStream[CompletionWatch, types.Rollout]:
        """Yields each rollout once it is terminal; see `Client.watch_completions`."""
        return AsyncStream(self, CompletionWatch(rollout_ids, timeout))

    async def events(
        self,
        *,
        after: int | None = None,
        kinds: Iterable[EventKindName] = (),
        rollout_ids: Iterable[str] = (),
        rollout_status_in: Iterable[RolloutStatusName] = (),
        attempt_status_in: Iterable[AttemptStatusName] = (),
    ) -> AsyncStream[EventSubscription, types.Event]:
        """Subscribes to the store's change events after `after` (None: from now on); see `Client.events`.

        Returns once the server confirmed the subscription: `stream = await client.events(...)`.
        """
        subscription = EventSubscription(after, kinds, rollout_ids, rollout_status_in, attempt_status_in)
        return await AsyncStream(self, subscription).confirm()

    def worker_session(
        self,
        worker_id: str,
        *,
        slots: int = 1,
        heartbeat_interval: float = 10.0,
        heartbeat_stats: Callable[[], Mapping[str, Any]] | None = None,
        on_revoked: Callable[[Assignment], None] | None = None,
    ) -> AsyncWorkerSession:
        """Returns a worker session, opened by `async with` (or `await session.open()`); see `Client.worker_session`.

        `on_revoked` runs in the session's task.
        """
        return AsyncWorkerSession(self, SessionState(worker_id, slots, heartbeat_stats, on_revoked), heartbeat_interval)


class AsyncStream(Generic[S, Item]):
    """A resumable server stream: `async for` over it; `close()` ends it."""

    def __init__(self, client: AsyncClient, state: S) -> None:
        self.state = state
        """What the stream delivered so far."""
        self._client = client
        self._call: Any = None
        self._closed = False
        self._first: Any = None
        self._items: AsyncIterator[Item] = self._run()

    def __aiter__(self) -> AsyncStream[S, Item]:
        return self

    async def __anext__(self) -> Item:
        return await anext(self._items)

    async def __aenter__(self) -> AsyncStream[S, Item]:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Ends the stream: a pending iteration stops."""
        self._closed = True
        if self._call is not None:
            self._call.cancel()

    def _open(self, request: Any) -> Any:
        self._call = getattr(self._client.stub, self.state.method)(request, metadata=self._client.metadata)
        return self._call

    async def confirm(self) -> AsyncStream[S, Item]:
        """Opens the first connection and waits for the server to confirm it, retrying while it is unavailable."""
        delays = self._client.options.retry.delays()
        while True:
            call = self._open(self.state.request())
            try:
                message = await call.read()
            except grpc.RpcError as rpc_error:
                call.cancel()
                error = error_from_rpc(rpc_error)
                delay = retry_delay(error, delays)
                if delay is None:
                    raise error from None
                await asyncio.sleep(delay)
                continue
            if message is not grpc.aio.EOF:
                self.state.receive(message)
            self._first = call
            return self

    async def _run(self) -> AsyncIterator[Item]:
        """Yields the items of the confirmed call (or of a new connection), reconnecting while the state says so."""
        delays: Iterator[float] | None = None
        call, self._first = self._first, None
        while not self._closed:
            if call is None:
                request = self.state.request()
                if request is None:
                    return
                call = self._open(request)
            error: StoreError | None = None
            try:
                while (message := await call.read()) is not grpc.aio.EOF:
                    delays = None  # the connection works: a later failure starts a fresh backoff
                    item = self.state.receive(message)
                    if item is not None:
                        yield item
            except grpc.RpcError as rpc_error:
                error = error_from_rpc(rpc_error)
            except asyncio.CancelledError:
                if self._closed:
                    return
                raise
            finally:
                call.cancel()  # a consumer that stopped early ends the call
            call = None
            if self._closed or not resumes(self.state, error):
                return
            delays = delays or self._client.options.retry.delays()
            delay = next(delays, None)
            if delay is None:
                if error is not None:
                    raise error
                return
            await asyncio.sleep(delay)


class AsyncWorkerSession:
    """A runner's session in asyncio: `async for` over it for assignments; see `WorkerSession`."""

    def __init__(self, client: AsyncClient, state: SessionState, heartbeat_interval: float) -> None:
        self._client = client
        self._state = state
        self._heartbeat_interval = heartbeat_interval
        self._inbox: asyncio.Queue[Assignment | StoreError | None] = asyncio.Queue()
        self._outbox: asyncio.Queue[pb.WorkerSessionRequest | None] = asyncio.Queue()
        self._settled = asyncio.Event()  # opened once, or failed for good
        self._opened_now = False
        self._stopping = False
        self._failure: StoreError | None = None
        self._task: asyncio.Task[None] | None = None
        self._call: Any = None

    @property
    def worker_id(self) -> str:
        """Returns the session's worker id."""
        return self._state.worker_id

    @property
    def held(self) -> list[Assignment]:
        """Returns the assignments not yet released."""
        return list(self._state.held.values())

    async def open(self) -> AsyncWorkerSession:
        """Opens the session; raises the error that prevented it."""
        self._task = asyncio.create_task(self._run(), name=f"worker-session-{self._state.worker_id}")
        try:
            await asyncio.wait_for(self._settled.wait(), self._client.options.timeout)
        except asyncio.TimeoutError:
            await self.close()
            raise Unavailable(
                grpc.StatusCode.UNAVAILABLE, f"the session of worker {self._state.worker_id} did not open"
            ) from None
        if self._failure is not None:
            raise self._failure
        return self

    async def __aenter__(self) -> AsyncWorkerSession:
        return await self.open()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __aiter__(self) -> AsyncWorkerSession:
        return self

    async def __anext__(self) -> Assignment:
        assignment = await self.next_assignment(None)
        if assignment is None:
            raise StopAsyncIteration
        return assignment

    async def next_assignment(self, timeout: float | None) -> Assignment | None:
        """Returns the next assignment, waiting up to `timeout` seconds; None on timeout or once closed."""
        try:
            item = await asyncio.wait_for(self._inbox.get(), timeout)
        except asyncio.TimeoutError:
            return None
        if item is None or isinstance(item, StoreError):
            self._inbox.put_nowait(item)  # later calls see the end too
            if item is None:
                return None
            raise item
        return item

    def release(self, assignment: Assignment) -> None:
        """Frees the slot of an assignment (also `assignment.release()`)."""
        message = self._state.release_message(assignment)
        if message is not None:
            self._outbox.put_nowait(message)

    async def close(self) -> None:
        """Ends the session cleanly: the worker is `idle` (`busy` while it holds unfinished attempts)."""
        self._stopping = True
        self._outbox.put_nowait(None)
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), self._client.options.timeout)
            except asyncio.TimeoutError:
                self._task.cancel()

    async def _requests(
        self, outbox: asyncio.Queue[pb.WorkerSessionRequest | None]
    ) -> AsyncIterator[pb.WorkerSessionRequest]:
        yield self._state.open_message()
        while True:
            try:
                message = await asyncio.wait_for(outbox.get(), self._heartbeat_interval)
            except asyncio.TimeoutError:
                yield self._state.heartbeat_message()
                continue
            if message is None:
                return
            yield message

    async def _connect(self) -> None:
        """Reads one connection's messages until it ends."""
        outbox: asyncio.Queue[pb.WorkerSessionRequest | None] = asyncio.Queue()
        self._outbox = outbox
        self._call = self._client.stub.WorkerSession(self._requests(outbox), metadata=self._client.metadata)
        try:
            async for message in self._call:
                assignment = self._state.receive(message, self.release)
                if assignment is not None:
                    self._inbox.put_nowait(assignment)
                elif message.HasField("opened"):
                    await self._take_up()
                    self._opened_now = True
                    self._settled.set()
        except StoreError:
            self._call.cancel()  # the next connection adopts again
            raise
        finally:
            outbox.put_nowait(None)

    async def _take_up(self) -> None:
        """Hands the runner the adopted attempts this process does not hold (see `SessionState.take_up`)."""
        for key in self._state.unheld_adoptions():
            rollout: types.Rollout | None = None
            resources: types.ResourcesUpdate | None = None
            try:
                rollout = await self._client.get_rollout(key[0])
                if rollout.HasField("resources_id"):
                    resources = await self._client.get_resources(rollout.resources_id)
            except NotFound:
                pass
            taken = self._state.take_up(key, rollout, resources, self.release)
            if isinstance(taken, Assignment):
                self._inbox.put_nowait(taken)
            else:
                self._outbox.put_nowait(taken)

    async def _run(self) -> None:
        delays = None
        while not self._stopping:
            try:
                await self._connect()
                error: StoreError = Unavailable(grpc.StatusCode.UNAVAILABLE, "the server ended the session")
            except grpc.RpcError as rpc_error:
                error = error_from_rpc(rpc_error)
            except StoreError as store_error:  # taking up an adopted attempt failed
                error = store_error
            if self._stopping:
                break
            if self._opened_now:
                delays, self._opened_now = None, False
            delays = delays or self._client.options.retry.delays()
            delay = retry_delay(error, delays)
            if delay is None:
                self._failure = error
                self._inbox.put_nowait(error)
                self._settled.set()
                return
            await asyncio.sleep(delay)
        self._inbox.put_nowait(None)
