"""pytest plugin that points agent-lightning's own store tests at `lightning_store.agentlightning.LightningStore`.

`run_suite.py` loads it with `-p store_plugin` into a pytest run of an
agent-lightning checkout, whose files it leaves untouched. It replaces the
checkout's `store_fixture` (in `tests/store/conftest.py`, upstream's
`InMemoryLightningStore`) by one parametrised over lightning-store backends,
each test against a fresh `lightning-store serve`, and optionally upstream's own
store (`upstream`) for comparison; it deselects the tests that do not take the
store fixture and the backends not asked for, and writes each test's outcome
to a JSON report that `run_suite.py` summarises.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Imported before collection puts the checkout first on sys.path, so that the
# tests run against the installed agent-lightning (its submodules follow the
# package's own path), the one the package is built for.
import agentlightning
import pytest

from lightning_store.agentlightning import LightningStore
from lightning_store.local_server import LocalServer

BACKENDS = ("memory", "sqlite", "upstream")
"""The stores a test runs against: lightning-store's backends, and upstream's `InMemoryLightningStore`."""

STORE_CONFTEST = ("tests", "store", "conftest.py")
"""Where the checkout defines `store_fixture`."""


@pytest.fixture(params=BACKENDS, name="store_fixture")
def lightning_store_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The store under test: a `LightningStore` on a fresh server, or upstream's in-memory store."""
    backend = str(request.param)
    if backend == "upstream":
        yield request.getfixturevalue("inmemory_store")
        return
    database = tmp_path / "store.db" if backend == "sqlite" else None
    server = LocalServer(backend, database).start()  # the binary: $LIGHTNING_STORE_BIN (run_suite.py sets it)
    store = LightningStore(server.address)
    try:
        yield store
    finally:
        asyncio.run(store.close())
        server.kill()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Adds the plugin's options."""
    group = parser.getgroup("lightning-store")
    group.addoption(
        "--lightning-store-backends",
        default="memory,sqlite",
        help=f"comma-separated stores to run against, of {', '.join(BACKENDS)}",
    )
    group.addoption("--lightning-store-report", default=None, help="write each test's outcome to this JSON file")


def pytest_configure(config: pytest.Config) -> None:
    """Checks the backends asked for and starts the report."""
    backends = [b for b in str(config.getoption("--lightning-store-backends")).split(",") if b]
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown:
        raise pytest.UsageError(f"unknown backends {unknown}; known: {', '.join(BACKENDS)}")
    config.stash[_BACKENDS] = backends
    config.stash[_OUTCOMES] = {}


_BACKENDS = pytest.StashKey[list[str]]()
_OUTCOMES = pytest.StashKey[dict[str, dict[str, str]]]()


def pytest_plugin_registered(plugin: Any, plugin_name: str) -> None:
    """Puts our `store_fixture` in place of the checkout's, before pytest reads that conftest's fixtures."""
    if plugin_name and Path(plugin_name).parts[-3:] == STORE_CONFTEST:
        plugin.store_fixture = lightning_store_fixture


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keeps the tests that take the store fixture, on the backends asked for."""
    backends = config.stash[_BACKENDS]
    selected: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    for item in items:
        backend = _backend(item)
        (selected if backend is not None and backend in backends else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected


def _backend(item: pytest.Item) -> str | None:
    """Returns the store a test runs against, or None when it does not take the store fixture."""
    if "store_fixture" not in getattr(item, "fixturenames", ()):
        return None
    callspec = getattr(item, "callspec", None)
    return str(callspec.params["store_fixture"]) if callspec is not None else None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    """Records each test's outcome (the first failing phase wins) with the one-line reason of a failure."""
    if call.when == "call" or call.excinfo is not None:
        outcomes = item.config.stash[_OUTCOMES]
        if item.nodeid in outcomes and outcomes[item.nodeid]["outcome"] != "passed":
            return
        if call.excinfo is None:
            outcome, reason = "passed", ""
        elif call.excinfo.errisinstance(pytest.skip.Exception):
            outcome, reason = "skipped", str(call.excinfo.value)
        else:
            outcome, reason = "failed", f"{call.when}: {call.excinfo.exconly().splitlines()[0][:300]}"
        outcomes[item.nodeid] = {"backend": _backend(item) or "", "outcome": outcome, "reason": reason}


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Writes the report, with the agent-lightning the tests ran against."""
    path = session.config.getoption("--lightning-store-report")
    if path is None:
        return
    report = {
        "agentlightning": {"version": agentlightning.__version__, "path": str(Path(agentlightning.__file__).parent)},
        "tests": session.config.stash[_OUTCOMES],
    }
    Path(str(path)).write_text(json.dumps(report, indent=1))
