"""Python client of lightning-store, agent-lightning's LightningStore as a gRPC service.

- `Client` (blocking) and `AsyncClient` (asyncio): every RPC as a typed method,
  resumable `watch_completions` and `events` streams, worker sessions.
- `ConnectionOptions`: address, TLS, token, namespace, deadlines and retries in
  one place; `Client("host:port", namespace="run-a")` works in namespace run-a.
- `lightning_store.errors`: one exception per gRPC status code.
- `lightning_store.agentlightning.LightningStore` (extra `[agentlightning]`):
  agent-lightning 0.3's `LightningStore` interface over gRPC, for its Trainer
  and runners.
- `lightning_store.proto`: the generated messages and stubs.
- `lightning_store.local_server.LocalServer` and the pytest fixtures
  (`lightning_store.pytest_plugin`): the installed server binary, started on a
  free loopback port, for tests.
"""

from lightning_store._version import __version__
from lightning_store.aio import AsyncClient, AsyncStream, AsyncWorkerSession
from lightning_store.calls import LATEST, Page, attempt_update, rollout_spec
from lightning_store.client import Client, Stream, WorkerSession
from lightning_store.errors import (
    Aborted,
    AlreadyExists,
    AttemptRevoked,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    StoreError,
    Unauthenticated,
    Unavailable,
)
from lightning_store.options import ConnectionOptions, RetryPolicy, TlsOptions
from lightning_store.session import Assignment
from lightning_store.values import UNSET, Unset, from_attributes, from_json, rollout_config, to_attributes

__all__ = [
    "LATEST",
    "UNSET",
    "Aborted",
    "AlreadyExists",
    "Assignment",
    "AsyncClient",
    "AsyncStream",
    "AsyncWorkerSession",
    "AttemptRevoked",
    "Client",
    "ConnectionOptions",
    "DeadlineExceeded",
    "FailedPrecondition",
    "InvalidArgument",
    "NotFound",
    "OutOfRange",
    "Page",
    "PermissionDenied",
    "ResourceExhausted",
    "RetryPolicy",
    "StoreError",
    "Stream",
    "TlsOptions",
    "Unauthenticated",
    "Unavailable",
    "Unset",
    "WorkerSession",
    "__version__",
    "attempt_update",
    "from_attributes",
    "from_json",
    "rollout_config",
    "rollout_spec",
    "to_attributes",
]
