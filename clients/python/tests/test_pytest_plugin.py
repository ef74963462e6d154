"""The pytest plugin as a user's suite meets it (a pytest session of its own), and the LocalServer beneath it."""

from __future__ import annotations

import re
import socket
import subprocess
import textwrap
from pathlib import Path

import pytest

from lightning_store import Client, Unauthenticated
from lightning_store.binary import BINARY_ENV, ServerNotInstalled, server_binary
from lightning_store.local_server import LocalServer

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_examples() -> list[str]:
    """Returns the Python examples of the README's section on the pytest fixtures, in order."""
    text = README.read_text()
    section = text[text.index("## Test against a real server (pytest)") :]
    section = section[: section.index("\n## ", 1)]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def run_suite(pytester: pytest.Pytester, *files: str, conftest: str = "") -> pytest.RunResult:
    """Runs a user's test files in a pytest process of their own: the plugin comes from the installed package."""
    pytester.makepyfile(**{f"test_{i}": textwrap.dedent(source) for i, source in enumerate(files)})
    if conftest:
        pytester.makeconftest(textwrap.dedent(conftest))
    return pytester.runpytest_subprocess("-p", "no:cacheprovider")


def test_the_readme_examples_pass_in_a_users_suite(pytester: pytest.Pytester) -> None:
    first_test, conftest, _agent_lightning, shared = readme_examples()
    uses_shared = "\n\ndef test_shared(shared_server):\n    assert shared_server.running\n"
    result = run_suite(pytester, first_test, shared + uses_shared, conftest=conftest)
    result.assert_outcomes(passed=3)  # the first test on both backends, and the shared server


def test_a_users_tests_each_get_a_fresh_memory_server_and_a_ready_client(pytester: pytest.Pytester) -> None:
    result = run_suite(
        pytester,
        """
        def test_one(lightning_store_server):
            client = lightning_store_server.client
            rollout = client.enqueue_rollout({"question": "2+2"})
            assert client.get_rollout(rollout.rollout_id).rollout_id == rollout.rollout_id
            assert lightning_store_server.server.backend == "memory"
            assert lightning_store_server.address.startswith("127.0.0.1:")

        def test_two(lightning_store_server):
            assert lightning_store_server.client.query_rollouts().total == 0  # a new, empty store
        """,
    )
    result.assert_outcomes(passed=2)


def test_a_conftest_chooses_sqlite_and_the_store_survives_a_restart(pytester: pytest.Pytester) -> None:
    result = run_suite(
        pytester,
        """
        def test_durable(lightning_store_server):
            assert lightning_store_server.server.database.name == "store.db"
            client = lightning_store_server.client
            rollout = client.enqueue_rollout("kept")
            lightning_store_server.server.restart()
            assert client.get_rollout(rollout.rollout_id).rollout_id == rollout.rollout_id
        """,
        conftest="""
        import pytest

        @pytest.fixture
        def lightning_store_backend():
            return "sqlite"
        """,
    )
    result.assert_outcomes(passed=1)


def test_the_asyncio_variant_runs_under_pytest_asyncio_strict_mode(pytester: pytest.Pytester) -> None:
    result = run_suite(
        pytester,
        """
        import pytest

        @pytest.mark.asyncio
        @pytest.mark.parametrize("lightning_store_backend", ["memory", "sqlite"])
        async def test_async(lightning_store_async_server, lightning_store_backend):
            client = lightning_store_async_server.client
            rollout = await client.enqueue_rollout({"n": 1})
            claimed = await client.dequeue_rollout(worker_id="Worker-0")
            assert claimed.rollout_id == rollout.rollout_id
            assert lightning_store_async_server.server.backend == lightning_store_backend
        """,
    )
    result.assert_outcomes(passed=2)


def test_a_server_stops_when_it_is_closed_and_its_port_is_free_again() -> None:
    with LocalServer() as server, Client(server.address) as client:
        assert client.get_statistics().total_rollouts == 0
        host, port = server.address.rsplit(":", 1)
    assert not server.running
    with pytest.raises(ConnectionRefusedError), socket.create_connection((host, int(port)), timeout=5):
        pass


def test_a_server_stopped_as_soon_as_it_is_healthy_drains_and_exits_0() -> None:
    # The server installs its signal handlers before it answers: a SIGTERM right
    # after the health check never meets the default action (killed, status -15).
    statuses = [LocalServer().start().stop() for _ in range(10)]
    assert statuses == [0] * 10


def test_serve_options_reach_the_server_and_its_start_needs_no_token(tmp_path: Path) -> None:
    made = subprocess.run(
        [str(server_binary()), "token", "new", "--role", "admin", "--name", "test"],
        check=True,
        capture_output=True,
        text=True,
    )
    token, entry = made.stdout.splitlines()[:2]
    (tmp_path / "tokens").write_text(entry + "\n")
    with LocalServer(args=["--tokens-file", str(tmp_path / "tokens")]) as server:
        with Client(server.address, token=None) as anonymous, pytest.raises(Unauthenticated):
            anonymous.get_statistics()
        with Client(server.address, token=token) as admin:
            assert admin.get_statistics().total_rollouts == 0


def test_a_server_that_cannot_start_reports_its_exit_and_its_output() -> None:
    exited = r"stopped before it listened \(exit status 2\)(.|\n)*invalid value 'no-such-backend'"
    with pytest.raises(RuntimeError, match=exited):
        LocalServer("no-such-backend").start()
    with pytest.raises(ValueError, match="database=PATH"):
        LocalServer("sqlite")


def test_the_binary_is_lightning_store_bin_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    installed = server_binary()
    monkeypatch.setenv(BINARY_ENV, str(installed))
    assert server_binary() == installed
    monkeypatch.setenv(BINARY_ENV, "/no/such/lightning-store")
    with pytest.raises(ServerNotInstalled, match="names no file"):
        server_binary()
