"""Rollout lifecycles per second through agent-lightning 0.3.0's own
`LightningStoreClient` against `agl store` and against lightning-store (in
memory and on SQLite), in the same run, and the server's CPU time per
lifecycle read from /proc/<pid>/stat.

A lifecycle is what a runner does with a task: `enqueue_rollout`,
`dequeue_rollout`, 10 spans of ~1 KB (`add_many_spans`, one `POST /spans`
each, as the client sends them) and `update_attempt(status="succeeded")`.
Clients are asyncio tasks spread over worker processes (the Python client
is the bottleneck long before lightning-store is); every run is bounded by
a duration and each server is started fresh for each concurrency level.

    LITELLM_LOCAL_MODEL_COST_MAP=True "$(tools/pyenv.sh agl0)/bin/python" \\
        benches/agl0_client.py --clients 4,16 --duration 10

Needs `cargo build --release` first (or `--lightning-store PATH`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from _net import free_port
from _proc import cpu_seconds

REPOSITORY = Path(__file__).resolve().parent.parent
SPANS_PER_LIFECYCLE = 10
SPAN_FILLER = "the agent asked the model to plan the next step of the task and checked the answer " * 11


@dataclass
class Server:
    """A store server under test, started fresh."""

    name: str
    command: list[str]
    process: subprocess.Popen[bytes] | None = None
    url: str = ""
    workdir: tempfile.TemporaryDirectory[str] = field(default_factory=tempfile.TemporaryDirectory)

    def start(self) -> None:
        port = free_port()
        command = [part.format(port=port, dir=self.workdir.name) for part in self.command]
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/v1/agl/health", timeout=1) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError(f"{self.name} exited while starting: {command}") from None
                time.sleep(0.2)
        raise RuntimeError(f"{self.name} did not answer its health route within 120 s")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.workdir.cleanup()
        self.workdir = tempfile.TemporaryDirectory()


def _worker_init() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import agentlightning  # noqa: F401  (imported once per worker, before any run)


async def _lifecycles(url: str, tasks: int, start_at: float, stop_at: float, worker: int) -> list[float]:
    from agentlightning.store.client_server import LightningStoreClient
    from agentlightning.types import OtelResource, Span, TraceStatus

    client = LightningStoreClient(url, retry_delays=(), health_retry_delays=())
    latencies: list[float] = []

    async def task(index: int) -> None:
        worker_id = f"bench-{worker}-{index}"
        while time.time() < stop_at:
            began = time.perf_counter()
            await client.enqueue_rollout(input={"task": index})
            claimed = await client.dequeue_rollout(worker_id=worker_id)
            if claimed is None:
                continue
            spans = [
                Span(
                    rollout_id=claimed.rollout_id,
                    attempt_id=claimed.attempt.attempt_id,
                    sequence_id=n + 1,
                    trace_id=f"{worker:08x}{index:08x}{n:016x}",
                    span_id=f"{n:016x}",
                    parent_id=None,
                    name="openai.chat.completion",
                    status=TraceStatus(status_code="OK"),
                    attributes={"gen_ai.request.model": "gpt-4o-mini", "filler": SPAN_FILLER},
                    events=[],
                    links=[],
                    start_time=time.time(),
                    end_time=time.time(),
                    context=None,
                    parent=None,
                    resource=OtelResource(attributes={}, schema_url=""),
                )
                for n in range(SPANS_PER_LIFECYCLE)
            ]
            await client.add_many_spans(spans)
            await client.update_attempt(claimed.rollout_id, claimed.attempt.attempt_id, status="succeeded")
            latencies.append(time.perf_counter() - began)

    await asyncio.sleep(max(0.0, start_at - time.time()))
    try:
        await asyncio.gather(*(task(i) for i in range(tasks)))
    finally:
        await client.close()
    return latencies


def _ready(_: int) -> None:
    """Keeps a worker busy briefly, so that warming the pool spawns every worker."""
    time.sleep(0.5)


def _run_worker(url: str, tasks: int, start_at: float, stop_at: float, worker: int) -> list[float]:
    return asyncio.run(_lifecycles(url, tasks, start_at, stop_at, worker))


@dataclass
class Result:
    server: str
    clients: int
    lifecycles: int
    seconds: float
    server_cpu_seconds: float
    latencies: list[float]

    @property
    def per_second(self) -> float:
        return self.lifecycles / self.seconds

    @property
    def cpu_ms_per_lifecycle(self) -> float:
        return 1000 * self.server_cpu_seconds / max(self.lifecycles, 1)

    def percentile(self, fraction: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def measure(
    pool: ProcessPoolExecutor, processes: int, server: Server, clients: int, duration: float
) -> Result:
    assert server.process is not None
    # Every worker starts at the same moment, after the pool handed out the work.
    start_at = time.time() + 1.0
    stop_at = start_at + duration
    shares = [clients // processes + (1 if i < clients % processes else 0) for i in range(processes)]
    futures = [
        pool.submit(_run_worker, server.url, share, start_at, stop_at, worker)
        for worker, share in enumerate(shares)
        if share > 0
    ]
    time.sleep(max(0.0, start_at - time.time()))
    cpu_before = cpu_seconds(server.process.pid)
    began = time.monotonic()
    latencies = [latency for future in futures for latency in future.result(timeout=duration + 300)]
    seconds = time.monotonic() - began
    cpu = cpu_seconds(server.process.pid) - cpu_before
    return Result(server.name, clients, len(latencies), seconds, cpu, latencies)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", default="4,16", help="comma-separated concurrency levels")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per run")
    parser.add_argument(
        "--processes", type=int, default=0, help="client processes (default: min(clients, 4))"
    )
    parser.add_argument(
        "--lightning-store", default=str(REPOSITORY / "target/release/lightning-store"), help="server binary"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    levels = [int(level) for level in args.clients.split(",")]
    agl = str(Path(sys.executable).parent / "agl")
    binary = args.lightning_store
    servers = [
        Server("agl store (memory)", [agl, "store", "--host", "127.0.0.1", "--port", "{port}"]),
        Server(
            "lightning-store memory",
            [binary, "serve", "--store", "memory", "--listen", "127.0.0.1:{port}", "--log", "warn"],
        ),
        Server(
            "lightning-store SQLite",
            [
                binary,
                "serve",
                "--database",
                "{dir}/bench.db",
                "--listen",
                "127.0.0.1:{port}",
                "--log",
                "warn",
            ],
        ),
    ]
    processes = args.processes or min(max(levels), 4)
    context = get_context("spawn")
    results: list[Result] = []
    with ProcessPoolExecutor(max_workers=processes, mp_context=context, initializer=_worker_init) as pool:
        # Workers spawn and import agent-lightning before the first run, not
        # inside its measured window (seconds on a loaded machine).
        list(pool.map(_ready, range(processes)))
        for clients in levels:
            for server in servers:
                server.start()
                try:
                    result = measure(pool, min(processes, clients), server, clients, args.duration)
                finally:
                    server.stop()
                results.append(result)
                p50, p99 = 1000 * result.percentile(0.5), 1000 * result.percentile(0.99)
                print(
                    f"{result.server:24} c={clients:<3} {result.per_second:8.1f} lifecycles/s  "
                    f"server CPU {result.cpu_ms_per_lifecycle:6.2f} ms/lifecycle  "
                    f"p50 {p50:7.1f} ms  p99 {p99:7.1f} ms",
                    file=sys.stderr,
                    flush=True,
                )
    if args.json:
        print(json.dumps([_row(r, results) for r in results], indent=2))
        return
    print("| server | clients | lifecycles/s | vs agl store | server CPU ms / lifecycle | p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        row = _row(r, results)
        p50, p99 = 1000 * r.percentile(0.5), 1000 * r.percentile(0.99)
        print(
            f"| {r.server} | {r.clients} | {r.per_second:,.0f} | {row['speedup']:.1f}x | "
            f"{r.cpu_ms_per_lifecycle:.2f} | {p50:.1f} | {p99:.1f} |"
        )


def _row(result: Result, results: list[Result]) -> dict[str, Any]:
    baseline = next(r for r in results if r.clients == result.clients and r.server.startswith("agl store"))
    return {
        "server": result.server,
        "clients": result.clients,
        "lifecycles": result.lifecycles,
        "seconds": round(result.seconds, 3),
        "lifecycles_per_second": round(result.per_second, 1),
        "speedup": result.per_second / baseline.per_second if baseline.per_second else float("nan"),
        "server_cpu_ms_per_lifecycle": round(result.cpu_ms_per_lifecycle, 3),
        "p50_ms": round(1000 * result.percentile(0.5), 2),
        "p99_ms": round(1000 * result.percentile(0.99), 2),
    }


if __name__ == "__main__":
    main()
