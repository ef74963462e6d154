"""What each part of the console's read model costs SQLite's rollout lifecycles.

One binary, several schemas: each variant starts a server on a fresh SQLite file (which
creates the full schema), stops it, drops a group of the read model's indexes or its
activity-count triggers from the file, and runs `lightning-store bench lifecycle` against a
server on that file. The variants alternate in order from round to round; the summary gives
each variant's median lifecycles per second and its ratio to the full schema.

    cargo build --profile quick-release
    python3 benches/read_model_write_cost.py --binary target/quick-release/lightning-store --rounds 3

docs/performance.md#indexes-and-activity-counts-for-the-read-model keeps the figures.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _net import free_port

TRIGGERS = [
    "DROP TRIGGER rollout_minutes_created",
    "DROP TRIGGER rollout_minutes_ended",
    "DROP TRIGGER rollout_minutes_deleted",
]
STATUS_INDEXES = [
    "DROP INDEX rollouts_by_status",
    "DROP INDEX rollouts_by_end",
    "DROP INDEX rollouts_ended",
]
ATTEMPT_INDEXES = ["DROP INDEX attempts_by_worker"]

VARIANTS: dict[str, list[str]] = {
    "full read model": [],
    "no activity triggers": TRIGGERS,
    "no status and end indexes": STATUS_INDEXES,
    "no attempts-by-worker index": ATTEMPT_INDEXES,
    "no read model": TRIGGERS + STATUS_INDEXES + ATTEMPT_INDEXES,
}


def create_schema(binary: str, database: Path) -> None:
    """Starts a server on `database` until it answers, so that it migrates the file."""
    address = f"127.0.0.1:{free_port()}"
    server = subprocess.Popen(
        [binary, "serve", "--store", "sqlite", "--database", str(database), "--listen", address],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while subprocess.run([binary, "stats", "--server", address], capture_output=True).returncode:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server on {database} did not answer within 30 s")
            time.sleep(0.05)
    finally:
        server.terminate()
        server.wait()


def run_variant(binary: str, workdir: Path, name: str, args: argparse.Namespace) -> dict[int, float]:
    """Returns lifecycles per second by client count for one variant's fresh database."""
    database = workdir / f"{sum(1 for _ in workdir.glob('*.db'))}.db"
    create_schema(binary, database)
    connection = sqlite3.connect(database)
    try:
        for statement in VARIANTS[name]:
            connection.execute(statement)
        connection.commit()
    finally:
        connection.close()
    server = f"{binary} serve --store sqlite --database {database} --listen {{addr}}"
    out = subprocess.run(
        [
            *[binary, "bench", "--server-cmd", server, "lifecycle"],
            *["-c", args.clients, "--duration-secs", str(args.duration_secs), "--json"],
        ],
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise RuntimeError(f"bench lifecycle failed on {name}: {out.stderr[-2000:]}")
    return {row["clients"]: row["ops_per_sec"] for row in json.loads(out.stdout)["rows"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default="target/release/lightning-store")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", default="1,16")
    parser.add_argument("--duration-secs", type=int, default=5)
    args = parser.parse_args()
    results: dict[tuple[str, int], list[float]] = {}
    names = list(VARIANTS)
    with tempfile.TemporaryDirectory(prefix="read-model-cost-") as workdir:
        for round_number in range(args.rounds):
            for name in names if round_number % 2 == 0 else names[::-1]:
                rates = run_variant(args.binary, Path(workdir), name, args)
                for clients, rate in rates.items():
                    results.setdefault((name, clients), []).append(rate)
                print(round_number, name, {c: round(r) for c, r in rates.items()}, flush=True)
    for clients in sorted({clients for _, clients in results}):
        full = statistics.median(results[("full read model", clients)])
        for name in names:
            runs = results[(name, clients)]
            median = statistics.median(runs)
            print(
                f"{clients:>3} clients  {name:34} {median:8.0f}/s  x{median / full:.3f}"
                f"  runs {[round(rate) for rate in runs]}"
            )


if __name__ == "__main__":
    main()
