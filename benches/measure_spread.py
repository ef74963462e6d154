"""What the training summary's measures cost its read, by how many rows they spread over.

`lightning-store bench read-model --versions 200` fills a store (100,000 rollouts, 440
version/mode pairs), but its rollouts end within a minute or two of their creation and their
model calls are alike, so its measures' rows (`training_measures`) hold a few bins per pair. This
script fills one store, then for each variant copies it, rewrites the measures' rows as if each
pair's values spread over the given number of decades (twenty bins per decade, one row per bin),
and times `GetTrainingSummary` on the copy (`bench read-model --no-fill`: the server's time per
call). The summary's reward rows are those of the fill in every variant. Given `--binary` more
than once (builds of the same schema, an A/B), the first fills the store, and each variant's copy
is read by each binary in turn, a column each.

    cargo build --profile quick-release
    python3 benches/measure_spread.py --binary target/quick-release/lightning-store
    python3 benches/measure_spread.py --postgres-url postgres://postgres@127.0.0.1:PORT
    python3 benches/measure_spread.py --binary BEFORE --binary AFTER

SQLite by default, in a temporary directory; with `--postgres-url` (a superuser; `psql` on PATH
or `--psql`), PostgreSQL, in databases `measure_spread_filled` and `measure_spread_variant`,
created and dropped. docs/performance.md#what-model-calls-used keeps the figures.
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
from typing import Protocol

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

FILLED, VARIANT = "measure_spread_filled", "measure_spread_variant"
COUNT = "SELECT COUNT(*) FROM training_measures"


def log_bin(value: float) -> int:
    """The bin of a value, as crates/core/src/distribution.rs `log_bin` counts it."""
    return round(20 * math.log10(value))


def spread_sql(decades: dict[int, float]) -> list[str]:
    """The statements rewriting every (version, mode) pair's rows of the measures in `decades`."""
    rows = []
    for measure, span in decades.items():
        first = log_bin(START[measure])
        rows += [f"({measure}, {b}, {round(10 ** (b / 20))})" for b in range(first, first + round(20 * span))]
    codes = ", ".join(str(measure) for measure in decades)
    return [
        f"DELETE FROM training_measures WHERE measure IN ({codes})",
        f"WITH m(measure, bin, total) AS (VALUES {', '.join(rows)}) "
        "INSERT INTO training_measures (version, mode, measure, bin, shard, measured, total) "
        "SELECT p.version, p.mode, m.measure, m.bin, 0, 1, m.total "
        "FROM (SELECT DISTINCT version, mode FROM training_summary) p CROSS JOIN m",
    ]


class Store(Protocol):
    def serve(self, binary: Path, name: str) -> str:
        """The command serving database `name` on `{addr}`."""
        ...

    def copy(self, source: str, name: str) -> None:
        """Makes database `name` a copy of `source` (the server stopped)."""
        ...

    def run(self, name: str, statements: list[str]) -> int:
        """Runs `statements` on database `name`; returns the measures' rows then."""
        ...


class Sqlite:
    """Databases as SQLite files of a directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def file(self, name: str) -> Path:
        return self.directory / f"{name}.db"

    def serve(self, binary: Path, name: str) -> str:
        return f"{binary} serve --database {self.file(name)} --listen {{addr}} --log warn"

    def copy(self, source: str, name: str) -> None:
        with contextlib.closing(sqlite3.connect(self.file(source))) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        shutil.copyfile(self.file(source), self.file(name))

    def run(self, name: str, statements: list[str]) -> int:
        with contextlib.closing(sqlite3.connect(self.file(name))) as db, db:
            for statement in statements:
                db.execute(statement)
            count: int = db.execute(COUNT).fetchone()[0]
        return count


class Postgres:
    """Databases of a PostgreSQL server, written with `psql`."""

    def __init__(self, url: str, psql: str) -> None:
        self.url, self.psql = url.rstrip("/"), psql

    def sql(self, database: str, statement: str) -> str:
        command = [self.psql, f"{self.url}/{database}", "-v", "ON_ERROR_STOP=1", "-Atc", statement]
        return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()

    def serve(self, binary: Path, name: str) -> str:
        return (
            f"{binary} serve --store postgres --database-url {self.url}/{name} --listen {{addr}} --log warn"
        )

    def copy(self, source: str, name: str) -> None:
        self.sql("postgres", f"DROP DATABASE IF EXISTS {name}")
        self.sql("postgres", f"CREATE DATABASE {name} TEMPLATE {source}")

    def run(self, name: str, statements: list[str]) -> int:
        for statement in statements:
            self.sql(name, statement)
        return int(self.sql(name, COUNT))

    def create(self, name: str) -> None:
        self.sql("postgres", f"DROP DATABASE IF EXISTS {name}")
        self.sql("postgres", f"CREATE DATABASE {name}")

    def drop(self) -> None:
        for name in (VARIANT, FILLED):
            self.sql("postgres", f"DROP DATABASE IF EXISTS {name}")


def read_model(binary: Path, serve: str, no_fill: bool, calls: int) -> dict[str, float]:
    """Runs the bench against a server started by `serve`; returns GetTrainingSummary's times."""
    command = [str(binary), "bench", "--server-cmd", serve, "--json"]
    command += ["read-model", "--versions", "200", "--calls", str(calls)]
    if no_fill:
        command.append("--no-fill")
    result = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr}")
    report = json.loads(result.stdout)
    row = next(row for row in report["rows"] if row["name"] == "GetTrainingSummary")
    latency = row["latency"]
    return {key: latency[f"{key}_ms"] for key in ("p50", "p90", "p99")}


def measure(store: Store, binaries: list[Path], calls: int, backend: str) -> None:
    """Fills database FILLED with the first binary, then prints a row per variant, p50 / p90 /
    p99 ms of each binary."""
    read_model(binaries[0], store.serve(binaries[0], FILLED), no_fill=False, calls=1)
    for number, binary in enumerate(binaries, 1):
        print(f"binary {number}: {binary}")
    columns = [f"binary {number}" for number in range(1, len(binaries) + 1)]
    print(f"| the store's measure rows ({backend}) | rows | {' | '.join(columns)} |")
    print(f"|---|---:|{'---|' * len(binaries)}")
    for name, decades in VARIANTS:
        store.copy(FILLED, VARIANT)
        rows = store.run(VARIANT, spread_sql(decades) if decades is not None else [])
        cells = []
        for binary in binaries:
            times = read_model(binary, store.serve(binary, VARIANT), no_fill=True, calls=calls)
            cells.append(f"{times['p50']:.1f} / {times['p90']:.1f} / {times['p99']:.1f}")
        print(f"| {name} | {rows:,} | {' | '.join(cells)} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--binary",
        type=Path,
        action="append",
        help="a lightning-store build; again for an A/B (default target/quick-release/lightning-store)",
    )
    parser.add_argument("--calls", type=int, default=100, help="GetTrainingSummary calls per variant")
    parser.add_argument("--postgres-url", help="a PostgreSQL server, postgres://USER@HOST:PORT")
    parser.add_argument("--psql", default="psql", help="the psql to write PostgreSQL's databases with")
    args = parser.parse_args()
    binaries = [binary.resolve() for binary in args.binary or [Path("target/quick-release/lightning-store")]]
    if args.postgres_url:
        postgres = Postgres(args.postgres_url, args.psql)
        postgres.create(FILLED)
        try:
            measure(postgres, binaries, args.calls, "PostgreSQL")
        finally:
            postgres.drop()
        return
    with tempfile.TemporaryDirectory(prefix="measure-spread-") as tmp:
        measure(Sqlite(Path(tmp)), binaries, args.calls, "SQLite")


if __name__ == "__main__":
    main()
