"""The installed distribution: one version for the crate, the wheel and the server, and the server binary in it."""

from __future__ import annotations

import re
import subprocess
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest

import lightning_store
from lightning_store.binary import BINARY_ENV, server_binary

CARGO_TOML = Path(__file__).resolve().parents[3] / "Cargo.toml"


def crate_version() -> str:
    """Returns the workspace's version, which every crate and the package take (Cargo.toml's [workspace.package]).

    (tomllib is Python 3.11+, the package 3.10+.)
    """
    found = re.search(r'^\[workspace\.package\]$[^\[]*?^version = "([^"]+)"$', CARGO_TOML.read_text(), re.MULTILINE)
    assert found is not None, "Cargo.toml has no [workspace.package] version"
    return found.group(1)


def test_the_crate_the_wheel_and_the_server_have_one_version() -> None:
    crate = crate_version()
    assert metadata.version("lightning-store") == crate
    assert lightning_store.__version__ == crate
    printed = subprocess.run([str(server_binary()), "--version"], check=True, capture_output=True, text=True).stdout
    assert printed.strip() == f"lightning-store {crate}"


def test_the_server_is_the_binary_installed_with_the_package_as_a_script(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BINARY_ENV, raising=False)
    binary = server_binary()
    assert binary.parent == Path(sysconfig.get_path("scripts")).resolve()
    assert binary.stem == "lightning-store"
    help_text = subprocess.run([str(binary), "--help"], check=True, capture_output=True, text=True).stdout
    for command in ("serve", "bench", "token"):
        assert f"\n  {command} " in help_text
