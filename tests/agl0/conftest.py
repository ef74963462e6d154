"""Fixtures of the agent-lightning 0.x compatibility tests.

The Rust test `tests/integration/agl0.rs` starts lightning-store on ephemeral ports, one
server per backend, and runs these files once with the `agl0` environment's
pytest, passing `LIGHTNING_STORE_URLS` (`memory=http://...,sqlite=http://...`)
and, for the differential test, the address of an `agl store` it started in
`AGL_STORE_URL`. Every test that takes `store_url` runs on every backend.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The helpers module sits beside the tests.
sys.path.insert(0, str(Path(__file__).parent))


def _servers() -> dict[str, str]:
    urls = os.environ.get("LIGHTNING_STORE_URLS", "")
    pairs = (entry.split("=", 1) for entry in urls.split(",") if "=" in entry)
    return {name: url.rstrip("/") for name, url in pairs}


SERVERS = _servers()


@pytest.fixture(scope="session")
def store_urls() -> dict[str, str]:
    """Every server under test, by backend name."""
    if not SERVERS:
        pytest.fail(
            "LIGHTNING_STORE_URLS is not set: run these tests through `cargo test --test integration agl0::`"
        )
    return SERVERS


@pytest.fixture(scope="session", params=sorted(SERVERS) or ["unset"])
def store_url(request: pytest.FixtureRequest, store_urls: dict[str, str]) -> str:
    """The address of one server under test (each backend in turn)."""
    name: str = request.param
    return store_urls[name]
