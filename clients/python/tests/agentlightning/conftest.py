"""Fixtures of the agent-lightning tests: the store under test and real OpenTelemetry spans."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # agent-lightning imports litellm: stay offline

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from lightning_store.agentlightning import LightningStore
from lightning_store.local_server import LocalServer


@pytest.fixture
def store(server: LocalServer) -> Iterator[LightningStore]:
    """agent-lightning's store interface on a fresh server; each async test runs in its own event loop."""
    opened = LightningStore(server.address)
    yield opened
    asyncio.run(opened.close())


class Spans:
    """Makes finished OpenTelemetry SDK spans, as agent-lightning's tracer records them."""

    def __init__(self) -> None:
        self._tracer = TracerProvider().get_tracer("agentlightning.test", "0.3.0")

    def make(self, name: str = "openai.chat.completion", **attributes: AttributeValue) -> ReadableSpan:
        with self._tracer.start_as_current_span(name, kind=SpanKind.CLIENT) as span:
            span.set_attributes({"gen_ai.request.model": "m", **attributes})
            span.add_event("first_token", {"latency_ms": 12.5})
            span.set_status(Status(StatusCode.OK))
        assert isinstance(span, ReadableSpan)
        return span


@pytest.fixture
def spans() -> Spans:
    """A factory of real OpenTelemetry spans."""
    return Spans()
