"""The installed version of the package (the server's version it was released with)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("lightning-store")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

USER_AGENT = f"lightning-store-python/{__version__}"
"""Sent as the gRPC user agent, so server logs tell the client apart."""
