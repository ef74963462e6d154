#!/usr/bin/env python3
"""Exports spans with the real OpenTelemetry SDK to lightning-store over OTLP/gRPC.

It does what an agent-lightning runner does with an OTLP-capable store: the
tracer provider's resource carries `agentlightning.rollout_id` and
`agentlightning.attempt_id`, and the SDK's OTLP/gRPC exporter sends the spans
to the store's own port. The spans are then read back through the store API
(with the generated stubs of the `lightning-store` package) and every field compared.

Usage: python otel_export.py [ADDRESS]   (default $LIGHTNING_STORE_SERVER, then 127.0.0.1:4747)
With `LIGHTNING_STORE_TOKEN` set, the store calls and the exporter send it
(`authorization: Bearer ...`; the exporter would also take it from the standard
`OTEL_EXPORTER_OTLP_HEADERS`); with `LIGHTNING_STORE_CA_CERT` (a PEM file)
both speak TLS to a server with that CA.
Exit status 0 when every check passed; the last line is `N passed, M failed`.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

from runner import DEFAULT_ADDRESS, RPC_TIMEOUT, CheckFailed, Checks

BIG_INT = 2**53 + 1


def run(address: str, checks: Checks) -> None:
    import grpc
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode

    from lightning_store.proto import store_pb2 as pb
    from lightning_store.proto import store_pb2_grpc
    from lightning_store.proto import types_pb2 as types

    token = os.environ.get("LIGHTNING_STORE_TOKEN")
    md = (("authorization", f"Bearer {token}"),) if token else ()
    ca_file = os.environ.get("LIGHTNING_STORE_CA_CERT")
    tls = None
    if ca_file:
        with open(ca_file, "rb") as f:
            tls = grpc.ssl_channel_credentials(f.read())
    channel = grpc.secure_channel(address, tls) if tls else grpc.insecure_channel(address)
    store = store_pb2_grpc.LightningStoreServiceStub(channel)
    t = RPC_TIMEOUT

    # The algorithm's side: a rollout, claimed by a runner.
    store.EnqueueRollout(pb.EnqueueRolloutRequest(rollout=pb.RolloutSpec(input_json="{}")), timeout=t, metadata=md)
    claimed = store.DequeueRollout(pb.DequeueRolloutRequest(worker_id="Worker-otel"), timeout=t, metadata=md).rollout
    rollout_id, attempt_id = claimed.rollout_id, claimed.attempt.attempt_id
    checks.that("a rollout was claimed", bool(rollout_id), claimed)

    # The runner's side: the SDK exports to the store with agent-lightning's resource attributes.
    resource = Resource.create(
        {
            "service.name": "agent-runner",
            "agentlightning.rollout_id": rollout_id,
            "agentlightning.attempt_id": attempt_id,
        }
    )
    provider = TracerProvider(resource=resource)
    exporter = OTLPSpanExporter(endpoint=address, insecure=tls is None, credentials=tls, headers=md or None)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agentlightning.test", "0.3.0")
    with tracer.start_as_current_span("agent.rollout", kind=SpanKind.SERVER) as root:
        root.set_attribute("agentlightning.reward.0.name", "primary")
        root.set_attribute("agentlightning.reward.0.value", 0.75)
        with tracer.start_as_current_span(
            "openai.chat.completion",
            kind=SpanKind.CLIENT,
            links=[Link(root.get_span_context(), {"link.kind": "root"})],
        ) as llm:
            llm.set_attribute("gen_ai.usage.total_tokens", BIG_INT)
            llm.set_attribute("gen_ai.request.model", "Qwen/Qwen2.5-0.5B-Instruct")
            llm.set_attribute("prompt_token_ids", [1, 2, 3])
            llm.set_attribute("stream", False)
            llm.add_event("first_token", {"latency.ms": 12.5})
            llm.set_status(Status(StatusCode.ERROR, "rate limited"))
            llm_context = llm.get_span_context()
            llm_parent = root.get_span_context()
        root_context = root.get_span_context()
    provider.force_flush()
    provider.shutdown()

    spans = store.QuerySpans(pb.QuerySpansRequest(rollout_id=rollout_id), timeout=t, metadata=md).spans
    checks.equal("both spans stored", sorted(s.name for s in spans), ["agent.rollout", "openai.chat.completion"])
    by_name = {s.name: s for s in spans}
    llm_span, root_span = by_name["openai.chat.completion"], by_name["agent.rollout"]
    checks.equal("sequence ids allocated in export order", [s.sequence_id for s in spans], [1, 2])
    checks.equal("llm span attempt", llm_span.attempt_id, attempt_id)
    checks.equal("llm trace id", llm_span.trace_id, format(llm_context.trace_id, "032x"))
    checks.equal("llm span id", llm_span.span_id, format(llm_context.span_id, "016x"))
    checks.equal("llm parent id", llm_span.parent_id, format(llm_parent.span_id, "016x"))
    checks.that("root has no parent", not root_span.HasField("parent_id"))
    checks.equal("root span id", root_span.span_id, format(root_context.span_id, "016x"))
    checks.equal("llm kind", types.SpanKind.Name(llm_span.kind), "SPAN_KIND_CLIENT")
    checks.equal("root kind", types.SpanKind.Name(root_span.kind), "SPAN_KIND_SERVER")
    checks.equal("llm status", types.SpanStatusCode.Name(llm_span.status.code), "SPAN_STATUS_CODE_ERROR")
    checks.equal("llm status description", llm_span.status.description, "rate limited")

    def attrs(kvs):
        out = {}
        for kv in kvs:
            which = kv.value.WhichOneof("value")
            if which == "array_value":
                out[kv.key] = [getattr(v, v.WhichOneof("value")) for v in kv.value.array_value.values]
            else:
                out[kv.key] = getattr(kv.value, which)
        return out

    checks.equal(
        "llm attributes, typed",
        attrs(llm_span.attributes),
        {
            "gen_ai.usage.total_tokens": BIG_INT,
            "gen_ai.request.model": "Qwen/Qwen2.5-0.5B-Instruct",
            "prompt_token_ids": [1, 2, 3],
            "stream": False,
        },
    )
    checks.equal(
        "root attributes",
        attrs(root_span.attributes),
        {"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": 0.75},
    )
    checks.equal("llm event", (llm_span.events[0].name, attrs(llm_span.events[0].attributes)), ("first_token", {"latency.ms": 12.5}))
    checks.equal("llm link", (llm_span.links[0].context.span_id, attrs(llm_span.links[0].attributes)), (format(root_context.span_id, "016x"), {"link.kind": "root"}))
    checks.that("times kept", llm_span.end_time.ToNanoseconds() >= llm_span.start_time.ToNanoseconds() > 0, llm_span)
    resource_attrs = attrs(llm_span.resource.attributes)
    checks.equal("resource routing attributes", (resource_attrs["agentlightning.rollout_id"], resource_attrs["agentlightning.attempt_id"]), (rollout_id, attempt_id))
    checks.equal("resource service.name", resource_attrs["service.name"], "agent-runner")
    checks.equal("scope", (llm_span.scope.name, llm_span.scope.version), ("agentlightning.test", "0.3.0"))

    rollout = store.GetRollout(pb.GetRolloutRequest(rollout_id=rollout_id), timeout=t, metadata=md).rollout
    checks.equal("spans are heartbeats: the rollout runs", types.RolloutStatus.Name(rollout.status), "ROLLOUT_STATUS_RUNNING")


def main(argv: list[str]) -> int:
    address = argv[1] if len(argv) > 1 else os.environ.get("LIGHTNING_STORE_SERVER", DEFAULT_ADDRESS)
    checks = Checks()
    failed = 0
    try:
        run(address, checks)
    except (CheckFailed, Exception):  # noqa: BLE001 - report every failure the same way
        traceback.print_exc()
        failed = 1
    print(f"{checks.passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
