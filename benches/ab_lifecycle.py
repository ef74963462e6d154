"""Rollout lifecycles of two builds, alternated: the A/B of a change that should cost nothing.

Each round runs `lightning-store bench lifecycle` once per build, per backend and per client
count, in an order that alternates from round to round (A then B, then B then A), each against
a server of that same build started fresh on a fresh database (`--server-cmd`). The summary
gives, per backend and client count, each build's median lifecycles per second and p99, and
the ratio B/A of the medians and its range over the rounds.

    python3 benches/ab_lifecycle.py --a before/lightning-store --b after/lightning-store \\
        --rounds 3 --duration-secs 5

Build both with the same profile (release for published figures); measure on a quiet machine
(docs/performance.md#how-to-measure).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Run:
    """One bench run: its build, backend and client count, and what it measured."""

    build: str
    backend: str
    clients: int
    lifecycles_per_sec: float
    p99_ms: float


def serve_command(binary: Path, backend: str, data: Path) -> str:
    """The `--server-cmd` of a fresh server of `binary` on `backend`."""
    store = "--store memory" if backend == "memory" else f"--database {data / 'bench.db'}"
    return f"{binary} serve {store} --listen {{addr}} --log warn"


def bench(binary: Path, backend: str, clients: int, duration: float) -> tuple[float, float]:
    """Runs one bench lifecycle with a fresh server; returns lifecycles/s and p99 in ms."""
    with tempfile.TemporaryDirectory() as data:
        output = subprocess.run(
            [
                str(binary),
                "bench",
                "--json",
                "--server-cmd",
                serve_command(binary, backend, Path(data)),
                "lifecycle",
                "-c",
                str(clients),
                "--duration-secs",
                str(duration),
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=duration * 4 + 120,
        ).stdout
    (row,) = [row for row in json.loads(output)["rows"] if row["name"] == "lifecycle"]
    return float(row["ops_per_sec"]), float(row["latency"]["p99_ms"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=Path, required=True, help="the binary before the change")
    parser.add_argument("--b", type=Path, required=True, help="the binary after the change")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration-secs", type=float, default=5.0)
    parser.add_argument("--clients", default="1,16", help="comma-separated client counts")
    parser.add_argument("--backends", default="memory,sqlite", help="memory and/or sqlite")
    args = parser.parse_args()
    builds = {"A": args.a.resolve(), "B": args.b.resolve()}
    clients = [int(c) for c in args.clients.split(",")]
    backends = args.backends.split(",")
    runs: list[Run] = []
    for round_ in range(args.rounds):
        order = ["A", "B"] if round_ % 2 == 0 else ["B", "A"]
        for backend in backends:
            for count in clients:
                for build in order:
                    rate, p99 = bench(builds[build], backend, count, args.duration_secs)
                    runs.append(Run(build, backend, count, rate, p99))
                    print(
                        f"round {round_ + 1} {backend:6} c={count:<3} {build}: "
                        f"{rate:9.0f} lifecycles/s  p99 {p99:7.2f} ms",
                        flush=True,
                    )
    print("\nbackend clients   A lifecycles/s (p99 ms)   B lifecycles/s (p99 ms)   B/A median (rounds)")
    for backend in backends:
        for count in clients:

            def of(build: str, backend: str = backend, count: int = count) -> list[Run]:
                return [r for r in runs if (r.build, r.backend, r.clients) == (build, backend, count)]

            a, b = of("A"), of("B")
            ratios = [rb.lifecycles_per_sec / ra.lifecycles_per_sec for ra, rb in zip(a, b, strict=True)]
            med_a = statistics.median(r.lifecycles_per_sec for r in a)
            med_b = statistics.median(r.lifecycles_per_sec for r in b)
            p99_a = statistics.median(r.p99_ms for r in a)
            p99_b = statistics.median(r.p99_ms for r in b)
            print(
                f"{backend:7} {count:7}   {med_a:12.0f} ({p99_a:6.2f})        {med_b:12.0f} ({p99_b:6.2f})"
                f"        {med_b / med_a:.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
            )


if __name__ == "__main__":
    main()
