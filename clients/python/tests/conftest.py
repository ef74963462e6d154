"""Fixtures: a fresh real server per test, on the memory and SQLite backends, and clients of it."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

from lightning_store import Client
from tests.server import Server


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Runs `async def` tests in a fresh event loop (no plugin needed in the bare test environment)."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    arguments = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(pyfuncitem.obj(**arguments))
    return True


@pytest.fixture(params=["memory", "sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    """The storage backend of the server under test."""
    return str(request.param)


def start_server(backend: str, tmp_path: Path, *extra: str) -> Server:
    """Starts a server on `backend`; SQLite databases go in `tmp_path`."""
    database = tmp_path / "store.db" if backend == "sqlite" else None
    return Server(backend, database, *extra).start()


@pytest.fixture
def server(backend: str, tmp_path: Path) -> Iterator[Server]:
    """A fresh server (empty store) for one test."""
    running = start_server(backend, tmp_path)
    yield running
    running.kill()


@pytest.fixture
def sqlite_server(tmp_path: Path) -> Iterator[Server]:
    """A fresh SQLite server, for tests that restart it."""
    running = start_server("sqlite", tmp_path)
    yield running
    running.kill()


@pytest.fixture
def client(server: Server) -> Iterator[Client]:
    """A sync client of the test's server."""
    with Client(server.address) as connected:
        yield connected
