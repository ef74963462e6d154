"""The headline figures of docs/performance.md, measured in one run, printed as its tables.

Every backend (memory, SQLite, PostgreSQL) through the gRPC API (`lightning-store bench`:
lifecycles one rollout per call and in batches, span ingest, dispatch, queries, the
transport's ceiling) and agent-lightning 1.x's API and LLM gateway, beside the alternatives
measured in the same rounds: agent-lightning 0.3.0's `agl store` through its own client
(benches/agl0_client.py) and agentlightning 1.0.2's own server through the same bench. Each
round runs every case once, in an order that alternates from round to round, each server
started fresh on a fresh database; the tables give the range over the rounds, and the ratios
to upstream are taken within each round. The server's CPU per operation is read from
/proc around each run.

    cargo build --release
    python3 benches/figures.py --rounds 3

Needs python3 and the release binary (or `--binary`). PostgreSQL rows need its server
binaries where Debian's `postgresql` package puts them (/usr/lib/postgresql/*/bin; as root,
a `postgres` user): the script starts a throwaway cluster with the defaults (fsync on) and
removes it. The upstream rows need `tools/pyenv.sh agl0` and `agl1` (created on first use).
Measure on a quiet machine: docs/performance.md#how-to-measure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from _net import free_port
from _proc import cpu_seconds

REPOSITORY = Path(__file__).resolve().parent.parent
BENCH_MODEL = "bench-model"
STARTUP_SECONDS = 60.0
# The en dash of the pages' ranges ("1,371\u20131,522") and empty cells.
DASH = "\u2013"


def command_output(*command: str) -> str:
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def pyenv(name: str) -> Path:
    """The Python of a tools/pyenv.sh environment (created on first use)."""
    return Path(command_output(str(REPOSITORY / "tools/pyenv.sh"), name)) / "bin" / "python"


class Server:
    """A server under test, started fresh; its log goes to a file of its own directory."""

    def __init__(self, name: str, command: list[str], env: dict[str, str] | None = None) -> None:
        self.name = name
        self.workdir = tempfile.TemporaryDirectory(prefix="figures-")
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.command = [part.format(port=self.port, dir=self.workdir.name) for part in command]
        self.log = Path(self.workdir.name) / "server.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                self.command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir.name,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{name} exited while starting:\n{self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://{self.address}/healthz", timeout=1) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{name} did not answer /healthz within {STARTUP_SECONDS:.0f} s")

    def cpu(self) -> float:
        return cpu_seconds(self.process.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.workdir.cleanup()


class Cluster:
    """A throwaway PostgreSQL cluster on a free loopback port, with its default settings."""

    def __init__(self) -> None:
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        if not bins:
            raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin")
        self.bin = bins[-1].parent
        self.dir = Path(tempfile.mkdtemp(prefix="figures-pg-"))
        self.port = free_port()
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            shutil.chown(self.dir, user="postgres", group="postgres")
        self.run(f"{self.bin}/initdb -D {self.dir}/data -A trust -U postgres")
        self.run(
            f"{self.bin}/pg_ctl -D {self.dir}/data -l {self.dir}/log -w "
            f"-o '-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1' start"
        )
        self.databases = 0

    def run(self, shell: str) -> None:
        command = ["su", "postgres", "-c", shell] if self.as_postgres else ["sh", "-c", shell]
        subprocess.run(command, check=True, capture_output=True)

    def fresh_database(self) -> str:
        self.databases += 1
        name = f"figures_{self.databases}"
        self.run(f"{self.bin}/createdb -h 127.0.0.1 -p {self.port} -U postgres {name}")
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def cpu(self) -> float:
        """The CPU time of every process of the cluster so far, exited children included."""
        pid = int((self.dir / "data" / "postmaster.pid").read_text().split()[0])
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        reaped = (int(stat[13]) + int(stat[14])) / os.sysconf("SC_CLK_TCK")
        return cpu_seconds(pid) + reaped + sum(cpu_seconds(int(child)) for child in children)

    def stop(self) -> None:
        self.run(f"{self.bin}/pg_ctl -D {self.dir}/data -m fast -w stop")
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class Sample:
    """One run of a case: its figure, and the server's CPU per operation (ms) when known."""

    value: float
    cpu_ms: float | None = None
    extra: dict[str, float] = field(default_factory=dict)


@dataclass
class Figures:
    """The samples of every case, in the order the rounds produced them."""

    samples: dict[str, list[Sample]] = field(default_factory=dict)

    def add(self, case: str, sample: Sample) -> None:
        self.samples.setdefault(case, []).append(sample)

    def values(self, case: str) -> list[float]:
        return [sample.value for sample in self.samples.get(case, [])]


def span(values: list[float], digits: int = 0, unit: str = "", signed: bool = False) -> str:
    """A range over rounds, low and high joined by an en dash, as docs/performance.md writes it."""
    if not values:
        return DASH

    def text(value: float) -> str:
        return f"{value:{'+' if signed else ''},.{digits}f}{unit}"

    low, high = min(values), max(values)
    return text(low) if text(low) == text(high) else f"{text(low)}{DASH}{text(high)}"


def ratios(ours: list[float], theirs: list[float]) -> str:
    """The range of per-round ratios, ours over theirs."""
    pairs = [a / b for a, b in zip(ours, theirs, strict=False) if b]
    return f"{span(pairs, 1)}x" if pairs else DASH


class Run:
    """One figures run: the binary, the cluster, the environments and what they measured."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.binary = str(Path(args.binary).resolve())
        self.duration = str(args.duration)
        self.figures = Figures()
        self.cluster = None if args.no_postgres else Cluster()
        self.upstream = not args.no_upstream
        self.agl1_python = pyenv("agl1") if self.upstream else None
        self.agl0_python = pyenv("agl0") if self.upstream else None

    def backends(self) -> list[str]:
        return ["memory", "sqlite"] + (["postgres"] if self.cluster else [])

    def serve(self, backend: str, *extra: str) -> Server:
        storage = {
            "memory": ["--store", "memory"],
            "sqlite": ["--store", "sqlite", "--database", "{dir}/figures.db"],
        }.get(backend)
        if storage is None:
            assert self.cluster is not None
            storage = ["--store", "postgres", "--database-url", self.cluster.fresh_database()]
        command = [self.binary, "serve", *storage, "--listen", "127.0.0.1:{port}", "--log", "warn", *extra]
        return Server(f"lightning-store ({backend})", command)

    def bench(self, address: str, *scenario: str) -> dict[str, Any]:
        command = [self.binary, "bench", "--json", "--server", address, *scenario]
        output = subprocess.run(command, check=True, capture_output=True, text=True, timeout=600)
        report: dict[str, Any] = json.loads(output.stdout)
        errors = sum(row["errors"] for row in report["rows"])
        if errors:
            raise RuntimeError(
                f"{' '.join(scenario)}: {errors} errors, first {report['rows'][0]['first_error']}"
            )
        return report

    def measure(
        self, case: str, server: Server, scenario: list[str], pick: Callable[[dict[str, Any]], float]
    ) -> None:
        """Runs `scenario` against `server`, keeps `pick(report)` and the server's CPU per operation."""
        before = server.cpu()
        postgres_before = self.cluster.cpu() if self.cluster and "postgres" in case else None
        report = self.bench(server.address, *scenario, "--duration-secs", self.duration)
        used = server.cpu() - before
        operations = report["rows"][0]["ops"]
        sample = Sample(pick(report), 1000 * used / operations if operations else None)
        if "overhead_c16_p99_ms" in report["settings"]:
            sample.extra["p99"] = float(report["settings"]["overhead_c16_p99_ms"])
        if postgres_before is not None and self.cluster and operations:
            sample.extra["database_cpu_ms"] = 1000 * (self.cluster.cpu() - postgres_before) / operations
        self.figures.add(case, sample)

    def cases(self) -> list[tuple[str, Callable[[], None]]]:
        """Every case of a round, each a closure that starts its servers, measures and stops them."""

        def rate(report: dict[str, Any]) -> float:
            return float(report["rows"][0]["ops_per_sec"])

        def items(report: dict[str, Any]) -> float:
            return float(report["rows"][0]["items_per_sec"])

        def p99(report: dict[str, Any]) -> float:
            return float(report["rows"][0]["latency"]["p99_ms"])

        def p50(report: dict[str, Any]) -> float:
            return float(report["rows"][0]["latency"]["p50_ms"])

        def single(
            case: str, backend: str, scenario: list[str], pick: Callable[[dict[str, Any]], float]
        ) -> None:
            gateway = ["--gateway-model", BENCH_MODEL] if "gateway" in scenario else []
            server = self.serve(backend, *gateway)
            try:
                self.measure(case, server, scenario, pick)
            finally:
                server.stop()

        cases: list[tuple[str, Callable[[], None]]] = []
        for backend in self.backends():
            for case, scenario, pick in [
                ("lifecycle c1", ["lifecycle", "-c", "1"], rate),
                ("lifecycle c16", ["lifecycle", "-c", "16"], rate),
                ("lifecycle batch32 c16", ["lifecycle", "--batch", "32", "-c", "16"], rate),
                ("ingest store", ["ingest", "--batch", "256", "-c", "4", "--protocol", "store"], items),
                ("ingest otlp", ["ingest", "--batch", "256", "-c", "4", "--protocol", "otlp"], items),
                ("agl1 events", ["agl1", "events", "-c", "16"], rate),
                ("agl1 get", ["agl1", "get", "-c", "16"], rate),
                ("agl1 gateway", ["agl1", "gateway", "-c", "16"], self.added),
            ]:
                if backend == "postgres" and case.startswith("agl1"):
                    continue
                name = f"{backend} {case}"
                cases.append((name, partial(single, name, backend, scenario, pick)))
        for case, scenario, pick in [
            ("memory dispatch", ["dispatch", "--mode", "session", "-c", "16", "--rate", "1000"], p99),
            ("memory query", ["query", "-c", "1"], p50),
            ("memory noop", ["noop", "-c", "16"], rate),
        ]:
            cases.append((case, partial(single, case, "memory", scenario, pick)))
        if self.upstream:
            for case, scenario, pick in [
                ("upstream agl1 events", ["agl1", "events", "-c", "16"], rate),
                ("upstream agl1 get", ["agl1", "get", "-c", "16"], rate),
                ("upstream agl1 gateway", ["agl1", "gateway", "-c", "16"], self.added),
            ]:
                cases.append((case, partial(self.upstream_agl1, case, scenario, pick)))
            cases.append(("agl0", self.agl0))
        return cases

    @staticmethod
    def added(report: dict[str, Any]) -> float:
        """What the gateway added at p50 (`measure` keeps p99 beside it)."""
        return float(report["settings"]["overhead_c16_p50_ms"])

    def upstream_agl1(self, case: str, scenario: list[str], pick: Callable[[dict[str, Any]], float]) -> None:
        assert self.agl1_python is not None
        server = Server(
            "agentlightning 1.0.2",
            [
                str(self.agl1_python),
                "-m",
                "agentlightning.server",
                "host=127.0.0.1",
                "port={port}",
                "key=",
                f"default_proxy.model_name={BENCH_MODEL}",
                "hydra.output_subdir=null",
                "hydra.run.dir={dir}",
            ],
        )
        try:
            self.measure(case, server, scenario, pick)
        finally:
            server.stop()

    def agl0(self) -> None:
        """agent-lightning 0.3.0's own client against `agl store` and lightning-store (one script run)."""
        assert self.agl0_python is not None
        output = subprocess.run(
            [
                str(self.agl0_python),
                str(REPOSITORY / "benches/agl0_client.py"),
                "--clients",
                "16",
                "--duration",
                self.duration,
                "--lightning-store",
                self.binary,
                "--json",
            ],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
            timeout=900,
        )
        for row in json.loads(output.stdout):
            name = {"agl store (memory)": "agl0 agl store", "lightning-store memory": "agl0 memory"}.get(
                row["server"], "agl0 sqlite"
            )
            self.figures.add(name, Sample(row["lifecycles_per_second"], row["server_cpu_ms_per_lifecycle"]))


def machine() -> dict[str, str]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor(),
    )
    memory_kb = int(Path("/proc/meminfo").read_text().split()[1])
    dirty = command_output("git", "-C", str(REPOSITORY), "status", "--porcelain", "--untracked-files=no")
    return {
        "commit": command_output("git", "-C", str(REPOSITORY), "rev-parse", "--short", "HEAD")
        + (" (with uncommitted changes)" if dirty else ""),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} CPUs ({cpu}), {memory_kb / 2**20:.0f} GiB, Linux {platform.release()}",
    }


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@contextmanager
def timed(label: str) -> Iterator[None]:
    began = time.monotonic()
    yield
    print(f"  {label}: {time.monotonic() - began:.1f} s", file=sys.stderr, flush=True)


def table(headers: list[str], rows: list[list[str]]) -> None:
    """Prints a Markdown table, after a blank line."""
    print()
    print("| " + " | ".join(headers) + " |")
    print("|" + "---|" * len(headers))
    for row in rows:
        print("| " + " | ".join(row) + " |")


def report(figures: Figures, header: dict[str, str], rounds: int, duration: str) -> None:
    f = figures.values

    def cpu(case: str, key: str | None = None) -> list[float]:
        samples = figures.samples.get(case, [])
        if key is None:
            return [s.cpu_ms for s in samples if s.cpu_ms is not None]
        return [s.extra[key] for s in samples if key in s.extra]

    names = {"memory": "memory", "sqlite": "SQLite (durable)", "postgres": "PostgreSQL (durable, shared)"}
    backends = [b for b in names if f(f"{b} lifecycle c16")]
    print(f"Commit {header['commit']}, {header['date']}; {header['machine']}; load {header['load']}.")
    print(f"{rounds} rounds, {duration} s per run, a fresh server and database per run.")

    rows = []
    for b in backends:
        used = span(cpu(f"{b} lifecycle c16"), 2, " ms")
        database = cpu(f"{b} lifecycle c16", "database_cpu_ms")
        if database:
            used += f" (+ {span(database, 2, ' ms')} in the database)"
        counts = [span(f(f"{b} lifecycle {c}")) for c in ("c1", "c16", "batch32 c16")]
        rows.append([names[b], *counts, used])
    table(
        [
            "lifecycles/s",
            "1 client",
            "16 clients",
            "batches of 32, 16 clients",
            "server CPU per lifecycle, 16",
        ],
        rows,
    )
    table(
        ["spans/s, 256-span batches, 4 clients", "`AddSpans`", "OTLP/gRPC `Export`"],
        [[names[b], span(f(f"{b} ingest store")), span(f(f"{b} ingest otlp"))] for b in backends],
    )
    table(
        ["in memory", "figure"],
        [
            [
                "a queued rollout reaching one of 16 idle worker sessions, p99",
                span(f("memory dispatch"), 2, " ms"),
            ],
            ["`QuerySpans` of 1,000 spans, p50", span(f("memory query"), 1, " ms")],
            ["health checks, 16 clients, calls/s", span(f("memory noop"))],
        ],
    )
    store = f("agl0 agl store")
    if store:
        rows = []
        for case, name in [
            ("agl0 agl store", "`agl store` (memory)"),
            ("agl0 memory", "lightning-store, memory"),
            ("agl0 sqlite", "lightning-store, SQLite (durable)"),
        ]:
            rows.append([name, span(f(case)), ratios(f(case), store), span(cpu(case), 2, " ms")])
        table(
            ["agent-lightning 0.x's own client, 16 clients", "lifecycles/s", "vs `agl store`", "server CPU"],
            rows,
        )

    upstream = {key: f(f"upstream agl1 {key}") for key in ("events", "get")}
    rows = []
    for key, label in [("events", "`model_request` event POSTs/s"), ("get", "`GET /api/rollouts/{id}`/s")]:
        cells = [label]
        for b in ("sqlite", "memory"):
            ours = f(f"{b} agl1 {key}")
            cells.append(f"{span(ours)} ({ratios(ours, upstream[key])})" if upstream[key] else span(ours))
        rows.append([*cells, span(upstream[key])])
    added = ["what the gateway adds to a model call, p50 / p99"]
    for case in ("sqlite agl1 gateway", "memory agl1 gateway", "upstream agl1 gateway"):
        p50s = f(case)
        median = f" (median {statistics.median(p50s):+.2f})" if p50s else ""
        p99s = cpu(case, "p99")
        added.append(f"{span(p50s, 2, ' ms', signed=True)}{median} / {span(p99s, 2, ' ms', signed=True)}")
    rows.append(added)
    table(
        ["agent-lightning 1.x, 16 clients", "lightning-store, SQLite", "memory", "agentlightning 1.0.2"], rows
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--binary", default=str(REPOSITORY / "target/release/lightning-store"), help="the server binary"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every case")
    parser.add_argument("--duration", type=int, default=4, help="seconds per run")
    parser.add_argument("--no-postgres", action="store_true", help="leave PostgreSQL out")
    parser.add_argument("--no-upstream", action="store_true", help="leave agent-lightning's servers out")
    args = parser.parse_args()
    header = machine()
    load_before = load()
    run = Run(args)
    try:
        cases = run.cases()
        for round_index in range(args.rounds):
            order = cases if round_index % 2 == 0 else list(reversed(cases))
            print(f"round {round_index + 1} of {args.rounds}", file=sys.stderr, flush=True)
            for name, case in order:
                with timed(name):
                    case()
    finally:
        if run.cluster is not None:
            run.cluster.stop()
    header["load"] = f"{load_before} before, {load()} after"
    report(run.figures, header, args.rounds, run.duration)


if __name__ == "__main__":
    main()
