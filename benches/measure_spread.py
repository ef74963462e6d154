"""What the training summary's measures cost its read, by how many rows they spread over.

`lightning-store bench read-model --versions 200` fills a SQLite store (100,000 rollouts,
440 version/mode pairs), but its rollouts end within seconds of their creation and make no
model call, so its measures' rows (`training_measures`) hold a few bins per pair. This script
fills one store, then for each variant copies it, rewrites the measures' rows as if each pair's
values spread over the given number of decades (twenty bins per decade, one row per bin), and
times `GetTrainingSummary` on the copy (`bench read-model --no-fill`: the server's time per
call). The summary's reward rows are those of the fill in every variant.

    cargo build --profile quick-release
    python3 benches/measure_spread.py --binary target/quick-release/lightning-store

docs/performance.md#measures-in-rows-of-their-own keeps the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

# Each measure's code (crates/core/src/training/measure.rs) and the value its spread starts at.
DURATION, PROMPT_TOKENS, RESPONSE_TOKENS, CALL_LATENCY = 1, 2, 3, 4
START = {DURATION: 5_000, PROMPT_TOKENS: 800, RESPONSE_TOKENS: 100, CALL_LATENCY: 400}

# A variant: its name, and the decades each rewritten measure spreads over (None: the fill's).
VARIANTS: list[tuple[str, dict[int, float] | None]] = [
    ("as the fill leaves them", None),
    ("durations over a decade", {DURATION: 1}),
    (
        "four measures: durations and responses over a decade, prompts and latency over half",
        {DURATION: 1, PROMPT_TOKENS: 0.5, RESPONSE_TOKENS: 1, CALL_LATENCY: 0.5},
    ),
    (
        "four measures, each over a decade",
        {DURATION: 1, PROMPT_TOKENS: 1, RESPONSE_TOKENS: 1, CALL_LATENCY: 1},
    ),
]


def log_bin(value: float) -> int:
    """The bin of a value, as crates/core/src/distribution.rs `log_bin` counts it."""
    return round(20 * math.log10(value))


def serve(binary: Path, database: Path) -> str:
    return f"{binary} serve --database {database} --listen {{addr}} --log warn"


def read_model(binary: Path, database: Path, no_fill: bool, calls: int) -> dict[str, float]:
    """Runs the bench against a server on `database`; returns GetTrainingSummary's times."""
    command = [str(binary), "bench", "--server-cmd", serve(binary, database), "--json"]
    command += ["read-model", "--versions", "200", "--calls", str(calls)]
    if no_fill:
        command.append("--no-fill")
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr}")
    report = json.loads(result.stdout)
    row = next(row for row in report["rows"] if row["name"] == "GetTrainingSummary")
    latency = row["latency"]
    return {key: latency[f"{key}_ms"] for key in ("p50", "p90", "p99")}


def spread(database: Path, decades: dict[int, float]) -> int:
    """Rewrites the measures' rows of every (version, mode) pair; returns the rows written."""
    with contextlib.closing(sqlite3.connect(database)) as db, db:
        pairs = db.execute("SELECT DISTINCT version, mode FROM training_summary").fetchall()
        db.execute(
            f"DELETE FROM training_measures WHERE measure IN ({','.join('?' * len(decades))})",
            list(decades),
        )
        rows = []
        for version, mode in pairs:
            for measure, span in decades.items():
                first = log_bin(START[measure])
                for bin_ in range(first, first + round(20 * span)):
                    value = round(10 ** (bin_ / 20))
                    rows.append((version, mode, measure, bin_, 0, 1, value))
        db.executemany("INSERT INTO training_measures VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        count: int = db.execute("SELECT COUNT(*) FROM training_measures").fetchone()[0]
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", type=Path, default=Path("target/quick-release/lightning-store"))
    parser.add_argument("--calls", type=int, default=100, help="GetTrainingSummary calls per variant")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="measure-spread-") as tmp:
        filled = Path(tmp) / "filled.db"
        read_model(args.binary.resolve(), filled, no_fill=False, calls=1)
        with contextlib.closing(sqlite3.connect(filled)) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        print("| the store's measure rows (SQLite) | rows | server p50 ms | p90 ms | p99 ms |")
        print("|---|---:|---:|---:|---:|")
        for name, decades in VARIANTS:
            copy = Path(tmp) / "variant.db"
            shutil.copyfile(filled, copy)
            if decades is None:
                with contextlib.closing(sqlite3.connect(copy)) as db:
                    rows = db.execute("SELECT COUNT(*) FROM training_measures").fetchone()[0]
            else:
                rows = spread(copy, decades)
            times = read_model(args.binary.resolve(), copy, no_fill=True, calls=args.calls)
            print(
                f"| {name} | {rows:,} | {times['p50']:.1f} | {times['p90']:.1f} | {times['p99']:.1f} |",
                flush=True,
            )
            copy.unlink()


if __name__ == "__main__":
    main()
