#!/usr/bin/env python3
"""How fast the installed server starts: from spawning `lightning-store serve` to its health check answering SERVING.

    python clients/python/bench/startup.py --runs 20 --wheel dist/lightning_store-*-manylinux_*.whl

Starts the binary installed with the package (or `--binary`, or
`$LIGHTNING_STORE_BIN`) through `LocalServer`, as the pytest fixtures do:
`--runs` times per backend (memory; SQLite on a new file in a new temporary
directory each time), each on `127.0.0.1:0`, timing `start()` (spawn, the
server's "serving" log line, then a gRPC health check answered SERVING) and
`stop()` (SIGTERM until the process exited). Prints min, median, p90 and max
in milliseconds; with `--wheel`, the wheel's size and its binary's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from lightning_store.binary import server_binary
from lightning_store.local_server import LocalServer

MB = 1_000_000


def summary(label: str, seconds: list[float]) -> str:
    """Returns one line of figures, in milliseconds."""
    ms = sorted(s * 1000 for s in seconds)
    p90 = ms[min(len(ms) - 1, round(0.9 * (len(ms) - 1)))]
    return (
        f"{label:<28} min {ms[0]:7.1f}  median {statistics.median(ms):7.1f}  p90 {p90:7.1f}  max {ms[-1]:7.1f}  "
        f"({len(ms)} runs)"
    )


def measure(binary: Path, backend: str, runs: int) -> tuple[list[float], list[float]]:
    """Returns the start and stop times (seconds) of `runs` fresh servers on `backend`."""
    starts: list[float] = []
    stops: list[float] = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            database = Path(tmp) / "store.db" if backend == "sqlite" else None
            server = LocalServer(backend, database, binary=binary)
            began = time.perf_counter()
            server.start()
            starts.append(time.perf_counter() - began)
            began = time.perf_counter()
            status = server.stop()
            stops.append(time.perf_counter() - began)
            # Windows has no SIGTERM: its terminate() ends a process with status 1.
            if status != 0 and sys.platform != "win32":
                raise SystemExit(f"the server exited with status {status}:\n" + "\n".join(server.log))
    return starts, stops


def wheel_sizes(wheel: Path) -> str:
    """Returns the wheel's size and its binary's (uncompressed) size."""
    with zipfile.ZipFile(wheel) as archive:
        binary = sum(i.file_size for i in archive.infolist() if "/scripts/" in i.filename)
    return f"wheel {wheel.name}: {wheel.stat().st_size / MB:.1f} MB (the binary inside: {binary / MB:.1f} MB)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="servers started per backend")
    parser.add_argument("--backends", default="memory,sqlite", help="backends to start")
    parser.add_argument("--binary", type=Path, help="the server binary (default: the one installed with the package)")
    parser.add_argument("--wheel", type=Path, help="a wheel whose size to print")
    args = parser.parse_args()
    binary = args.binary or server_binary()
    print(f"binary: {binary}")
    if args.wheel is not None:
        print(wheel_sizes(args.wheel))
    for backend in args.backends.split(","):
        starts, stops = measure(binary, backend, args.runs)
        print(summary(f"{backend}: start to SERVING", starts))
        print(summary(f"{backend}: SIGTERM to exit", stops))


if __name__ == "__main__":
    main()
