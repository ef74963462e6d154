"""The synchronous client: every RPC as a blocking method, resumable streams, worker sessions.

A `Client` owns one gRPC channel; it is safe to share between threads. It
pickles as its options, so a runner subprocess gets a client of its own
that connects to the same server.
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

import grpc

from lightning_store import calls
from lightning_store._version import USER_AGENT
from lightning_store.calls import Call
from lightning_store.errors import NotFound, StoreError, Unavailable, error_from_rpc
from lightning_store.options import ConnectionOptions
from lightning_store.proto import store_pb2 as pb
from lightning_store.proto import store_pb2_grpc
from lightning_store.proto import types_pb2 as types
from lightning_store.session import Assignment, SessionState
from lightning_store.streams import CompletionWatch, EventSubscription, StreamState, resumes
from lightning_store.values import AttemptStatusName, EventKindName, RolloutStatusName

__all__ = ["Client", "Stream", "WorkerSession", "resolve_options"]

ASYNC_THREADS = 32
"""Threads of a client's pool for `call_async`: the unary calls that may run at once."""

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound=StreamState[Any])
Item = TypeVar("Item")


def resolve_options(address: str | ConnectionOptions | None, overrides: Mapping[str, Any]) -> ConnectionOptions:
    """Returns the options of a client made with `address` (or the environment's) and keyword overrides."""
    if isinstance(address, ConnectionOptions):
        return replace(address, **overrides)
    if address is not None:
        return ConnectionOptions.from_env(address=address, **overrides)
    return ConnectionOptions.from_env(**overrides)


def deadline_of(options: ConnectionOptions, call: Call[Any]) -> float | None:
    """Returns the timeout of one try of `call`: the configured deadline plus the time the server may wait."""
    if options.timeout is None or call.wait is None:
        return None
    return options.timeout + call.wait


def retry_delay(error: StoreError, delays: Iterator[float]) -> float | None:
    """Returns how long to wait before retrying after `error`, or None to give up."""
    return next(delays, None) if isinstance(error, Unavailable) else None


def _blocking(spec: Callable[P, Call[R]]) -> Callable[Concatenate[Client, P], R]:
    """Makes a method of `Client` that sends the call `spec` builds and returns its result."""

    @functools.wraps(spec)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.call(spec(*args, **kwargs))

    return method


class Client:
    """A synchronous lightning-store client.

    `Client()` reads `LIGHTNING_STORE_SERVER`, `LIGHTNING_STORE_TOKEN` and
    `LIGHTNING_STORE_NAMESPACE`; `Client("host:port", token=..., timeout=...)`
    or `Client(ConnectionOptions(...))` say it explicitly.
    `Client("host:port", namespace="run-a")` works in namespace `run-a`: every
    call and stream carries the `lightning-store-namespace` metadata (None, the
    default: the `default` namespace). Errors are
    `lightning_store.errors.StoreError` subclasses; calls that are safe to
    repeat are retried with backoff while the server is unavailable.
    """

    def __init__(self, address: str | ConnectionOptions | None = None, **options: Any) -> None:
        self.options = resolve_options(address, options)
        """The connection options."""
        credentials = self.options.credentials()
        channel_options = self.options.channel_options(USER_AGENT)
        self._channel = (
            grpc.secure_channel(self.options.target, credentials, channel_options)
            if credentials is not None
            else grpc.insecure_channel(self.options.target, channel_options)
        )
        self.stub = store_pb2_grpc.LightningStoreServiceStub(self._channel)
        """The generated stub, for calls the client does not wrap."""
        self.metadata = self.options.call_metadata()
        """The metadata sent with every call."""
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> ConnectionOptions:
        return self.options

    def __setstate__(self, options: ConnectionOptions) -> None:
        self.__init__(options)  # type: ignore[misc]

    def close(self) -> None:
        """Closes the channel; calls in flight are cancelled."""
        self._channel.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False)

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def call(self, call: Call[R]) -> R:
        """Sends a unary call, retrying it while the server is unavailable if it is safe to repeat."""
        method = getattr(self.stub, call.method)
        delays = self.options.retry.delays() if call.safe else iter(())
        while True:
            try:
                response = method(call.request, **self._call_arguments(call))
            except grpc.RpcError as rpc_error:
                error = error_from_rpc(rpc_error)
                delay = retry_delay(error, delays)
                if delay is None:
                    raise error from None
                time.sleep(delay)
                continue
            return call.parse(response)

    async def call_async(self, call: Call[R]) -> R:
        """Awaits a unary call from any event loop, without blocking it; retries as `call` does.

        The call runs on a thread of the client's pool: the channel belongs to
        no event loop, so one client serves every loop and thread of a process
        (an `AsyncClient` is bound to one loop), and a process that used it
        can still fork (gRPC supports `fork` for its blocking stack only). At
        most `ASYNC_THREADS` calls run at once; more wait their turn.
        """
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(ASYNC_THREADS, thread_name_prefix="lightning-store")
            pool = self._pool
        return await asyncio.get_running_loop().run_in_executor(pool, self.call, call)

    def _call_arguments(self, call: Call[Any]) -> dict[str, Any]:
        return {
            "timeout": deadline_of(self.options, call),
            "metadata": self.metadata,
            "wait_for_ready": self.options.wait_for_ready,
        }

    get_capabilities = _blocking(calls.get_capabilities)
    get_statistics = _blocking(calls.get_statistics)
    start_rollout = _blocking(calls.start_rollout)
    enqueue_rollout = _blocking(calls.enqueue_rollout)
    enqueue_rollouts = _blocking(calls.enqueue_rollouts)
    dequeue_rollout = _blocking(calls.dequeue_rollout)
    dequeue_rollouts = _blocking(calls.dequeue_rollouts)
    start_attempt = _blocking(calls.start_attempt)
    add_span = _blocking(calls.add_span)
    add_spans = _blocking(calls.add_spans)
    next_span_sequence_id = _blocking(calls.next_span_sequence_id)
    span_sequence_ids = _blocking(calls.span_sequence_ids)
    query_rollouts = _blocking(calls.query_rollouts)
    get_rollout = _blocking(calls.get_rollout)
    update_rollout = _blocking(calls.update_rollout)
    query_attempts = _blocking(calls.query_attempts)
    get_latest_attempt = _blocking(calls.get_latest_attempt)
    update_attempt = _blocking(calls.update_attempt)
    update_attempts = _blocking(calls.update_attempts)
    wait_for_rollouts = _blocking(calls.wait_for_rollouts)
    query_spans = _blocking(calls.query_spans)
    add_resources = _blocking(calls.add_resources)
    update_resources = _blocking(calls.update_resources)
    get_resources = _blocking(calls.get_resources)
    get_latest_resources = _blocking(calls.get_latest_resources)
    query_resources = _blocking(calls.query_resources)
    query_workers = _blocking(calls.query_workers)
    get_worker = _blocking(calls.get_worker)
    update_worker = _blocking(calls.update_worker)
    training_summary = _blocking(calls.training_summary)
    reward_timeline = _blocking(calls.reward_timeline)
    compare_versions = _blocking(calls.compare_versions)
    create_namespace = _blocking(calls.create_namespace)
    list_namespaces = _blocking(calls.list_namespaces)
    delete_namespace = _blocking(calls.delete_namespace)

    def watch_completions(
        self, rollout_ids: Iterable[str], *, timeout: float | None = None
    ) -> Stream[CompletionWatch, types.Rollout]:
        """Yields each rollout (with its latest attempt) once it is terminal: finished ones first.

        Ends once every known rollout was yielded (unknown ids are skipped) or
        after `timeout` seconds. Reconnects when the server restarts, without
        losing or repeating a rollout.
        """
        return Stream(self, CompletionWatch(rollout_ids, timeout))

    def events(
        self,
        *,
        after: int | None = None,
        kinds: Iterable[EventKindName] = (),
        rollout_ids: Iterable[str] = (),
        rollout_status_in: Iterable[RolloutStatusName] = (),
        attempt_status_in: Iterable[AttemptStatusName] = (),
    ) -> Stream[EventSubscription, types.Event]:
        """Yields the store's change events after sequence number `after` (None: from now on), forever.

        Reconnects after a server restart or a cut-off for reading too slowly,
        resuming after the last event yielded (`stream.state.cursor`): no gap,
        no duplicate. Empty filters match everything.
        """
        subscription = EventSubscription(after, kinds, rollout_ids, rollout_status_in, attempt_status_in)
        return Stream(self, subscription)

    def worker_session(
        self,
        worker_id: str,
        *,
        slots: int = 1,
        heartbeat_interval: float = 10.0,
        heartbeat_stats: Callable[[], Mapping[str, Any]] | None = None,
        on_revoked: Callable[[Assignment], None] | None = None,
    ) -> WorkerSession:
        """Opens a worker session: the server pushes up to `slots` assignments at a time.

        Heartbeats go every `heartbeat_interval` seconds (with `heartbeat_stats()`
        when given). `on_revoked` is called from the session's thread when the
        server revokes a held attempt.
        """
        state = SessionState(worker_id, slots, heartbeat_stats, on_revoked)
        return WorkerSession(self, state, heartbeat_interval)


class Stream(Generic[S, Item]):
    """A resumable server stream: iterate it; `close()` ends it from any thread."""

    def __init__(self, client: Client, state: S) -> None:
        self.state = state
        """What the stream delivered so far (e.g. `state.cursor` of an event subscription)."""
        self._client = client
        self._call: Any = None
        self._closed = False
        self._items: Iterator[Item] = self._run(self._confirmed() if state.handshake else None)

    def _open(self, request: Any) -> Any:
        self._call = getattr(self._client.stub, self.state.method)(request, metadata=self._client.metadata)
        return self._call

    def _confirmed(self) -> Any:
        """Opens the first connection and waits for the server to confirm it, retrying while it is unavailable."""
        delays = self._client.options.retry.delays()
        while True:
            call = self._open(self.state.request())
            try:
                self.state.receive(next(call))
                return call
            except StopIteration:
                return call
            except grpc.RpcError as rpc_error:
                call.cancel()
                error = error_from_rpc(rpc_error)
                delay = retry_delay(error, delays)
                if delay is None:
                    raise error from None
                time.sleep(delay)

    def __iter__(self) -> Stream[S, Item]:
        return self

    def __next__(self) -> Item:
        return next(self._items)

    def __enter__(self) -> Stream[S, Item]:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Ends the stream: a blocked iteration stops."""
        self._closed = True
        if self._call is not None:
            self._call.cancel()

    def _run(self, call: Any) -> Iterator[Item]:
        """Yields the items of `call` (or of a new connection), reconnecting while the state says so."""
        delays: Iterator[float] | None = None
        while not self._closed:
            if call is None:
                request = self.state.request()
                if request is None:
                    return
                call = self._open(request)
            error: StoreError | None = None
            try:
                for message in call:
                    delays = None  # the connection works: a later failure starts a fresh backoff
                    item = self.state.receive(message)
                    if item is not None:
                        yield item
            except grpc.RpcError as rpc_error:
                error = error_from_rpc(rpc_error)
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
            time.sleep(delay)


class WorkerSession:
    """A runner's session: iterate it for assignments; `close()` (or leaving `with`) ends it.

    The session reconnects when its server restarts or goes away (to any
    server behind the address): held assignments the new connection adopted
    stay held under its owner epoch, the others are revoked (`not adopted`),
    and adopted attempts this process does not hold are handed to the
    runner as assignments (`adopted=True`). Errors that end the session
    (ABORTED when another session of the same worker replaced it) are
    raised by the iteration.
    """

    def __init__(self, client: Client, state: SessionState, heartbeat_interval: float) -> None:
        self._client = client
        self._state = state
        self._heartbeat_interval = heartbeat_interval
        self._inbox: queue.Queue[Assignment | StoreError | None] = queue.Queue()
        self._outbox: queue.Queue[pb.WorkerSessionRequest | None] = queue.Queue()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._settled = threading.Event()  # opened once, or failed for good
        self._opened_now = False  # this connection opened: a later failure starts a fresh backoff
        self._call: Any = None
        self._failure: StoreError | None = None
        self._thread = threading.Thread(target=self._run, name=f"worker-session-{state.worker_id}", daemon=True)
        self._thread.start()
        if not self._settled.wait(client.options.timeout):
            self.close()
            raise Unavailable(grpc.StatusCode.UNAVAILABLE, f"the session of worker {state.worker_id} did not open")
        if self._failure is not None:
            raise self._failure

    @property
    def worker_id(self) -> str:
        """Returns the session's worker id."""
        return self._state.worker_id

    @property
    def held(self) -> list[Assignment]:
        """Returns the assignments not yet released."""
        return list(self._state.held.values())

    def __iter__(self) -> WorkerSession:
        return self

    def __next__(self) -> Assignment:
        assignment = self.next_assignment(None)
        if assignment is None:
            raise StopIteration
        return assignment

    def next_assignment(self, timeout: float | None) -> Assignment | None:
        """Returns the next assignment, waiting up to `timeout` seconds (None: until one comes or the session ends).

        Returns None on timeout and once the session is closed; raises the error that ended the session.
        """
        try:
            item = self._inbox.get(timeout=timeout)
        except queue.Empty:
            return None
        if item is None or isinstance(item, StoreError):
            self._inbox.put(item)  # later calls see the end too
            if item is None:
                return None
            raise item
        return item

    def release(self, assignment: Assignment) -> None:
        """Frees the slot of an assignment (also `assignment.release()`)."""
        message = self._state.release_message(assignment)
        if message is not None:
            with self._lock:
                self._outbox.put(message)

    def close(self) -> None:
        """Ends the session cleanly: the worker is `idle`, or `busy` while it holds unfinished attempts.

        Those go `unresponsive` after the server's grace period unless a new
        session of the worker adopts them.
        """
        self._stopping.set()
        with self._lock:
            self._outbox.put(None)
        self._thread.join(self._client.options.timeout)
        if self._call is not None:
            self._call.cancel()

    def __enter__(self) -> WorkerSession:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _requests(self, outbox: queue.Queue[pb.WorkerSessionRequest | None]) -> Iterator[pb.WorkerSessionRequest]:
        yield self._state.open_message()
        while True:
            try:
                message = outbox.get(timeout=self._heartbeat_interval)
            except queue.Empty:
                yield self._state.heartbeat_message()
                continue
            if message is None:
                return
            yield message

    def _connect(self) -> None:
        """Reads one connection's messages until it ends."""
        outbox: queue.Queue[pb.WorkerSessionRequest | None] = queue.Queue()
        with self._lock:
            self._outbox = outbox
        self._call = self._client.stub.WorkerSession(self._requests(outbox), metadata=self._client.metadata)
        try:
            for message in self._call:
                assignment = self._state.receive(message, self.release)
                if assignment is not None:
                    self._inbox.put(assignment)
                elif message.HasField("opened"):
                    self._take_up()
                    self._opened_now = True
                    self._settled.set()
        except StoreError:
            self._call.cancel()  # the next connection adopts again
            raise
        finally:
            outbox.put(None)

    def _take_up(self) -> None:
        """Hands the runner the adopted attempts this process does not hold (see `SessionState.take_up`)."""
        for key in self._state.unheld_adoptions():
            rollout: types.Rollout | None = None
            resources: types.ResourcesUpdate | None = None
            try:
                rollout = self._client.get_rollout(key[0])
                if rollout.HasField("resources_id"):
                    resources = self._client.get_resources(rollout.resources_id)
            except NotFound:
                pass
            taken = self._state.take_up(key, rollout, resources, self.release)
            if isinstance(taken, Assignment):
                self._inbox.put(taken)
            else:
                with self._lock:
                    self._outbox.put(taken)

    def _run(self) -> None:
        delays: Iterator[float] | None = None
        while not self._stopping.is_set():
            try:
                self._connect()
                error: StoreError = Unavailable(grpc.StatusCode.UNAVAILABLE, "the server ended the session")
            except grpc.RpcError as rpc_error:
                error = error_from_rpc(rpc_error)
            except StoreError as store_error:  # taking up an adopted attempt failed
                error = store_error
            if self._stopping.is_set():
                break
            if self._opened_now:
                delays, self._opened_now = None, False
            delays = delays or self._client.options.retry.delays()
            delay = retry_delay(error, delays)
            if delay is None:
                self._failure = error
                self._inbox.put(error)
                self._settled.set()
                return
            self._stopping.wait(delay)
        self._inbox.put(None)
