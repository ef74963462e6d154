"""What a worker session holds: its assignments, their slots and revocations.

The sync `WorkerSession` (client.py) and the asyncio `AsyncWorkerSession`
(aio.py) share this state and differ only in how they move messages. The
server pushes an assignment into each free slot (the session's credits); a
slot is free again once the runner releases the assignment. A revocation
marks the held assignment, calls the `on_revoked` callback, and makes
`Assignment.check()` raise `AttemptRevoked`.

Every connection is a new session in the store with a new owner epoch (the
fencing token writes present). On reconnect the server adopts the worker's
live attempts: held assignments it adopted carry on under the new epoch,
held ones it did not adopt (finished meanwhile, or retried elsewhere) are
revoked (`not adopted`), and adopted attempts this process does not hold
(pushed just before a server died, or held by an earlier process of the
worker) are taken up: handed to the runner as assignments, since an
attempt nobody runs would hold its slot and never be retried.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from lightning_store.errors import AttemptRevoked
from lightning_store.proto import store_pb2 as pb
from lightning_store.proto import types_pb2 as types
from lightning_store.values import to_json

__all__ = ["Assignment", "SessionState"]

_REASONS = {
    pb.REVOCATION_REASON_CANCELLED: "cancelled",
    pb.REVOCATION_REASON_TIMEOUT: "timeout",
    pb.REVOCATION_REASON_UNRESPONSIVE: "unresponsive",
}
NOT_ADOPTED = "not adopted"
"""The revocation of a held assignment the session's new connection did not adopt."""


class Assignment:
    """A rollout the server handed to this session, with its new attempt; holds one slot until released.

    Use it as a context manager to release the slot when done:
    `with assignment: ...`. Present `owner_epoch` with the attempt's writes
    (`update_attempt`, `add_span`, `add_spans`): a `FailedPrecondition`
    answer means another owner has the attempt now, so stop working on it.
    """

    def __init__(
        self,
        rollout: types.Rollout,
        resources: types.ResourcesUpdate | None,
        release: Callable[[Assignment], None],
        owner_epoch: int,
        *,
        adopted: bool = False,
    ) -> None:
        self.rollout = rollout
        """The rollout with its attempt in `rollout.attempt` (new and `preparing` unless adopted)."""
        self.resources = resources
        """The resources snapshot the rollout names, if any."""
        self.owner_epoch = owner_epoch
        """The owner epoch of the session that owns the attempt; it changes when a reconnection adopts it."""
        self.adopted = adopted
        """Whether the attempt came from the worker's previous session instead of a push (it may be running)."""
        self.revocation: str | None = None
        """Why the attempt must stop (`cancelled`, `timeout`, `unresponsive`, `not adopted`), or None."""
        self._release = release

    @property
    def rollout_id(self) -> str:
        """Returns the rollout's id."""
        return self.rollout.rollout_id

    @property
    def attempt_id(self) -> str:
        """Returns the attempt's id."""
        return self.rollout.attempt.attempt_id

    @property
    def revoked(self) -> bool:
        """Tells whether the server revoked the attempt: stop working on it."""
        return self.revocation is not None

    def check(self) -> None:
        """Raises `AttemptRevoked` once the server revoked the attempt; call it between steps of the work."""
        if self.revocation is not None:
            raise AttemptRevoked(self.rollout_id, self.attempt_id, self.revocation)

    def release(self) -> None:
        """Frees the slot: the server may push the next assignment. Releasing twice does nothing."""
        self._release(self)

    def __enter__(self) -> Assignment:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        revoked = f", revoked: {self.revocation}" if self.revocation else ""
        return f"Assignment({self.rollout_id}, {self.attempt_id}{revoked})"

    def revoke(self, reason: str) -> None:
        """Marks the attempt revoked (called by the session)."""
        self.revocation = reason


class SessionState:
    """The assignments a session holds, and the messages it sends."""

    def __init__(
        self,
        worker_id: str,
        slots: int,
        heartbeat_stats: Callable[[], Mapping[str, Any]] | None,
        on_revoked: Callable[[Assignment], None] | None,
    ) -> None:
        self.worker_id = worker_id
        self.slots = slots
        self.held: dict[tuple[str, str], Assignment] = {}
        """Assignments not yet released, by (rollout id, attempt id)."""
        self.adopted: list[tuple[str, str]] = []
        """Attempts the server handed over from this worker's previous session at the latest opening."""
        self.owner_epoch = 0
        """The owner epoch of the latest opening."""
        self._heartbeat_stats = heartbeat_stats
        self._on_revoked = on_revoked
        self._lock = threading.Lock()

    def open_message(self) -> pb.WorkerSessionRequest:
        """Returns the first message of every connection."""
        return pb.WorkerSessionRequest(open=pb.OpenSession(worker_id=self.worker_id, slots=self.slots))

    def heartbeat_message(self) -> pb.WorkerSessionRequest:
        """Returns a heartbeat, with the worker's statistics when a provider was given."""
        stats = to_json(dict(self._heartbeat_stats())) if self._heartbeat_stats is not None else ""
        return pb.WorkerSessionRequest(heartbeat=pb.SessionHeartbeat(heartbeat_stats_json=stats))

    def release_message(self, assignment: Assignment) -> pb.WorkerSessionRequest | None:
        """Forgets a held assignment; returns the message freeing its slot, or None if it was released already."""
        key = (assignment.rollout_id, assignment.attempt_id)
        with self._lock:
            if self.held.pop(key, None) is None:
                return None
        return pb.WorkerSessionRequest(release=pb.ReleaseAssignment(rollout_id=key[0], attempt_id=key[1]))

    def receive(self, message: pb.WorkerSessionResponse, release: Callable[[Assignment], None]) -> Assignment | None:
        """Records a server message; returns a new assignment to hand to the runner."""
        which = message.WhichOneof("message")
        if which == "opened":
            self._opened(message.opened)
            return None
        if which == "assignment":
            pushed = message.assignment
            resources = pushed.resources if pushed.HasField("resources") else None
            assignment = Assignment(pushed.rollout, resources, release, pushed.owner_epoch)
            with self._lock:
                self.held[(assignment.rollout_id, assignment.attempt_id)] = assignment
            return assignment
        if which == "revoked":
            with self._lock:
                held = self.held.get((message.revoked.rollout_id, message.revoked.attempt_id))
            if held is not None:
                self._revoke(held, _REASONS.get(message.revoked.reason, "unknown"))
        return None

    def _opened(self, opened: pb.SessionOpened) -> None:
        """Moves the held assignments the new session adopted to its epoch and revokes the others."""
        self.adopted = [(ref.rollout_id, ref.attempt_id) for ref in opened.adopted]
        self.owner_epoch = opened.owner_epoch
        with self._lock:
            held = list(self.held.items())
        for key, assignment in held:
            if key in self.adopted:
                assignment.owner_epoch = opened.owner_epoch
            elif not assignment.revoked:
                self._revoke(assignment, NOT_ADOPTED)

    def _revoke(self, assignment: Assignment, reason: str) -> None:
        assignment.revoke(reason)
        if self._on_revoked is not None:
            self._on_revoked(assignment)

    def unheld_adoptions(self) -> list[tuple[str, str]]:
        """Returns the attempts the latest opening adopted that this process does not hold: take each up."""
        with self._lock:
            return [key for key in self.adopted if key not in self.held]

    def take_up(
        self,
        key: tuple[str, str],
        rollout: types.Rollout | None,
        resources: types.ResourcesUpdate | None,
        release: Callable[[Assignment], None],
    ) -> Assignment | pb.WorkerSessionRequest:
        """Returns the assignment of an adopted attempt (`rollout` as read from the store).

        When the rollout is gone or its latest attempt is no longer `key`'s
        (it moved on since the opening), returns the message freeing the slot.
        """
        if rollout is None or (rollout.rollout_id, rollout.attempt.attempt_id) != key:
            return pb.WorkerSessionRequest(release=pb.ReleaseAssignment(rollout_id=key[0], attempt_id=key[1]))
        assignment = Assignment(rollout, resources, release, self.owner_epoch, adopted=True)
        with self._lock:
            self.held[key] = assignment
        return assignment
