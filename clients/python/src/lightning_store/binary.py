"""Where the server binary is: the one the platform wheel installed beside this package, or `$LIGHTNING_STORE_BIN`.

The platform wheels install the server as the script `lightning-store`. The
client-only wheel (`py3-none-any`, for platforms with no wheel of the server)
declares a console script of that name instead, `client_only_main`, which
explains how to get the server; `server_binary()` raises `ServerNotInstalled`
with the same explanation.
"""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from pathlib import Path

from lightning_store._version import __version__

__all__ = ["BINARY_ENV", "ServerNotInstalled", "client_only_main", "how_to_get_the_server", "server_binary"]

BINARY_ENV = "LIGHTNING_STORE_BIN"
"""The environment variable naming the server binary to run instead of the installed one."""
DISTRIBUTION = "lightning-store"
COMMAND = "lightning-store"
"""The server's command; the client-only wheel declares a console script of this name instead."""


class ServerNotInstalled(FileNotFoundError):
    """Raised when there is no server binary to run: a client-only install and no `$LIGHTNING_STORE_BIN`."""


def how_to_get_the_server() -> str:
    """Returns what a user of the client-only install does to get the server."""
    return (
        f"this install of lightning-store {__version__} is the Python client only: no wheel with the server "
        f"exists for this platform ({sys.platform}, {platform.machine()}). The client works against any server. "
        "To run the server here, build it from the source distribution, which needs Rust 1.94 or newer "
        "(https://rustup.rs; about 15 minutes on two cores):\n"
        f"    pip install --force-reinstall --no-deps --no-binary {DISTRIBUTION} {DISTRIBUTION}=={__version__}\n"
        f"or run a server built elsewhere (cargo, the container image) and set {BINARY_ENV} to its binary "
        "for the pytest fixtures."
    )


def client_only_main() -> None:
    """The `lightning-store` command of the client-only wheel: explains how to get the server, exits 1."""
    sys.exit(f"lightning-store: {how_to_get_the_server()}")


def server_binary() -> Path:
    """Returns the server binary to run: `$LIGHTNING_STORE_BIN`, else the one installed with this package.

    Raises `ServerNotInstalled` when there is none (the client-only wheel, or a
    package imported from a source tree that was never installed).
    """
    named = os.environ.get(BINARY_ENV)
    if named:
        path = Path(named)
        if not path.is_file():
            raise ServerNotInstalled(f"{BINARY_ENV} names no file: {named}")
        return path
    try:
        distribution = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise ServerNotInstalled(
            f"the {DISTRIBUTION} distribution is not installed, so it has no server binary; "
            f"install its wheel or set {BINARY_ENV}"
        ) from None
    if any(e.group == "console_scripts" and e.name == COMMAND for e in distribution.entry_points):
        raise ServerNotInstalled(how_to_get_the_server())
    # The platform wheel installs the binary as a script; its RECORD lists it
    # relative to site-packages, wherever the scripts directory is...
    names = (COMMAND, f"{COMMAND}.exe")
    for file in distribution.files or ():
        if file.name in names:
            path = Path(str(distribution.locate_file(file))).resolve()
            if path.is_file():
                return path
    # ...except after `pip install --target DIR`, which puts scripts in DIR/bin
    # but records them relative to the temporary directory it installed into.
    for name in names:
        path = Path(str(distribution.locate_file("bin"))) / name
        if path.is_file():
            return path.resolve()
    raise ServerNotInstalled(
        f"the installed {DISTRIBUTION} lists no {COMMAND} binary; reinstall it or set {BINARY_ENV}"
    )
