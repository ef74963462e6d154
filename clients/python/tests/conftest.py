"""Fixtures: every test gets a fresh real server from the package's own pytest plugin, on both backends.

The plugin (`lightning_store.pytest_plugin`, registered by the installed
package) starts the binary installed with the package, or `$LIGHTNING_STORE_BIN`.
"""

from __future__ import annotations

import asyncio
import inspect

import pytest

from lightning_store import Client
from lightning_store.local_server import LocalServer
from lightning_store.pytest_plugin import RunningServer

pytest_plugins = ["pytester"]  # the plugin's own tests run pytest sessions as a user would


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Runs `async def` tests in a fresh event loop, each in its own (no plugin needed in the test environments)."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    arguments = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(pyfuncitem.obj(**arguments))
    return True


@pytest.fixture(params=["memory", "sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    """The backend of the test's server: both, one after the other, unless the test parametrizes `backend`."""
    return str(request.param)


@pytest.fixture
def lightning_store_backend(backend: str) -> str:
    """The plugin's choice of backend (memory alone by default), here the test's `backend`."""
    return backend


@pytest.fixture
def server(lightning_store_server: RunningServer[Client]) -> LocalServer:
    """The test's server: its address, and `stop`, `start`, `restart`, `kill`."""
    return lightning_store_server.server


@pytest.fixture
def client(lightning_store_server: RunningServer[Client]) -> Client:
    """The plugin's sync client of the test's server."""
    return lightning_store_server.client
