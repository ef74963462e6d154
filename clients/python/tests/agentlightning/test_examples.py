"""The Python examples, end to end, each against a fresh server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lightning_store import Client
from lightning_store.local_server import LocalServer

EXAMPLES = Path(__file__).resolve().parents[4] / "examples" / "python"


def run_example(name: str, server: LocalServer, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), server.address],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        env=None if env is None else {**os.environ, **env},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.parametrize("backend", ["sqlite"])
def test_an_agent_lightning_trainer_trains_with_several_runners(server: LocalServer) -> None:
    last = run_example("train.py", server).splitlines()[-1]
    assert last == "8 passed, 0 failed"


@pytest.mark.parametrize("backend", ["memory"])
def test_a_plain_runner_works_on_a_worker_session_and_exports_over_otlp(server: LocalServer) -> None:
    last = run_example("session_runner.py", server).splitlines()[-1]
    assert last == "7 passed, 0 failed"


@pytest.mark.parametrize("backend", ["memory"])
def test_the_session_runner_works_in_the_namespace_of_its_environment(server: LocalServer) -> None:
    with Client(server.address) as admin:
        admin.create_namespace("run-a")
        last = run_example("session_runner.py", server, {"LIGHTNING_STORE_NAMESPACE": "run-a"}).splitlines()[-1]
        assert last == "7 passed, 0 failed"  # its checks read back the spans it exported over OTLP/gRPC
        with Client(server.address, namespace="run-a") as run_a:
            assert run_a.get_statistics().total_spans > 0
        assert admin.get_statistics().total_rollouts == 0  # nothing in default
