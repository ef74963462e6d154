"""pytest fixtures that run a test against a real lightning-store server (the pytest plugin `lightning_store`).

Installed with the package (entry point `pytest11`), so nothing needs
registering:

- `lightning_store_server`: a fresh server for the test, started from the
  installed binary on a free loopback port; yields a `RunningServer` with its
  `address` and a ready sync `Client`, and stops the server after the test.
- `lightning_store_async_server`: the same with an `AsyncClient`, for
  `async def` tests (run by pytest-asyncio, or anyio).
- `lightning_store_backend` (`"memory"`) and `lightning_store_args` (none):
  override them, in a conftest.py or with `pytest.mark.parametrize`, to choose
  the backend (`"sqlite"`: a database file in a temporary directory) and further
  `lightning-store serve` options.

The server of each test is new (an empty store); a memory server starts in
milliseconds. For a server shared by several tests, use
`lightning_store.local_server.LocalServer` in a fixture of a wider scope.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import pytest

from lightning_store.aio import AsyncClient
from lightning_store.client import Client
from lightning_store.local_server import LocalServer
from lightning_store.options import ConnectionOptions

# Optional (see async_fixture): the plugin of whoever runs async tests with it.
pytest_asyncio = importlib.import_module("pytest_asyncio") if importlib.util.find_spec("pytest_asyncio") else None

__all__ = [
    "RunningServer",
    "lightning_store_args",
    "lightning_store_async_server",
    "lightning_store_backend",
    "lightning_store_server",
]

ClientT = TypeVar("ClientT", Client, AsyncClient)


def async_fixture(function: Callable[..., AsyncIterator[object]]) -> object:
    """Declares an async fixture with pytest-asyncio's decorator where it is installed, else as a plain fixture.

    pytest-asyncio's strict mode (agent-lightning's) runs only the async fixtures
    it declared itself; anyio's plugin runs plain ones.
    """
    if pytest_asyncio is None:
        return pytest.fixture(function)
    return pytest_asyncio.fixture(function)


@dataclass(frozen=True)
class RunningServer(Generic[ClientT]):
    """What the server fixtures yield: the running server and a client connected to it."""

    server: LocalServer
    """The server process: `stop()`, `start()`, `restart()` (same port and database), `kill()`, `log`."""
    client: ClientT
    """A client of the server, closed after the test; it reconnects across restarts."""

    @property
    def address(self) -> str:
        """The server's `host:port` (the same after a restart)."""
        return self.server.address


@pytest.fixture
def lightning_store_backend() -> str:
    """The backend of the server fixtures: `"memory"`; override it to choose (`"sqlite"`)."""
    return "memory"


@pytest.fixture
def lightning_store_args() -> Sequence[str]:
    """Further `lightning-store serve` options of the server fixtures: none; override it to add some."""
    return ()


def _options(server: LocalServer) -> ConnectionOptions:
    # Not from the environment: a token there (LIGHTNING_STORE_TOKEN) is for another server.
    return ConnectionOptions(address=server.address)


def _server(backend: str, args: Sequence[str], tmp_path_factory: pytest.TempPathFactory) -> LocalServer:
    database = tmp_path_factory.mktemp("lightning-store") / "store.db" if backend == "sqlite" else None
    return LocalServer(backend, database, args=args)


@pytest.fixture
def lightning_store_server(
    lightning_store_backend: str, lightning_store_args: Sequence[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer[Client]]:
    """A fresh lightning-store server for one test, with a sync client; stopped after the test."""
    server = _server(lightning_store_backend, lightning_store_args, tmp_path_factory)
    with server, Client(_options(server)) as client:
        yield RunningServer(server, client)


@async_fixture
async def lightning_store_async_server(
    lightning_store_backend: str, lightning_store_args: Sequence[str], tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RunningServer[AsyncClient]]:
    """A fresh lightning-store server for one async test, with an asyncio client; stopped after the test."""
    server = _server(lightning_store_backend, lightning_store_args, tmp_path_factory)
    await asyncio.to_thread(server.start)  # the event loop runs on while the server starts
    try:
        async with AsyncClient(_options(server)) as client:
            yield RunningServer(server, client)
    finally:
        await asyncio.to_thread(server.close)
