"""Runs agent-lightning 0.3.0's own store tests against `lightning_store.agentlightning.LightningStore`.

    python clients/python/upstream/run_suite.py AGENT_LIGHTNING_CHECKOUT [--upstream] [-- PYTEST_ARGS...]

AGENT_LIGHTNING_CHECKOUT is agent-lightning's repository at tag v0.3.0 (its
tests are not in the published package, so they come from there; this script
changes nothing in it). The Python running the script needs agent-lightning
0.3.0 and its test dependencies (aiohttp, portpicker, pytest); pytest-asyncio,
which the published package does not pull in, is installed into
`--workdir` when missing. The package is imported from `src/` beside this
script, the server is `--binary` (default `$LIGHTNING_STORE_BIN`, else the
repository's `target/debug/lightning-store`).

The tests are those of `tests/store/test_core.py`, `test_restful.py` and
`test_client_server.py` that take the store fixture (`store_fixture`), run on
each backend asked for against a fresh `lightning-store serve` per test
(`store_plugin.py`, loaded with `-p`, swaps the checkout's fixture);
`--upstream` also runs them on upstream's `InMemoryLightningStore`, for
comparison. The summary lists per backend the tests passed and failed, the
tests in `INTERNAL` (which read in-process internals a remote store cannot
have) apart; the exit status is 1 when any other test fails on a
lightning-store backend.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PACKAGE_SOURCE = HERE.parent / "src"
REPOSITORY = HERE.parents[2]
TEST_FILES = ("tests/store/test_core.py", "tests/store/test_restful.py", "tests/store/test_client_server.py")
PYTEST_ASYNCIO = "pytest-asyncio==1.5.0"
"""Upstream's tests are written for pytest-asyncio (`@pytest.mark.asyncio`, `pytest_asyncio.fixture`)."""

INTERNAL: dict[str, str] = {
    "test_core.py::test_span_post_add_preserves_concurrent_updates": (
        "patches the store's private `_post_add_spans`, which has no counterpart outside the server"
    ),
    "test_core.py::test_scan_debounce_disabled_when_zero": (
        "reads the private `_scan_debounce_seconds` and calls `_should_scan_for_unhealthy_rollouts`"
    ),
    "test_core.py::test_healthcheck_marks_unresponsive_and_updates_worker": (
        "patches `time.time` in the test process to 100 s after the epoch (the server keeps its own clock, and"
        " gRPC's deadlines, taken from `time.time`, have passed) and the private `_sync_workers_with_attempts`"
    ),
    "test_core.py::test_spans_promote_preparing_attempt_with_heartbeat": (
        "patches `time.time` in the test process to 1234.5 s after the epoch and expects it as the heartbeat"
        " time (the server keeps its own clock, and gRPC's deadlines, taken from `time.time`, have passed)"
    ),
    "test_core.py::test_running_attempt_updates_heartbeat": (
        "patches `time.time` in the test process and expects the patched value as the heartbeat time; the"
        " server stamps heartbeats with its own clock"
    ),
    "test_core.py::test_wait_polling_interval_with_timeout_none": (
        "expects a store that is not an `InMemoryLightningStore` (by class) to take 5 to 15 s to see a"
        " completion, upstream's polling interval; this one sees it at once (about 0.5 s here, within the bound"
        " the test sets for `InMemoryLightningStore`)"
    ),
}
"""Tests that read in-process internals of upstream's store, with the reason, by `file::test`."""


def main() -> int:
    """Runs the suite and prints the summary; returns the exit status."""
    arguments, pytest_arguments = _parse()
    checkout = arguments.checkout.resolve()
    missing = [name for name in TEST_FILES if not (checkout / name).is_file()]
    if missing:
        print(f"{checkout} is not a checkout of agent-lightning v0.3.0: no {', '.join(missing)}", file=sys.stderr)
        return 2
    workdir = Path(arguments.workdir or tempfile.mkdtemp(prefix="agl-store-suite-")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    backends = [b for b in arguments.backends.split(",") if b] + (["upstream"] if arguments.upstream else [])
    report = workdir / "outcomes.json"
    report.unlink(missing_ok=True)
    status = _run_pytest(checkout, workdir, backends, report, arguments.binary, pytest_arguments)
    if not report.is_file():
        print(f"pytest ended with status {status} before it wrote {report}", file=sys.stderr)
        return 2
    verdict = _summarise(json.loads(report.read_text()), backends)
    if status not in (0, 1):  # 1: tests failed, which the summary weighs; others: pytest itself failed
        print(f"pytest ended with status {status}", file=sys.stderr)
        return 2
    return verdict


def _parse() -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", type=Path, help="agent-lightning's repository at tag v0.3.0")
    parser.add_argument("--backends", default="memory,sqlite", help="lightning-store backends (default: %(default)s)")
    parser.add_argument("--upstream", action="store_true", help="also run upstream's InMemoryLightningStore")
    parser.add_argument("--binary", help="the lightning-store binary (default: $LIGHTNING_STORE_BIN, target/debug)")
    parser.add_argument("--workdir", help="where the report and pytest-asyncio go (default: a new temporary folder)")
    argv = sys.argv[1:]
    at = argv.index("--") if "--" in argv else len(argv)  # the script's arguments, then pytest's
    return parser.parse_args(argv[:at]), argv[at + 1 :]


def _run_pytest(
    checkout: Path, workdir: Path, backends: list[str], report: Path, binary: str | None, extra: list[str]
) -> int:
    """Runs the checkout's tests with the plugin; returns pytest's exit status."""
    paths = [str(PACKAGE_SOURCE), str(HERE)]
    if importlib.util.find_spec("pytest_asyncio") is None:
        paths.append(str(_install_pytest_asyncio(workdir)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # agent-lightning imports litellm: stay offline
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # leave the checkout as it was
    env["LIGHTNING_STORE_BIN"] = str(
        Path(binary or env.get("LIGHTNING_STORE_BIN") or REPOSITORY / "target" / "debug" / "lightning-store").resolve()
    )
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-p",
        "store_plugin",
        "--rootdir",
        str(checkout),
        "-q",
        "--tb=line",
        "-o",
        "asyncio_default_fixture_loop_scope=function",  # upstream leaves it unset: pytest-asyncio warns
        f"--lightning-store-backends={','.join(backends)}",
        f"--lightning-store-report={report}",
        *(str(checkout / name) for name in TEST_FILES),
        *extra,
    ]
    print(f"server: {env['LIGHTNING_STORE_BIN']}\nbackends: {', '.join(backends)}", flush=True)
    # Not in the checkout: `python -m` puts the working folder first on sys.path, and the checkout's own
    # `agentlightning/` would then shadow the installed package that the store is built for.
    return subprocess.run(command, cwd=workdir, env=env, check=False).returncode


def _install_pytest_asyncio(workdir: Path) -> Path:
    """Installs pytest-asyncio into `workdir/deps` once (without dependencies: pytest is there already)."""
    target = workdir / "deps"
    if not any(target.glob("pytest_asyncio-*.dist-info")):
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps"]
        subprocess.run([*pip, "--target", str(target), PYTEST_ASYNCIO], check=True)
    return target


def _summarise(report: dict[str, Any], backends: list[str]) -> int:
    """Prints passed and failed per backend, internal tests apart; returns 1 when another test failed."""
    agentlightning = report["agentlightning"]
    print(f"\nagent-lightning {agentlightning['version']} from {agentlightning['path']}")
    if agentlightning["version"] != "0.3.0":
        print("warning: the tests are agent-lightning 0.3.0's, this is another version")
    by_backend: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for nodeid, outcome in report["tests"].items():
        by_backend[outcome["backend"]].append((_test_name(nodeid), outcome["outcome"], outcome["reason"]))
    failing = False
    for backend in backends:
        tests = sorted(by_backend[backend])
        others = Counter(outcome for name, outcome, _ in tests if name not in INTERNAL)
        internal = Counter(outcome for name, outcome, _ in tests if name in INTERNAL)
        print(
            f"\n{backend}: {len(tests)} tests: {others['passed']} passed, {others['failed']} failed,"
            f" {others['skipped']} skipped; listed as internal: {internal['passed']} passed,"
            f" {internal['failed']} failed"
        )
        for name, outcome, reason in tests:
            if outcome != "passed":
                label = "internal " if name in INTERNAL else ""
                print(f"  {label}{outcome}: {name}: {INTERNAL.get(name, reason)}")
        if backend != "upstream" and (others["failed"] or not tests):
            failing = True
    verdict = "FAILED: tests outside the internal list fail" if failing else "OK: every test outside it passes"
    print(f"\n{verdict}")
    return 1 if failing else 0


def _test_name(nodeid: str) -> str:
    """Returns `file::test` of a node id, without its folder and its parameters."""
    path, _, test = nodeid.partition("::")
    return f"{Path(path).name}::{test.split('[', 1)[0]}"


if __name__ == "__main__":
    sys.exit(main())
