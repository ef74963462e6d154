"""How to reach a lightning-store server: address, TLS, token, deadlines and retries, in one place.

The options are plain frozen dataclasses: they compare, print and pickle, so a
client handed to a runner subprocess reconnects with the same settings.
"""

from __future__ import annotations

import os
import random
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc

DEFAULT_ADDRESS = "127.0.0.1:4747"
"""Where `lightning-store serve` listens by default."""
ADDRESS_ENV = "LIGHTNING_STORE_SERVER"
"""The environment variable with the server's address (the CLI's `--server`)."""
TOKEN_ENV = "LIGHTNING_STORE_TOKEN"
"""The environment variable with the bearer token."""
NAMESPACE_ENV = "LIGHTNING_STORE_NAMESPACE"
"""The environment variable with the namespace to work in (the CLI's `--namespace`)."""
NAMESPACE_METADATA = "lightning-store-namespace"
"""The gRPC metadata key that names a call's namespace."""
_NAMESPACE_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


def check_namespace(name: str) -> str:
    """Returns `name` if it is a namespace name, else raises ValueError.

    A name is a DNS label: 1 to 63 lowercase letters, digits and hyphens, beginning and ending with a letter or a
    digit.
    """
    if not _NAMESPACE_NAME.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a namespace name: 1 to 63 lowercase letters, digits and hyphens, "
            "beginning and ending with a letter or a digit"
        )
    return name


@dataclass(frozen=True)
class TlsOptions:
    """TLS settings: the CA to trust, and a client certificate for mutual TLS."""

    root_certificates: bytes | None = None
    """PEM certificates of the CAs to trust; None trusts the system's roots."""
    certificate_chain: bytes | None = None
    """PEM certificate chain of this client (mutual TLS)."""
    private_key: bytes | None = None
    """PEM private key of `certificate_chain`."""
    server_name: str | None = None
    """Name to expect in the server's certificate when it differs from the address's host."""

    @classmethod
    def from_files(
        cls,
        ca: str | Path | None = None,
        cert: str | Path | None = None,
        key: str | Path | None = None,
        server_name: str | None = None,
    ) -> TlsOptions:
        """Returns TLS options read from PEM files."""

        def read(path: str | Path | None) -> bytes | None:
            return Path(path).read_bytes() if path is not None else None

        return cls(read(ca), read(cert), read(key), server_name)

    def credentials(self) -> grpc.ChannelCredentials:
        """Returns the gRPC channel credentials."""
        return grpc.ssl_channel_credentials(self.root_certificates, self.private_key, self.certificate_chain)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, bounded in time.

    Applies to calls that are safe to repeat (reads, heartbeats, span writes,
    whose duplicates the server ignores) when the server is unavailable, and
    to the reconnection of streams. Other writes are never retried.
    """

    initial_backoff: float = 0.05
    """First delay, in seconds."""
    max_backoff: float = 1.0
    """Longest delay, in seconds."""
    multiplier: float = 2.0
    """Growth of the delay after each failure."""
    timeout: float = 15.0
    """Gives up once this many seconds passed since the first failure; 0 disables retries."""

    def delays(self) -> Iterator[float]:
        """Yields the delays to wait before each retry, until the time budget is spent."""
        give_up = time.monotonic() + self.timeout
        ceiling = self.initial_backoff
        while True:
            delay = random.uniform(0, ceiling)
            if time.monotonic() + delay > give_up:
                return
            yield delay
            ceiling = min(ceiling * self.multiplier, self.max_backoff)


@dataclass(frozen=True)
class ConnectionOptions:
    """Everything a client needs to reach the server."""

    address: str = DEFAULT_ADDRESS
    """`host:port`, `http://host:port` (plaintext) or `https://host:port` (TLS with the system's roots)."""
    tls: TlsOptions | None = None
    """TLS settings; None means plaintext unless the address starts with `https://`."""
    token: str | None = field(default=None, repr=False)
    """Bearer token sent as `authorization` metadata with every call."""
    metadata: tuple[tuple[str, str], ...] = ()
    """Further metadata sent with every call."""
    timeout: float | None = 30.0
    """Deadline of a unary call in seconds (calls that wait get their wait on top); None: no deadline."""
    retry: RetryPolicy = RetryPolicy()
    """Backoff for safe retries and stream reconnection."""
    wait_for_ready: bool = True
    """Lets a unary call wait, within its deadline, while the server is unreachable (restarting) instead of failing
    at once: a call waiting so was not sent yet, so even writes stay safe. False: fail fast with `Unavailable`.
    Streams always fail fast and reconnect with `retry`."""
    max_message_bytes: int = 64 * 1024 * 1024
    """Largest message sent or received (the server's default limit)."""
    namespace: str | None = None
    """The namespace every call works in, sent as `lightning-store-namespace` metadata (and, over HTTP, the path
    prefix `/ns/{namespace}`); None: the `default` namespace (or, with a token limited to one namespace, that one)."""

    def __post_init__(self) -> None:
        if self.namespace is not None:
            check_namespace(self.namespace)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> ConnectionOptions:
        """Returns options from the environment, then `overrides`.

        The environment: `LIGHTNING_STORE_SERVER`, `LIGHTNING_STORE_TOKEN` and `LIGHTNING_STORE_NAMESPACE`.
        """
        env = os.environ if environ is None else environ
        options = cls(
            address=env.get(ADDRESS_ENV, DEFAULT_ADDRESS),
            token=env.get(TOKEN_ENV) or None,
            namespace=env.get(NAMESPACE_ENV) or None,
        )
        return replace(options, **overrides)

    @property
    def target(self) -> str:
        """Returns the gRPC target (`host:port`)."""
        for scheme in ("http://", "https://"):
            if self.address.startswith(scheme):
                return self.address[len(scheme) :].rstrip("/")
        return self.address

    @property
    def http_url(self) -> str:
        """Returns the server's HTTP base URL (`http(s)://host:port`), where its HTTP routes and OTLP/HTTP listen."""
        return f"{'https' if self.uses_tls else 'http'}://{self.target}"

    @property
    def namespace_url(self) -> str:
        """Returns the HTTP base URL of the namespace: `http_url`, followed by `/ns/{namespace}` if one is set."""
        if self.namespace is None:
            return self.http_url
        return f"{self.http_url}/ns/{self.namespace}"

    @property
    def uses_tls(self) -> bool:
        """Tells whether the channel is encrypted."""
        return self.tls is not None or self.address.startswith("https://")

    def call_metadata(self) -> tuple[tuple[str, str], ...]:
        """Returns the metadata sent with every call: the token, the namespace, then `metadata`."""
        sent: list[tuple[str, str]] = []
        if self.token is not None:
            sent.append(("authorization", f"Bearer {self.token}"))
        if self.namespace is not None:
            sent.append((NAMESPACE_METADATA, self.namespace))
        return (*sent, *self.metadata)

    def channel_options(self, user_agent: str) -> list[tuple[str, Any]]:
        """Returns the channel arguments: message limits, quick reconnection, TLS name override."""
        options: list[tuple[str, Any]] = [
            ("grpc.max_send_message_length", self.max_message_bytes),
            ("grpc.max_receive_message_length", self.max_message_bytes),
            # Reconnect within ~1 s of a restarted server instead of gRPC's default 1-120 s.
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
            ("grpc.primary_user_agent", user_agent),
        ]
        if self.tls is not None and self.tls.server_name is not None:
            options.append(("grpc.ssl_target_name_override", self.tls.server_name))
        return options

    def credentials(self) -> grpc.ChannelCredentials | None:
        """Returns the TLS credentials, or None for a plaintext channel."""
        if self.tls is not None:
            return self.tls.credentials()
        return grpc.ssl_channel_credentials() if self.uses_tls else None
