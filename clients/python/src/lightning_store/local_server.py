"""A lightning-store server as a child process: the binary installed with this package, on a loopback port.

`LocalServer` starts `lightning-store serve` on `127.0.0.1:0` (the server
binds a free port itself: no race for the port), learns the address from the
server's log, and returns once the server answers its gRPC health check as
SERVING: no sleeps, no polling. The pytest fixtures
(`lightning_store.pytest_plugin`) are built on it; use it directly for other
scopes or tools:

    with LocalServer("sqlite", database=tmp_dir / "store.db") as server:
        with Client(server.address) as client:
            ...

The binary is `$LIGHTNING_STORE_BIN` when set, else the one the platform wheel
installed beside this package (`lightning_store.binary.server_binary()`). The
client-only wheel, for platforms with no wheel of the server, has none:
`ServerNotInstalled` then says how to get it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import grpc

from lightning_store.binary import server_binary

__all__ = ["LocalServer"]

HEALTH_CHECK = "/grpc.health.v1.Health/Check"
SERVING = b"\x08\x01"
"""`grpc.health.v1.HealthCheckResponse{status: SERVING}` as it travels (field 1, varint 1)."""
SERVING_LOG_MESSAGE = "serving gRPC and HTTP"
"""The server's log line once it listens; its `local_addr` field is the bound address."""
LOG_LINES_KEPT = 2000


class LocalServer:
    """A `lightning-store serve` process on a loopback port, for tests and local tools.

    `start()` returns once the server is healthy; `address` is then its
    `host:port`, which stays the same across `stop()` and `start()`, so that
    clients reconnect to the restarted server. The health check speaks
    plaintext gRPC: pass no TLS options in `args`.
    """

    def __init__(
        self,
        backend: str = "memory",
        database: str | Path | None = None,
        *,
        args: Sequence[str] = (),
        binary: str | Path | None = None,
        host: str = "127.0.0.1",
        start_timeout: float = 30.0,
        stop_timeout: float = 15.0,
    ) -> None:
        """Describes the server; nothing runs before `start()`.

        `backend` is `serve --store` (`memory`, `sqlite`, `postgres`);
        `database` the SQLite file (required for `sqlite`); `args` further
        `serve` options (`--database-url` for `postgres`, `--tokens-file`, ...);
        `binary` the server binary (default: `server_binary()`).
        """
        if backend == "sqlite" and database is None:
            raise ValueError("a sqlite server needs database=PATH (a file in a temporary directory for tests)")
        self.backend = backend
        """The storage backend (`serve --store`)."""
        self.database = Path(database) if database is not None else None
        """The SQLite file, if any."""
        self.args = tuple(args)
        """Further `serve` options."""
        self.binary = Path(binary) if binary is not None else server_binary()
        """The server binary."""
        self.address = ""
        """`host:port` of the running server ("" before the first start)."""
        self.log: deque[str] = deque(maxlen=LOG_LINES_KEPT)
        """The server's latest log lines (JSON), for the messages of failed tests."""
        self.start_timeout = start_timeout
        """Seconds `start()` waits for the server to become healthy."""
        self.stop_timeout = stop_timeout
        """Seconds `stop()` waits for the server to exit before it kills it."""
        self._listen = f"{host}:0"
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Whether the process was started and has not exited."""
        return self._process is not None and self._process.poll() is None

    def command(self) -> list[str]:
        """Returns the command line `start()` runs."""
        command = [str(self.binary), "serve", "--listen", self._listen, "--store", self.backend, "--log-format", "json"]
        if self.database is not None:
            command += ["--database", str(self.database)]
        return command + list(self.args)

    def start(self) -> LocalServer:
        """Starts the server and returns once it answers its health check as SERVING."""
        if self._process is not None:
            raise RuntimeError("the server is already started")
        # The server reads its settings from LIGHTNING_STORE_* variables too: the
        # caller's environment must not reconfigure it behind the arguments.
        env = {name: value for name, value in os.environ.items() if not name.startswith("LIGHTNING_STORE_")}
        process = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self._process = process
        listening = threading.Event()
        bound: list[str] = []
        self._reader = threading.Thread(target=self._read_log, args=(process, listening, bound), daemon=True)
        self._reader.start()
        deadline = time.monotonic() + self.start_timeout
        try:
            if not listening.wait(self.start_timeout):
                raise RuntimeError(self._failure(f"did not listen within {self.start_timeout} s"))
            if not bound:  # its log closed: the process is exiting
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(self.stop_timeout)
                raise RuntimeError(self._failure("stopped before it listened"))
            self.address = bound[0]
            self._check_health(deadline - time.monotonic())
        except BaseException:
            self.kill()
            raise
        self._listen = self.address  # a restart serves the same port
        return self

    def _read_log(self, process: subprocess.Popen[str], listening: threading.Event, bound: list[str]) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            self.log.append(line.rstrip("\n"))
            if not listening.is_set():
                try:
                    fields = json.loads(line).get("fields", {})
                except ValueError:
                    continue
                if fields.get("message") == SERVING_LOG_MESSAGE:
                    bound.append(str(fields["local_addr"]))
                    listening.set()
        listening.set()  # the process closed its log (it exited): start() reports it

    def _check_health(self, timeout: float) -> None:
        """Waits, within `timeout` seconds, until grpc.health.v1 answers SERVING."""
        with grpc.insecure_channel(self.address) as channel:
            check: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
                HEALTH_CHECK
            )  # bytes as they travel
            try:
                # An empty HealthCheckRequest (the server as a whole) is no bytes.
                reply = check(b"", timeout=max(timeout, 0.0), wait_for_ready=True)
            except grpc.RpcError as error:
                raise RuntimeError(self._failure(f"failed its health check ({error.code().name})")) from None
        if reply != SERVING:
            raise RuntimeError(self._failure(f"answered its health check with {reply!r}, not SERVING"))

    def _failure(self, what: str) -> str:
        status = self._process.poll() if self._process is not None else None
        exited = f" (exit status {status})" if status is not None else ""
        return f"the server {what}{exited}: {' '.join(self.command())}\n" + "\n".join(self.log)

    def stop(self) -> int:
        """Stops the server gracefully (SIGTERM: it drains and exits) and returns its exit status.

        Kills it when it has not exited within the stop timeout.
        """
        process = self._require_process()
        process.terminate()
        try:
            process.wait(self.stop_timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        return self._reap(process)

    def kill(self) -> None:
        """Kills the server (SIGKILL), as a crash would."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._reap(self._process)

    def restart(self) -> LocalServer:
        """Stops the server and starts it again on the same port and database."""
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stops the server if it runs."""
        if self._process is not None:
            self.stop()

    def _require_process(self) -> subprocess.Popen[str]:
        if self._process is None:
            raise RuntimeError("the server is not started")
        return self._process

    def _reap(self, process: subprocess.Popen[str]) -> int:
        if self._reader is not None:
            self._reader.join(self.stop_timeout)
        self._process = self._reader = None
        return process.returncode

    def __enter__(self) -> LocalServer:
        return self if self._process is not None else self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LocalServer(backend={self.backend!r}, address={self.address!r}, running={self.running})"
