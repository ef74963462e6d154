"""Rollout lifecycles of two builds, alternated: the A/B of a change that should cost nothing.

Each round runs `lightning-store bench lifecycle` once per build, per backend and per client
count, in an order that alternates from round to round (A then B, then B then A), each against
a server of that same build started fresh on a fresh database (`--server-cmd`). The summary
gives, per backend and client count, each build's median lifecycles per second and p99, and
the ratio B/A of the medians and its range over the rounds; then the same for the server's CPU
time per lifecycle (`utime + stime` of the server process, sampled from `/proc` while it runs),
which a busy machine disturbs far less than rates.

    python3 benches/ab_lifecycle.py --a before/lightning-store --b after/lightning-store \\
        --rounds 3 --duration-secs 5

`--workload agl1` measures agent-lightning 1.x's rollout lifecycles instead (`bench agl1
lifecycle`: create, running, model requests, a reward, succeeded, over its HTTP API), driven by
`--client`, a build whose bench has that workload (default: each build drives itself).

With `--backends postgres` (or a list that names it) and `--postgres-url` naming a running
server (`postgres://USER@HOST:PORT`), each run gets a database of its own, created before and
dropped after (`psql` must be on the path).

Build both with the same profile (release for published figures); measure on a quiet machine
(docs/performance.md#how-to-measure).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

_databases = itertools.count()


@dataclass(frozen=True)
class Run:
    """One bench run: its build, backend and client count, and what it measured."""

    build: str
    backend: str
    clients: int
    lifecycles_per_sec: float
    p99_ms: float
    cpu_ms_per_lifecycle: float


def psql(server: str, sql: str) -> None:
    """Runs one statement on the `postgres` database of `server`."""
    subprocess.run(["psql", f"{server}/postgres", "-qc", sql], check=True, capture_output=True)


@contextmanager
def store_option(backend: str, data: Path, postgres: str | None) -> Iterator[str]:
    """The `serve` option of a fresh store on `backend`: an in-memory one, a SQLite file in
    `data`, or a PostgreSQL database created for the run and dropped after it."""
    if backend == "memory":
        yield "--store memory"
    elif backend == "sqlite":
        yield f"--database {data / 'bench.db'}"
    elif backend == "postgres":
        if postgres is None:
            raise SystemExit("--backends postgres needs --postgres-url")
        name = f"ab_lifecycle_{next(_databases)}"
        psql(postgres, f"CREATE DATABASE {name}")
        try:
            yield f"--store postgres --database-url {postgres}/{name}"
        finally:
            psql(postgres, f"DROP DATABASE {name} WITH (FORCE)")
    else:
        raise SystemExit(f"unknown backend {backend!r}")


class CpuWatch:
    """Follows the CPU time of the process whose environment holds `marker`: the server the
    bench starts (its `--server-cmd` runs under `env`), sampled until the bench returns."""

    TICKS = os.sysconf("SC_CLK_TCK")

    def __init__(self, marker: str) -> None:
        self.marker = marker.encode()
        self.seconds = 0.0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._follow, daemon=True)
        self.thread.start()

    def _find(self) -> str | None:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/environ", "rb") as environ:
                    if self.marker in environ.read():
                        return pid
            except OSError:
                continue
        return None

    def _follow(self) -> None:
        pid = None
        while not self.done.wait(0.05):
            pid = pid or self._find()
            if pid is None:
                continue
            try:
                with open(f"/proc/{pid}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                return
            # utime and stime: the 14th and 15th fields, the 12th and 13th after the name.
            self.seconds = (int(fields[11]) + int(fields[12])) / self.TICKS

    def stop(self) -> float:
        """Stops following; returns the last CPU time seen, in seconds."""
        self.done.set()
        self.thread.join()
        return self.seconds


@dataclass(frozen=True)
class Workload:
    """What a run measures: the bench's arguments and the name of the row it reports."""

    args: tuple[str, ...]
    row: str


WORKLOADS = {
    "lifecycle": Workload(("lifecycle",), "lifecycle"),
    "agl1": Workload(("agl1", "lifecycle"), "1.x rollout lifecycles"),
}


def bench(
    binary: Path,
    client: Path | None,
    workload: Workload,
    backend: str,
    clients: int,
    duration: float,
    postgres: str | None,
) -> tuple[float, float, float]:
    """Runs one bench of `workload` (driven by `client`, else by `binary` itself) with a fresh
    server of `binary`; returns lifecycles/s, p99 in ms and the server's CPU milliseconds per
    lifecycle."""
    marker = f"AB_LIFECYCLE_RUN={uuid.uuid4().hex}"
    with (
        tempfile.TemporaryDirectory() as data,
        store_option(backend, Path(data), postgres) as store,
    ):
        watch = CpuWatch(marker)
        output = subprocess.run(
            [
                str(client or binary),
                "bench",
                "--json",
                "--server-cmd",
                f"env {marker} {binary} serve {store} --listen {{addr}} --log warn",
                *workload.args,
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
        cpu = watch.stop()
    (row,) = [row for row in json.loads(output)["rows"] if row["name"] == workload.row]
    return (
        float(row["ops_per_sec"]),
        float(row["latency"]["p99_ms"]),
        cpu * 1e3 / max(int(row["ops"]), 1),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=Path, required=True, help="the binary before the change")
    parser.add_argument("--b", type=Path, required=True, help="the binary after the change")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration-secs", type=float, default=5.0)
    parser.add_argument("--clients", default="1,16", help="comma-separated client counts")
    parser.add_argument("--backends", default="memory,sqlite", help="memory, sqlite and/or postgres")
    parser.add_argument(
        "--postgres-url",
        help="a PostgreSQL server for the postgres backend: postgres://USER@HOST:PORT",
    )
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="lifecycle")
    parser.add_argument("--client", type=Path, help="the binary whose bench drives both builds")
    args = parser.parse_args()
    workload = WORKLOADS[args.workload]
    client = args.client.resolve() if args.client else None
    builds = {"A": args.a.resolve(), "B": args.b.resolve()}
    clients = [int(c) for c in args.clients.split(",")]
    backends = args.backends.split(",")
    runs: list[Run] = []
    for round_ in range(args.rounds):
        order = ["A", "B"] if round_ % 2 == 0 else ["B", "A"]
        for backend in backends:
            for count in clients:
                for build in order:
                    rate, p99, cpu = bench(
                        builds[build],
                        client,
                        workload,
                        backend,
                        count,
                        args.duration_secs,
                        args.postgres_url,
                    )
                    runs.append(Run(build, backend, count, rate, p99, cpu))
                    print(
                        f"round {round_ + 1} {backend:6} c={count:<3} {build}: "
                        f"{rate:9.0f} lifecycles/s  p99 {p99:7.2f} ms  server CPU {cpu:6.3f} ms/lifecycle",
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
    print("\nbackend clients   A server CPU ms/lifecycle   B server CPU ms/lifecycle   B/A median (rounds)")
    for backend in backends:
        for count in clients:
            a = [r for r in runs if (r.build, r.backend, r.clients) == ("A", backend, count)]
            b = [r for r in runs if (r.build, r.backend, r.clients) == ("B", backend, count)]
            cpu_ratios = [
                rb.cpu_ms_per_lifecycle / ra.cpu_ms_per_lifecycle for ra, rb in zip(a, b, strict=True)
            ]
            cpu_a = statistics.median(r.cpu_ms_per_lifecycle for r in a)
            cpu_b = statistics.median(r.cpu_ms_per_lifecycle for r in b)
            print(
                f"{backend:7} {count:7}   {cpu_a:25.3f}   {cpu_b:25.3f}"
                f"        {cpu_b / cpu_a:.2f} ({min(cpu_ratios):.2f}-{max(cpu_ratios):.2f})"
            )


if __name__ == "__main__":
    main()
