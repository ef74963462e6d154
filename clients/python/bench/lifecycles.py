#!/usr/bin/env python3
"""Lifecycles per second through agent-lightning's store interface, lightning-store beside `agl store`.

lightning-store is reached over gRPC (`lightning_store.agentlightning.LightningStore`), `agl store`
over HTTP (agent-lightning's own `LightningStoreClient`), in the same run.

A lifecycle is what a runner does per rollout: enqueue one, dequeue one (as worker `Worker-<n>`),
add 10 spans of ~1 KB (`add_many_spans`), mark the attempt succeeded. Each runner is its own OS
process (forked), as agent-lightning's runners are. Every server starts fresh for each runner count.

    python clients/python/bench/lifecycles.py --runners 1,4,16 --seconds 10
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # agent-lightning imports litellm: stay offline

from agentlightning.store.base import LightningStore as UpstreamStore
from agentlightning.store.client_server import LightningStoreClient
from agentlightning.types import OtelResource, Span, SpanContext, TraceStatus

from lightning_store.agentlightning import LightningStore
from lightning_store.local_server import LocalServer

ROOT = Path(__file__).resolve().parents[3]

SPANS_PER_LIFECYCLE = 10
PAYLOAD = "x" * 900  # with the ids and the other fields, a span of about 1 KB


def spans_for(rollout_id: str, attempt_id: str, first: int) -> list[Span]:
    """Returns the 10 spans of one lifecycle."""
    trace = os.urandom(16).hex()
    return [
        Span(
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            sequence_id=first + i,
            trace_id=trace,
            span_id=os.urandom(8).hex(),
            parent_id=None,
            name="openai.chat.completion",
            status=TraceStatus(status_code="OK"),
            attributes={"gen_ai.prompt.0.content": PAYLOAD, "gen_ai.usage.total_tokens": 128, "step": i},
            events=[],
            links=[],
            start_time=time.time(),
            end_time=time.time(),
            context=SpanContext(trace_id=trace, span_id="0" * 16, is_remote=False, trace_state={}),
            parent=None,
            resource=OtelResource(attributes={"service.name": "bench"}, schema_url=""),
        )
        for i in range(SPANS_PER_LIFECYCLE)
    ]


async def lifecycle(store: UpstreamStore, worker_id: str) -> bool:
    """Runs one lifecycle; False when the dequeue found nothing (another runner took the rollout)."""
    await store.enqueue_rollout(input={"task": "bench"})
    claimed = await store.dequeue_rollout(worker_id=worker_id)
    if claimed is None:
        return False
    await store.add_many_spans(spans_for(claimed.rollout_id, claimed.attempt.attempt_id, 1))
    await store.update_attempt(claimed.rollout_id, claimed.attempt.attempt_id, status="succeeded")
    return True


def runner(make_store: Callable[[], UpstreamStore], index: int, start: Any, seconds: float, results: Any) -> None:
    """One runner process: warms up, waits for the common start, counts lifecycles for `seconds`."""

    async def run() -> tuple[int, list[float]]:
        store = make_store()
        worker_id = f"Worker-{index}"
        await lifecycle(store, worker_id)  # connection and first-call costs stay out of the figures
        await asyncio.get_running_loop().run_in_executor(None, start.wait)
        done, latencies = 0, []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            began = time.perf_counter()
            if await lifecycle(store, worker_id):
                done += 1
                latencies.append(time.perf_counter() - began)
        await store.close()  # type: ignore[attr-defined] # both stores have one; the interface does not
        return done, latencies

    results.put(asyncio.run(run()))


def measure(make_store: Callable[[], UpstreamStore], runners: int, seconds: float) -> tuple[float, float]:
    """Returns lifecycles/s and the p99 latency (ms) of `runners` runner processes."""
    context = multiprocessing.get_context("fork")
    start, results = context.Event(), context.Queue()
    processes = [context.Process(target=runner, args=(make_store, i, start, seconds, results)) for i in range(runners)]
    for process in processes:
        process.start()
    time.sleep(2.0)  # every runner has warmed up (one lifecycle each) before the common start
    start.set()
    outcomes = [results.get(timeout=seconds + 120) for _ in processes]
    for process in processes:
        process.join(30)
    latencies = sorted(latency for _, runner_latencies in outcomes for latency in runner_latencies)
    p99 = latencies[int(0.99 * (len(latencies) - 1))] * 1000 if latencies else float("nan")
    return sum(done for done, _ in outcomes) / seconds, p99


class AglStore:
    """`agl store` (agent-lightning 0.3.0's server, in-memory) on a free loopback port."""

    def __enter__(self) -> AglStore:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        agl = shutil.which("agl") or str(Path(sys.executable).parent / "agl")
        self._process = subprocess.Popen(
            [agl, "store", "--host", "127.0.0.1", "--port", str(port), "--log-level", "WARNING"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/v1/agl/health", timeout=1):
                    return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("agl store did not start")

    def __exit__(self, *_: object) -> None:
        self._process.terminate()
        self._process.wait(30)


def free_port() -> int:
    """Returns a free loopback port (agl store binds it itself: it cannot take a listener)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runners", default="1,4,16", help="runner counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured time per point")
    parser.add_argument("--repeat", type=int, default=1, help="runs per point (the table shows the median)")
    parser.add_argument("--server", default=str(ROOT / "target" / "release" / "lightning-store"), help="server binary")
    parser.add_argument("--backends", default="memory,sqlite", help="lightning-store backends to measure")
    args = parser.parse_args()
    counts = [int(n) for n in args.runners.split(",")]
    rows: dict[str, dict[int, list[tuple[float, float]]]] = {}

    for count in counts:
        for _ in range(args.repeat):
            for backend in args.backends.split(","):
                with tempfile.TemporaryDirectory() as tmp:
                    database = Path(tmp) / "bench.db" if backend == "sqlite" else None
                    server = LocalServer(backend, database, binary=args.server).start()
                    try:
                        figure = measure(partial(LightningStore, server.address), count, args.seconds)
                    finally:
                        server.kill()
                rows.setdefault(f"lightning-store ({backend}, gRPC)", {}).setdefault(count, []).append(figure)
                print(
                    f"lightning-store {backend}, {count} runners: {figure[0]:.0f}/s, p99 {figure[1]:.1f} ms", flush=True
                )
            with AglStore() as agl:
                figure = measure(partial(LightningStoreClient, agl.url), count, args.seconds)
            rows.setdefault("agl store (memory, HTTP)", {}).setdefault(count, []).append(figure)
            print(f"agl store, {count} runners: {figure[0]:.0f}/s, p99 {figure[1]:.1f} ms", flush=True)

    print()
    print("| lifecycles/s (p99 ms) | " + " | ".join(f"{n} runner{'s' if n > 1 else ''}" for n in counts) + " |")
    print("|---|" + "---|" * len(counts))
    for name, by_count in rows.items():
        cells = []
        for n in counts:
            rates = [rate for rate, _ in by_count[n]]
            p99 = statistics.median(p for _, p in by_count[n])
            spread = f" ({min(rates):.0f} to {max(rates):.0f})" if len(rates) > 1 else ""
            cells.append(f"{statistics.median(rates):.0f}{spread} ({p99:.0f} ms)")
        print(f"| {name} | " + " | ".join(cells) + " |")
    agl_rates = rows["agl store (memory, HTTP)"]
    for name, by_count in rows.items():
        if name.startswith("lightning-store"):
            ratios = [
                statistics.median(r for r, _ in by_count[n]) / statistics.median(r for r, _ in agl_rates[n])
                for n in counts
            ]
            print(
                f"{name} / agl store: "
                + ", ".join(f"{n}: {ratio:.1f}x" for n, ratio in zip(counts, ratios, strict=True))
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
