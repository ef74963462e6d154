"""Fixtures of the agent-lightning 0.x compatibility tests.

The Rust test `tests/agl0.rs` starts lightning-store on an ephemeral port and
runs these files with the `agl0` environment's pytest, passing the server's
address in `LIGHTNING_STORE_URL` (and, for the differential test, the address
of an `agl store` it started in `AGL_STORE_URL`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The helpers module sits beside the tests.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def store_url() -> str:
    """The address of the lightning-store server under test."""
    url = os.environ.get("LIGHTNING_STORE_URL")
    if not url:
        pytest.fail("LIGHTNING_STORE_URL is not set: run these tests through `cargo test --test agl0`")
    return url.rstrip("/")
