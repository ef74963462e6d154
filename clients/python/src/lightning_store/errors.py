"""The exceptions of the client: one class per gRPC status code the server uses.

Each carries the status code, the server's message and its trailing metadata
(which hold the `x-request-id` of the call, as logged by the server). Lookup
and validation errors also derive from Python's `LookupError` and
`ValueError`, so generic handlers catch them.
"""

from __future__ import annotations

from typing import Any

import grpc

__all__ = [
    "Aborted",
    "AttemptRevoked",
    "DeadlineExceeded",
    "FailedPrecondition",
    "InvalidArgument",
    "NotFound",
    "OutOfRange",
    "PermissionDenied",
    "ResourceExhausted",
    "StoreError",
    "Unauthenticated",
    "Unavailable",
    "error_from_rpc",
]


class StoreError(Exception):
    """A call failed with a gRPC status."""

    def __init__(self, code: grpc.StatusCode, details: str, trailers: tuple[tuple[str, Any], ...] = ()) -> None:
        super().__init__(details)
        self.code = code
        """The gRPC status code."""
        self.details = details
        """The server's message, e.g. `Rollout ro-0123456789ab not found`."""
        self.trailers = trailers
        """The call's trailing metadata."""

    def trailer(self, key: str) -> str | None:
        """Returns the value of a trailing metadata key, or None."""
        return next((str(value) for k, value in self.trailers if k == key), None)

    @property
    def request_id(self) -> str | None:
        """Returns the id under which the server logged the call."""
        return self.trailer("x-request-id")

    def __str__(self) -> str:
        return f"{self.code.name}: {self.details}"


class NotFound(StoreError, LookupError):
    """An unknown rollout, attempt, resources snapshot, worker or namespace (NOT_FOUND)."""


class AlreadyExists(StoreError):
    """A namespace of that name exists already (ALREADY_EXISTS)."""


class InvalidArgument(StoreError, ValueError):
    """Malformed input: nothing was written (INVALID_ARGUMENT)."""


class FailedPrecondition(StoreError):
    """The store's state does not allow the call, e.g. evicted spans (FAILED_PRECONDITION)."""


class OutOfRange(StoreError):
    """An event subscription asked for history the store no longer keeps (OUT_OF_RANGE)."""


class ResourceExhausted(StoreError):
    """A message over the size limit, a subscriber that read too slowly, or a namespace's quota (RESOURCE_EXHAUSTED)."""


class Unavailable(StoreError):
    """The server is shutting down or unreachable (UNAVAILABLE)."""


class DeadlineExceeded(StoreError, TimeoutError):
    """The call's deadline passed (DEADLINE_EXCEEDED)."""


class Aborted(StoreError):
    """A worker session was replaced by a newer session of the same worker (ABORTED)."""


class Unauthenticated(StoreError):
    """A missing or invalid token (UNAUTHENTICATED)."""


class PermissionDenied(StoreError):
    """The token's role does not allow the call (PERMISSION_DENIED)."""


class AttemptRevoked(Exception):
    """The server revoked a held attempt: its rollout was cancelled, or it timed out or became unresponsive."""

    def __init__(self, rollout_id: str, attempt_id: str, reason: str) -> None:
        super().__init__(f"attempt {attempt_id} of rollout {rollout_id} was revoked: {reason}")
        self.rollout_id = rollout_id
        self.attempt_id = attempt_id
        self.reason = reason
        """`cancelled`, `timeout` or `unresponsive`."""


_BY_CODE: dict[grpc.StatusCode, type[StoreError]] = {
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRange,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
}


def error_from_rpc(error: grpc.RpcError) -> StoreError:
    """Returns the exception for a failed gRPC call (sync or asyncio)."""
    if isinstance(error, (grpc.Call, grpc.aio.AioRpcError)):
        code, details, trailers = error.code(), error.details() or "", error.trailing_metadata() or ()
    else:  # an RpcError without status, raised before the call started
        code, details, trailers = grpc.StatusCode.UNKNOWN, str(error), ()
    return _BY_CODE.get(code, StoreError)(code, details, tuple(trailers))
