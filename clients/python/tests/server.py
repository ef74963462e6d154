"""A real lightning-store server for the tests: the binary on an ephemeral loopback port.

The binary is `$LIGHTNING_STORE_BIN`, else the repository's
`target/debug/lightning-store` (`cargo build`). The server binds
`127.0.0.1:0` itself and logs the address it serves on, which `start()`
reads; `restart()` serves the same database on the same port again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BINARY = Path(os.environ.get("LIGHTNING_STORE_BIN", REPO / "target" / "debug" / "lightning-store"))
START_TIMEOUT = 30.0


class Server:
    """A running `lightning-store serve` process."""

    def __init__(self, backend: str, database: Path | None = None, *extra: str) -> None:
        self.backend = backend
        self.database = database
        self.extra = extra
        self.address = ""
        self.log: list[str] = []
        self._process: subprocess.Popen[str] | None = None
        self._listen = "127.0.0.1:0"

    def start(self) -> Server:
        """Starts the server and returns once it serves."""
        command = [str(BINARY), "serve", "--listen", self._listen, "--store", self.backend, "--log-format", "json"]
        if self.database is not None:
            command += ["--database", str(self.database)]
        command += self.extra
        env = {k: v for k, v in os.environ.items() if not k.startswith("LIGHTNING_STORE_")}
        self._process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
        )
        serving = threading.Event()
        threading.Thread(target=self._read_log, args=(self._process, serving), daemon=True).start()
        if not serving.wait(START_TIMEOUT):
            self.kill()
            raise RuntimeError("the server did not start:\n" + "\n".join(self.log))
        self._listen = self.address  # a restart serves the same port
        return self

    def _read_log(self, process: subprocess.Popen[str], serving: threading.Event) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            self.log.append(line.rstrip("\n"))
            try:
                fields = json.loads(line).get("fields", {})
            except ValueError:
                continue
            if fields.get("message") == "serving gRPC and HTTP":
                self.address = fields["local_addr"]
                serving.set()
        serving.set()  # the process exited: start() reports the log

    def stop(self) -> int:
        """Stops the server with SIGTERM (graceful drain) and returns its exit status."""
        assert self._process is not None
        self._process.send_signal(signal.SIGTERM)
        status = self._process.wait(timeout=30)
        self._process = None
        return status

    def kill(self) -> None:
        """Kills the server (SIGKILL), as a crash would."""
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=30)
            self._process = None

    def restart(self) -> Server:
        """Stops the server and starts it again on the same port and database."""
        self.stop()
        return self.start()
