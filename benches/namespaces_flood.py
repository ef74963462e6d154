"""Namespace B's lifecycles alone and while namespace A is flooded, on every backend.

Each round runs `lightning-store bench namespaces` once per backend, in an order that alternates
from round to round, against a server started fresh on a fresh database (`--server-cmd`;
PostgreSQL in a throwaway cluster with its default settings, as benches/figures.py starts it).
The bench itself alternates B's phases alone and with the flood; this script prints, per
backend, B's p50 and p99 alone and with the flood and their ratio, as ranges over the rounds.

    python3 benches/namespaces_flood.py --rounds 3 --duration-secs 4

Measure with a release build on a quiet machine (docs/performance.md#how-to-measure).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from figures import Cluster


def bench(binary: Path, backend: str, cluster: Cluster | None, args: argparse.Namespace) -> dict:
    """Runs the bench against a fresh server of `backend`; returns its JSON report."""
    with tempfile.TemporaryDirectory(prefix="ns-flood-") as workdir:
        storage = {
            "memory": "--store memory",
            "sqlite": f"--store sqlite --database {workdir}/store.db",
            "postgres": f"--store postgres --database-url {cluster.fresh_database() if cluster else ''}",
        }[backend]
        command = [
            str(binary),
            "bench",
            "--json",
            "--server-cmd",
            f"{binary} serve {storage} --listen {{addr}}",
            "namespaces",
            "-c",
            str(args.clients),
            "--flood-clients",
            str(args.flood_clients),
            "--rounds",
            str(args.phases),
            "--duration-secs",
            str(args.duration_secs),
        ]
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        report: dict = json.loads(done.stdout)
        return report


DASH = "\u2013"


def span(values: list[float], unit: str = "") -> str:
    """A range `min-max` of the values (an en dash between them, as the docs write ranges)."""
    low, high = min(values), max(values)
    return f"{low:.2f}{unit}{DASH}{high:.2f}{unit}" if low != high else f"{low:.2f}{unit}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--binary", type=Path, default=Path("target/release/lightning-store"))
    parser.add_argument("--rounds", type=int, default=3, help="bench runs per backend")
    parser.add_argument("--phases", type=int, default=2, help="the bench's --rounds (phases of each kind)")
    parser.add_argument("--duration-secs", type=float, default=4.0, help="each phase")
    parser.add_argument("--clients", type=int, default=1, help="namespace B's clients")
    parser.add_argument("--flood-clients", type=int, default=4, help="namespace A's clients")
    parser.add_argument("--backends", default="memory,sqlite,postgres")
    args = parser.parse_args()
    backends = args.backends.split(",")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"commit {commit}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load {load}")
    cluster = Cluster() if "postgres" in backends else None
    results: dict[str, list[dict]] = {backend: [] for backend in backends}
    try:
        for round_ in range(args.rounds):
            order = backends if round_ % 2 == 0 else list(reversed(backends))
            for backend in order:
                report = bench(args.binary, backend, cluster, args)
                alone, flooded, flood = report["rows"]
                results[backend].append(
                    {
                        "alone_p50": alone["latency"]["p50_ms"],
                        "alone_p99": alone["latency"]["p99_ms"],
                        "flooded_p50": flooded["latency"]["p50_ms"],
                        "flooded_p99": flooded["latency"]["p99_ms"],
                        "alone_rate": alone["ops_per_sec"],
                        "flooded_rate": flooded["ops_per_sec"],
                        "flood_rate": flood["ops_per_sec"],
                    }
                )
                print(f"round {round_ + 1} {backend}: {report['notes'][0]}", flush=True)
    finally:
        if cluster is not None:
            cluster.stop()
    print(f"load after {Path('/proc/loadavg').read_text().split()[:3]}")
    print()
    print(
        "| backend | B alone p50 / p99 (ms) | B with A flooded p50 / p99 (ms) | p99 ratio "
        "| B lifecycles/s alone / flooded | A's flood, lifecycles/s |"
    )
    print("|---|---|---|---|---|---|")
    for backend, runs in results.items():

        def pick(key: str, runs: list[dict] = runs) -> list[float]:
            return [run[key] for run in runs]

        ratios = [run["flooded_p99"] / max(run["alone_p99"], 1e-9) for run in runs]
        print(
            f"| {backend} | {span(pick('alone_p50'))} / {span(pick('alone_p99'))} "
            f"| {span(pick('flooded_p50'))} / {span(pick('flooded_p99'))} | {span(ratios, 'x')} "
            f"| {min(pick('alone_rate')):.0f}{DASH}{max(pick('alone_rate')):.0f} / "
            f"{min(pick('flooded_rate')):.0f}{DASH}{max(pick('flooded_rate')):.0f} "
            f"| {min(pick('flood_rate')):.0f}{DASH}{max(pick('flood_rate')):.0f} |"
        )


if __name__ == "__main__":
    main()
