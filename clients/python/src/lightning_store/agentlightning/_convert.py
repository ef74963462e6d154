"""Conversions between agent-lightning's pydantic models and lightning-store's messages."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, get_args

from agentlightning.types import (
    Attempt,
    AttemptedRollout,
    Event,
    Link,
    OtelResource,
    ResourcesUpdate,
    Rollout,
    RolloutConfig,
    Span,
    SpanContext,
    StatusCode,
    TraceStatus,
    Worker,
)
from opentelemetry.sdk.trace import ReadableSpan
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from lightning_store.proto import types_pb2 as types
from lightning_store.values import (
    ATTEMPT_STATUS,
    ROLLOUT_MODE,
    ROLLOUT_STATUS,
    SPAN_KIND,
    WORKER_STATUS,
    SpanKindName,
    from_attributes,
    from_json,
    from_timestamp,
    optional_time,
    to_attribute_value,
    to_attributes,
    to_timestamp,
)

_STATUS_CODES: dict[str, str] = {
    "UNSET": "SPAN_STATUS_CODE_UNSPECIFIED",
    "OK": "SPAN_STATUS_CODE_OK",
    "ERROR": "SPAN_STATUS_CODE_ERROR",
}
_STATUS_NAMES: dict[int, StatusCode] = {
    types.SPAN_STATUS_CODE_UNSPECIFIED: "UNSET",
    types.SPAN_STATUS_CODE_OK: "OK",
    types.SPAN_STATUS_CODE_ERROR: "ERROR",
}
# Span.from_opentelemetry keeps the span kind as the extra field `kind`, the enum's str() (`SpanKind.CLIENT`).
_KINDS: dict[str, str] = {f"SpanKind.{name.upper()}": SPAN_KIND.value(name) for name in get_args(SpanKindName)}


def jsonable(value: Any) -> Any:
    """Returns `value` with pydantic models, dataclasses and dates turned into JSON values."""
    return to_jsonable_python(value)


def config_to_proto(config: RolloutConfig | None) -> types.RolloutConfig | None:
    """Returns a rollout configuration message (None: the server's defaults)."""
    if config is None:
        return None
    return types.RolloutConfig(
        timeout_seconds=config.timeout_seconds,
        unresponsive_seconds=config.unresponsive_seconds,
        max_attempts=config.max_attempts,
        retry_condition=[ATTEMPT_STATUS.value(s) for s in config.retry_condition],
    )


def config_from_proto(config: types.RolloutConfig) -> RolloutConfig:
    """Returns agent-lightning's rollout configuration."""
    return RolloutConfig(
        timeout_seconds=config.timeout_seconds if config.HasField("timeout_seconds") else None,
        unresponsive_seconds=config.unresponsive_seconds if config.HasField("unresponsive_seconds") else None,
        max_attempts=config.max_attempts,
        retry_condition=[ATTEMPT_STATUS.require(s) for s in config.retry_condition],
    )


def attempt_from_proto(attempt: types.Attempt) -> Attempt:
    """Returns agent-lightning's attempt."""
    return Attempt(
        rollout_id=attempt.rollout_id,
        attempt_id=attempt.attempt_id,
        sequence_id=attempt.sequence_id,
        start_time=from_timestamp(attempt.start_time),
        end_time=optional_time(attempt, "end_time"),
        status=ATTEMPT_STATUS.require(attempt.status),
        worker_id=attempt.worker_id if attempt.HasField("worker_id") else None,
        last_heartbeat_time=optional_time(attempt, "last_heartbeat_time"),
        metadata=from_json(attempt.metadata_json),
    )


def rollout_from_proto(rollout: types.Rollout, *, with_attempt: bool = True) -> Rollout:
    """Returns agent-lightning's rollout: an `AttemptedRollout` when it carries its latest attempt."""
    fields: dict[str, Any] = {
        "rollout_id": rollout.rollout_id,
        "input": from_json(rollout.input_json),
        "start_time": from_timestamp(rollout.start_time),
        "end_time": optional_time(rollout, "end_time"),
        "mode": ROLLOUT_MODE.name(rollout.mode),
        "resources_id": rollout.resources_id if rollout.HasField("resources_id") else None,
        "status": ROLLOUT_STATUS.require(rollout.status),
        "config": config_from_proto(rollout.config),
        "metadata": from_json(rollout.metadata_json),
    }
    if with_attempt and rollout.HasField("attempt"):
        return AttemptedRollout(**fields, attempt=attempt_from_proto(rollout.attempt))
    return Rollout(**fields)


def attempted_from_proto(rollout: types.Rollout) -> AttemptedRollout:
    """Returns a rollout that the server answered with its new attempt."""
    converted = rollout_from_proto(rollout)
    if not isinstance(converted, AttemptedRollout):
        raise TypeError(f"the server answered rollout {rollout.rollout_id} without its attempt")
    return converted


def resources_from_proto(update: types.ResourcesUpdate) -> ResourcesUpdate:
    """Returns agent-lightning's resources snapshot."""
    return ResourcesUpdate(
        resources_id=update.resources_id,
        create_time=from_timestamp(update.create_time),
        update_time=from_timestamp(update.update_time),
        version=update.version,
        resources=from_json(update.resources_json),
    )


def worker_from_proto(worker: types.Worker) -> Worker:
    """Returns agent-lightning's worker; `lost` (a dropped session, unknown upstream) reads as `unknown`."""
    status = WORKER_STATUS.require(worker.status)
    return Worker(
        worker_id=worker.worker_id,
        status="unknown" if status == "lost" else status,
        heartbeat_stats=from_json(worker.heartbeat_stats_json),
        last_heartbeat_time=optional_time(worker, "last_heartbeat_time"),
        last_dequeue_time=optional_time(worker, "last_dequeue_time"),
        last_busy_time=optional_time(worker, "last_busy_time"),
        last_idle_time=optional_time(worker, "last_idle_time"),
        current_rollout_id=worker.current_rollout_id if worker.HasField("current_rollout_id") else None,
        current_attempt_id=worker.current_attempt_id if worker.HasField("current_attempt_id") else None,
    )


def _extra_json(model: BaseModel) -> str:
    """Returns the fields a model keeps beyond its own (`extra="allow"`) as JSON text; empty for none."""
    extra = model.model_extra
    return json.dumps(jsonable(extra), separators=(",", ":")) if extra else ""


def _extra(message: Any) -> dict[str, Any]:
    """Returns the extra fields a message carries in `extra_json`, in order."""
    return dict(json.loads(message.extra_json)) if message.extra_json else {}


def _context_to_proto(context: SpanContext | None) -> types.SpanContext | None:
    if context is None:
        return None
    return types.SpanContext(
        trace_id=context.trace_id,
        span_id=context.span_id,
        is_remote=context.is_remote,
        trace_state_entries=[types.TraceStateEntry(key=k, value=v) for k, v in context.trace_state.items()],
        extra_json=_extra_json(context),
    )


def _context_from_proto(context: types.SpanContext) -> SpanContext:
    return SpanContext(
        trace_id=context.trace_id,
        span_id=context.span_id,
        is_remote=context.is_remote,
        trace_state={entry.key: entry.value for entry in context.trace_state_entries},
        **_extra(context),
    )


def _optional_seconds(seconds: float | None) -> Any:
    return to_timestamp(seconds) if seconds is not None else None


def span_to_proto(span: Span, *, allocate: bool = False) -> types.Span:
    """Returns the span as a message; `allocate` leaves the sequence id for the server to allocate."""
    kind = (span.model_extra or {}).get("kind")
    return types.Span(
        rollout_id=span.rollout_id,
        attempt_id=span.attempt_id,
        sequence_id=None if allocate else span.sequence_id,
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_id=span.parent_id,
        name=span.name,
        status=types.SpanStatus(
            code=_STATUS_CODES.get(span.status.status_code, "SPAN_STATUS_CODE_UNSPECIFIED"),
            description=span.status.description,
            extra_json=_extra_json(span.status),
        ),
        attributes=to_attributes(span.attributes),
        events=[
            types.SpanEvent(
                name=event.name,
                attributes=to_attributes(event.attributes),
                time=_optional_seconds(event.timestamp),
                extra_json=_extra_json(event),
            )
            for event in span.events
        ],
        links=[
            types.SpanLink(
                context=_context_to_proto(link.context),
                attributes=to_attributes(link.attributes or {}),
                has_attributes=link.attributes is not None,
                extra_json=_extra_json(link),
            )
            for link in span.links
        ],
        start_time=_optional_seconds(span.start_time),
        end_time=_optional_seconds(span.end_time),
        context=_context_to_proto(span.context),
        parent=_context_to_proto(span.parent),
        resource=types.SpanResource(
            attributes=to_attributes(span.resource.attributes), schema_url=span.resource.schema_url
        ),
        kind=_KINDS.get(kind) if isinstance(kind, str) else None,
        extra_json=_extra_json(span),
    )


def scope_to_proto(readable: ReadableSpan) -> types.InstrumentationScope | None:
    """Returns the instrumentation scope of an OpenTelemetry span, or None when it has none we can keep.

    agent-lightning's model drops the scope, so upstream stores any span whatever
    its scope (test doubles built with `unittest.mock.Mock` included). We keep
    the scope of a span that has one as the SDK makes it: a text name, text or
    no version, and attributes of attribute values; a scope without a text
    name is left out, and so are a version or attribute values of another type,
    rather than refusing the span.
    """
    scope = getattr(readable, "instrumentation_scope", None)
    name = getattr(scope, "name", None)
    if not isinstance(name, str):
        return None
    version = getattr(scope, "version", None)
    attributes = getattr(scope, "attributes", None)
    return types.InstrumentationScope(
        name=name,
        version=version if isinstance(version, str) else "",
        attributes=_convertible_attributes(attributes) if isinstance(attributes, Mapping) else [],
    )


def _convertible_attributes(attributes: Mapping[Any, Any]) -> list[types.KeyValue]:
    """Returns the attributes with text keys whose values convert; the others are left out."""
    kept = []
    for key, value in attributes.items():
        if not isinstance(key, str):
            continue
        try:
            kept.append(types.KeyValue(key=key, value=to_attribute_value(value)))
        except TypeError:
            continue
    return kept


def span_from_proto(span: types.Span) -> Span:
    """Returns agent-lightning's span, its extra fields included.

    A span the server received over OTLP has a kind but no extra fields: it
    gets the `kind` extra field that `Span.from_opentelemetry` would have given it.
    """
    extra = _extra(span)
    kind = SPAN_KIND.name(span.kind)
    if kind is not None and "kind" not in extra:
        extra["kind"] = f"SpanKind.{kind.upper()}"
    return Span(
        rollout_id=span.rollout_id,
        attempt_id=span.attempt_id,
        sequence_id=span.sequence_id,
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_id=span.parent_id if span.HasField("parent_id") else None,
        name=span.name,
        status=TraceStatus(
            status_code=_STATUS_NAMES.get(span.status.code, "UNSET"),
            description=span.status.description if span.status.HasField("description") else None,
            **_extra(span.status),
        ),
        attributes=from_attributes(span.attributes),
        events=[
            Event(
                name=e.name, attributes=from_attributes(e.attributes), timestamp=optional_time(e, "time"), **_extra(e)
            )
            for e in span.events
        ],
        links=[
            Link(
                context=_context_from_proto(link.context),
                attributes=from_attributes(link.attributes) if link.has_attributes else None,
                **_extra(link),
            )
            for link in span.links
        ],
        start_time=optional_time(span, "start_time"),
        end_time=optional_time(span, "end_time"),
        context=_context_from_proto(span.context) if span.HasField("context") else None,
        parent=_context_from_proto(span.parent) if span.HasField("parent") else None,
        resource=OtelResource(
            attributes=from_attributes(span.resource.attributes), schema_url=span.resource.schema_url
        ),
        **extra,
    )


def named_resources_json(resources: Mapping[str, Any]) -> dict[str, Any]:
    """Returns named resources (pydantic models or dicts) as JSON values."""
    return dict(jsonable(dict(resources)))
