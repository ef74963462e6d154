"""Helpers shared by the agent-lightning 0.x compatibility tests."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from agentlightning.store.client_server import LightningStoreClient
from agentlightning.types import OtelResource, Span, TraceStatus

T = TypeVar("T")


def drive(url: str, scenario: Callable[[LightningStoreClient], Awaitable[T]]) -> T:
    """Runs `scenario` with agent-lightning's own client on one event loop."""

    async def main() -> T:
        client = LightningStoreClient(url, retry_delays=(0.05,), health_retry_delays=(0.05,))
        try:
            return await scenario(client)
        finally:
            await client.close()

    return asyncio.run(main())


async def drain(client: LightningStoreClient) -> None:
    """Claims whatever another test left in the shared queue."""
    while await client.dequeue_rollout() is not None:
        pass


def make_span(rollout_id: str, attempt_id: str, sequence_id: int, name: str, **extra: Any) -> Span:
    """Returns a span with deterministic ids derived from `sequence_id`."""
    return Span(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        sequence_id=sequence_id,
        trace_id=f"{abs(sequence_id):032x}",
        span_id=f"{abs(sequence_id):016x}",
        parent_id=None,
        name=name,
        status=TraceStatus(status_code="OK"),
        attributes={},
        events=[],
        links=[],
        start_time=None,
        end_time=None,
        context=None,
        parent=None,
        resource=OtelResource(attributes={}, schema_url=""),
        **extra,
    )


@dataclass
class HttpAnswer:
    """A whole HTTP answer."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode()


def http(
    url: str,
    method: str,
    path: str,
    *,
    json_body: Any = None,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> HttpAnswer:
    """Sends one plain HTTP/1.1 request and returns the answer, errors included."""
    all_headers = dict(headers or {})
    if json_body is not None:
        body = json.dumps(json_body).encode()
        all_headers.setdefault("Content-Type", "application/json")
    request = urllib.request.Request(url + path, data=body, method=method, headers=all_headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return HttpAnswer(response.status, dict(response.headers.items()), response.read())
    except urllib.error.HTTPError as error:
        return HttpAnswer(error.code, dict(error.headers.items()), error.read())
