"""What the resumable streams remember, so that a reconnection continues without gaps or duplicates.

A stream's state builds each (re)connection's request from what was already
delivered, turns messages into items, and decides whether a failure ends the
iteration or calls for a reconnection. The sync and asyncio clients drive the
same states; only their loops differ.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, Generic, Protocol, TypeVar

import grpc
from google.protobuf.duration_pb2 import Duration

from lightning_store.errors import StoreError
from lightning_store.proto import store_pb2 as pb
from lightning_store.proto import types_pb2 as types
from lightning_store.values import (
    ATTEMPT_STATUS,
    EVENT_KIND,
    ROLLOUT_STATUS,
    AttemptStatusName,
    EventKindName,
    RolloutStatusName,
)

__all__ = ["CompletionWatch", "EventSubscription", "StreamState", "resumes"]

Item_co = TypeVar("Item_co", covariant=True)


class StreamState(Protocol, Generic[Item_co]):
    """The state of a resumable server stream."""

    method: str
    """The streaming RPC's name."""
    handshake: bool
    """Whether the server's first message confirms the subscription: opening waits for it."""

    def request(self) -> Any | None:
        """Returns the request of the next connection, or None when nothing is left to receive."""

    def receive(self, message: Any) -> Item_co | None:
        """Records a message; returns the item to deliver, if any."""

    def resumes_after(self, error: StoreError) -> bool:
        """Tells whether a failed connection is resumed (True) or ends the iteration (False).

        Raises `error` when the caller must see it.
        """

    def resumes_after_end(self) -> bool:
        """Tells whether a connection the server ended normally is resumed."""


def resumes(state: StreamState[Any], error: StoreError | None) -> bool:
    """Tells whether a connection that ended (normally when `error` is None) is resumed; may raise `error`."""
    return state.resumes_after_end() if error is None else state.resumes_after(error)


class CompletionWatch:
    """`WatchRolloutCompletions`: rollouts not yet delivered are asked for again after a reconnection.

    A rollout that is terminal when a connection opens is sent first, so one
    that finished while disconnected is not lost; one already delivered is not
    asked for again, so none is delivered twice.
    """

    method = "WatchRolloutCompletions"
    handshake = False  # terminal rollouts stay terminal: a late start misses nothing

    def __init__(self, rollout_ids: Iterable[str], timeout: float | None) -> None:
        self.pending: dict[str, None] = dict.fromkeys(rollout_ids)
        """Rollouts not yet delivered, in the order asked."""
        self._deadline = None if timeout is None else time.monotonic() + timeout

    def request(self) -> pb.WatchRolloutCompletionsRequest | None:
        if not self.pending:
            return None
        if self._deadline is None:
            return pb.WatchRolloutCompletionsRequest(rollout_ids=list(self.pending))
        left = self._deadline - time.monotonic()
        if left <= 0:
            return None
        timeout = Duration()
        timeout.FromNanoseconds(round(left * 1e9))
        return pb.WatchRolloutCompletionsRequest(rollout_ids=list(self.pending), timeout=timeout)

    def receive(self, message: pb.WatchRolloutCompletionsResponse) -> types.Rollout:
        self.pending.pop(message.rollout.rollout_id, None)
        return message.rollout

    def resumes_after(self, error: StoreError) -> bool:
        if error.code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return False  # the watch's own timeout: the iteration ends
        if error.code == grpc.StatusCode.UNAVAILABLE:
            return True
        raise error

    def resumes_after_end(self) -> bool:
        return False  # every known rollout was delivered; unknown ids are never sent


class EventSubscription:
    """`WatchEvents`: a reconnection asks for the events after the last one delivered.

    Without a starting point, the first connection's `progress` message gives
    one, so events committed while reconnecting are not lost. The server's
    history is durable on SQLite and PostgreSQL: a subscription survives a
    server restart there. Asking for history older than the server keeps
    raises `OutOfRange`.
    """

    method = "WatchEvents"
    handshake = True  # "from now on" starts at the server's progress message

    def __init__(
        self,
        after: int | None,
        kinds: Iterable[EventKindName],
        rollout_ids: Iterable[str],
        rollout_status_in: Iterable[RolloutStatusName],
        attempt_status_in: Iterable[AttemptStatusName],
    ) -> None:
        self.cursor = after
        """Sequence number of the last event delivered (or of the starting point)."""
        self.progress: pb.WatchProgress | None = None
        """The server's history at the latest connection: its latest and oldest retained sequence numbers."""
        self._filters = {
            "kinds": [EVENT_KIND.value(k) for k in kinds],
            "rollout_ids": list(rollout_ids),
            "rollout_status_in": [ROLLOUT_STATUS.value(s) for s in rollout_status_in],
            "attempt_status_in": [ATTEMPT_STATUS.value(s) for s in attempt_status_in],
        }

    def request(self) -> pb.WatchEventsRequest:
        return pb.WatchEventsRequest(after_seq=self.cursor, **self._filters)

    def receive(self, message: pb.WatchEventsResponse) -> types.Event | None:
        if message.HasField("progress"):
            self.progress = message.progress
            if self.cursor is None:
                self.cursor = message.progress.latest_seq
            return None
        self.cursor = message.event.seq
        return message.event

    def resumes_after(self, error: StoreError) -> bool:
        # UNAVAILABLE: the server shut down; RESOURCE_EXHAUSTED: this subscriber read too slowly.
        if error.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED):
            return True
        raise error

    def resumes_after_end(self) -> bool:
        return True  # the server never ends a subscription on its own: treat it as a drop
