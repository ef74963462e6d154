"""OTLP/HTTP into `POST /v1/traces` from the OpenTelemetry Python SDK: its
own protobuf exporter (plain and gzip) and its encoder rendered as OTLP/JSON,
with agent-lightning's resource attributes. The spans land on the right
attempt, with allocated or explicit sequence ids."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Sequence
from typing import Any

from agentlightning.store.client_server import LightningStoreClient
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from helpers import drive, http

ROLLOUT = "agentlightning.rollout_id"
ATTEMPT = "agentlightning.attempt_id"
SEQUENCE = "agentlightning.span_sequence_id"


class OtlpJsonExporter(SpanExporter):
    """The SDK's OTLP encoder, sent as OTLP/JSON (ids as hex, per the spec).

    The official JSON exporter (`opentelemetry-exporter-otlp-json-http`)
    cannot be installed beside the pinned protobuf exporter 1.45.2.
    """

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.answers: list[tuple[int, Any]] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        body = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
        for resource_spans in body.get("resourceSpans", []):
            for scope_spans in resource_spans.get("scopeSpans", []):
                for span in scope_spans.get("spans", []):
                    _hex_ids(span)
                    for link in span.get("links", []):
                        _hex_ids(link)
        answer = http(
            self.endpoint,
            "POST",
            "/v1/traces",
            body=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        self.answers.append((answer.status, answer.json() if answer.body else None))
        return SpanExportResult.SUCCESS if answer.status == 200 else SpanExportResult.FAILURE


def _hex_ids(message: dict[str, Any]) -> None:
    for key in ("traceId", "spanId", "parentSpanId"):
        if key in message:
            message[key] = base64.b64decode(message[key]).hex()


def _provider(exporter: SpanExporter, rollout_id: str, attempt_id: str) -> TracerProvider:
    resource = Resource.create({ROLLOUT: rollout_id, ATTEMPT: attempt_id, "service.name": "agl0-tests"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def _record(provider: TracerProvider, prefix: str) -> None:
    tracer = provider.get_tracer("agl0-tests", "1.0")
    with tracer.start_as_current_span(f"{prefix}.parent") as parent:
        parent.set_attribute("gen_ai.usage.total_tokens", 42)
        with tracer.start_as_current_span(f"{prefix}.child", attributes={SEQUENCE: 100}) as child:
            child.set_attribute("scores", [0.5, 1.5])
            child.add_event("token", {"index": 1})


def test_sdk_exporters_reach_the_right_attempt(store_url: str) -> None:
    async def setup(c: LightningStoreClient) -> tuple[str, str, str]:
        rollout = await c.start_rollout(input="otlp")
        again = await c.start_attempt(rollout.rollout_id)
        return rollout.rollout_id, rollout.attempt.attempt_id, again.attempt.attempt_id

    rollout_id, first_attempt, second_attempt = drive(store_url, setup)

    protobuf = OTLPSpanExporter(endpoint=f"{store_url}/v1/traces")
    _record(_provider(protobuf, rollout_id, first_attempt), "protobuf")
    gzipped = OTLPSpanExporter(endpoint=f"{store_url}/v1/traces", compression=Compression.Gzip)
    _record(_provider(gzipped, rollout_id, first_attempt), "gzip")
    as_json = OtlpJsonExporter(store_url)
    _record(_provider(as_json, rollout_id, second_attempt), "json")
    assert [status for status, _ in as_json.answers] == [200, 200]
    assert all(body == {} for _, body in as_json.answers)

    async def read(c: LightningStoreClient) -> dict[str, Any]:
        return {
            "first": list(await c.query_spans(rollout_id, first_attempt)),
            "second": list(await c.query_spans(rollout_id, second_attempt)),
            "next": await c.get_next_span_sequence_id(rollout_id, second_attempt),
            "rollout": await c.get_rollout_by_id(rollout_id),
        }

    stored = drive(store_url, read)
    first = {span.name: span for span in stored["first"]}
    assert sorted(first) == ["gzip.child", "gzip.parent", "protobuf.child", "protobuf.parent"]
    second = {span.name: span for span in stored["second"]}
    assert sorted(second) == ["json.child", "json.parent"]
    # Children carry an explicit sequence id and end (are exported) first;
    # each parent then gets the next id above it.
    assert {first["protobuf.child"].sequence_id, first["gzip.child"].sequence_id} == {100}
    assert second["json.child"].sequence_id == 100
    parents = [first["protobuf.parent"], first["gzip.parent"], second["json.parent"]]
    assert [span.sequence_id for span in parents] == [101, 102, 103]
    assert stored["next"] == 104
    for spans in (first, second):
        for name, span in spans.items():
            assert len(span.trace_id) == 32 and len(span.span_id) == 16
            assert span.resource.attributes["service.name"] == "agl0-tests"
            if name.endswith(".child"):
                parent = spans[name.replace("child", "parent")]
                assert span.parent_id == parent.span_id and span.trace_id == parent.trace_id
                assert span.attributes["scores"] == [0.5, 1.5]
                assert [event.name for event in span.events] == ["token"]
            else:
                assert span.attributes["gen_ai.usage.total_tokens"] == 42
    # Spans on the latest attempt make the rollout run.
    assert stored["rollout"] is not None and stored["rollout"].status == "running"


def _request(rollout_id: str, attempt_id: str) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    for key, value in ((ROLLOUT, rollout_id), (ATTEMPT, attempt_id)):
        attribute = resource_spans.resource.attributes.add()
        attribute.key = key
        attribute.value.string_value = value
    span = resource_spans.scope_spans.add().spans.add()
    span.trace_id = bytes(range(16))
    span.span_id = bytes(range(8))
    span.name = "raw"
    return request


def test_otlp_http_answers_follow_the_specification(store_url: str) -> None:
    rollout = drive(store_url, lambda c: c.start_rollout(input="raw"))
    good = _request(rollout.rollout_id, rollout.attempt.attempt_id).SerializeToString()
    unknown = _request("ro-unknown", "at-unknown").SerializeToString()
    protobuf = {"Content-Type": "application/x-protobuf"}

    stored = http(store_url, "POST", "/v1/traces", body=good, headers=protobuf)
    assert (stored.status, stored.headers["content-type"]) == (200, "application/x-protobuf")
    assert not ExportTraceServiceResponse.FromString(stored.body).HasField("partial_success")
    # Spans that cannot be stored are reported, not failed.
    rejected = http(store_url, "POST", "/v1/traces", body=unknown, headers=protobuf)
    answer = ExportTraceServiceResponse.FromString(rejected.body)
    assert rejected.status == 200 and answer.partial_success.rejected_spans == 1
    assert "Rollout ro-unknown not found" in answer.partial_success.error_message
    # gzip both ways.
    zipped = http(
        store_url,
        "POST",
        "/v1/traces",
        body=gzip.compress(good),
        headers={**protobuf, "Content-Encoding": "gzip", "Accept-Encoding": "gzip"},
    )
    assert zipped.status == 200 and zipped.headers["content-encoding"] == "gzip"
    ExportTraceServiceResponse.FromString(gzip.decompress(zipped.body))
    # Malformed payloads and unsupported types.
    broken = http(store_url, "POST", "/v1/traces", body=b"\xff\xff\xff", headers=protobuf)
    assert broken.status == 400 and broken.headers["content-type"] == "application/x-protobuf"
    assert (
        http(store_url, "POST", "/v1/traces", body=b"{", headers={"Content-Type": "application/json"}).status
        == 400
    )
    assert (
        http(store_url, "POST", "/v1/traces", body=good, headers={"Content-Type": "text/plain"}).status == 415
    )
    assert http(store_url, "POST", "/v1/metrics", body=b"").status == 501
