"""Conversions between Python values and the wire types of lightning-store.

Payloads (rollout input, metadata, heartbeat statistics, resources) travel as
JSON text; timestamps as `google.protobuf.Timestamp`; span attributes as typed
`KeyValue` lists that keep 64-bit integers exact; statuses as enums whose
names this module maps to agent-lightning's lowercase vocabulary
(`ROLLOUT_STATUS_SUCCEEDED` <-> `"succeeded"`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Generic, Literal, TypeVar, cast

from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper
from google.protobuf.timestamp_pb2 import Timestamp

from lightning_store.proto import store_pb2 as store
from lightning_store.proto import types_pb2 as types

RolloutStatusName = Literal["queuing", "preparing", "running", "failed", "succeeded", "cancelled", "requeuing"]
"""A rollout status in agent-lightning's words."""
AttemptStatusName = Literal["preparing", "running", "failed", "succeeded", "unresponsive", "timeout"]
"""An attempt status in agent-lightning's words."""
WorkerStatusName = Literal["idle", "busy", "unknown", "lost"]
"""A worker status in agent-lightning's words (`lost`: its session dropped)."""
RolloutModeName = Literal["train", "val", "test"]
"""A rollout's split."""
EventKindName = Literal[
    "rollout_created",
    "rollout_changed",
    "attempt_created",
    "attempt_changed",
    "spans_added",
    "resources_changed",
    "worker_changed",
]
"""What a store event describes."""
SortOrderName = Literal["asc", "desc"]
"""The direction of a sort."""
FilterLogicName = Literal["and", "or"]
"""How the conditions of a query combine."""
TimelineResolutionName = Literal["minute", "hour"]
"""The length of a reward timeline's periods."""
NoTrainingRowsReasonName = Literal[
    "no_model_calls",
    "failed_calls",
    "no_token_ids",
    "no_reward",
    "reward_not_a_number",
    "rollout_failed",
]
"""Why an agent-lightning 1.x rollout gave its trainer no training row."""


class Unset:
    """The type of `UNSET`: "leave this field unchanged", distinct from `None` ("write null")."""

    __slots__ = ()
    _instance: Unset | None = None

    def __new__(cls) -> Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __reduce__(self) -> tuple[type[Unset], tuple[()]]:
        return (Unset, ())


UNSET: Final = Unset()
"""Marks an update argument as not given."""


N = TypeVar("N", bound=str)


class EnumNames(Generic[N]):
    """Maps one protobuf enum to lowercase names without its prefix, and back."""

    def __init__(self, enum: EnumTypeWrapper, prefix: str) -> None:
        self._by_number: dict[int, N] = {
            number: cast(N, name.removeprefix(prefix).lower())
            for name, number in enum.items()
            if not name.endswith("_UNSPECIFIED")
        }
        self._prefix = prefix
        self._what = prefix.rstrip("_").lower().replace("_", " ")

    def value(self, name: N) -> str:
        """Returns the protobuf name of `name`: `succeeded` -> `ROLLOUT_STATUS_SUCCEEDED`.

        Message constructors accept the protobuf name; an unknown `name` raises ValueError.
        """
        if name not in self._by_number.values():
            allowed = ", ".join(self._by_number.values())
            raise ValueError(f"unknown {self._what} {name!r}, expected one of: {allowed}")
        return self._prefix + name.upper()

    def name(self, number: int) -> N | None:
        """Returns the lowercase name of an enum number, or None for UNSPECIFIED and unknown numbers."""
        return self._by_number.get(number)

    def require(self, number: int) -> N:
        """Returns the lowercase name of an enum number the server always sets; ValueError otherwise."""
        name = self._by_number.get(number)
        if name is None:
            raise ValueError(f"the server sent no {self._what} (enum number {number})")
        return name


SpanKindName = Literal["internal", "server", "client", "producer", "consumer"]
"""An OpenTelemetry span kind."""

ROLLOUT_STATUS: Final = EnumNames[RolloutStatusName](types.RolloutStatus, "ROLLOUT_STATUS_")
ATTEMPT_STATUS: Final = EnumNames[AttemptStatusName](types.AttemptStatus, "ATTEMPT_STATUS_")
WORKER_STATUS: Final = EnumNames[WorkerStatusName](types.WorkerStatus, "WORKER_STATUS_")
ROLLOUT_MODE: Final = EnumNames[RolloutModeName](types.RolloutMode, "ROLLOUT_MODE_")
EVENT_KIND: Final = EnumNames[EventKindName](types.EventKind, "EVENT_KIND_")
SPAN_KIND: Final = EnumNames[SpanKindName](types.SpanKind, "SPAN_KIND_")
TIMELINE_RESOLUTION: Final = EnumNames[TimelineResolutionName](store.TimelineResolution, "TIMELINE_RESOLUTION_")
NO_TRAINING_ROWS_REASON: Final = EnumNames[NoTrainingRowsReasonName](
    store.NoTrainingRowsReason, "NO_TRAINING_ROWS_REASON_"
)


def to_json(value: Any) -> str:
    """Returns `value` as compact JSON text (UTF-8 kept as is)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def from_json(text: str) -> Any:
    """Returns the value of JSON text; the empty string is `None`."""
    return json.loads(text) if text else None


def to_timestamp(seconds: float) -> Timestamp:
    """Returns a timestamp for seconds since the Unix epoch."""
    whole = math.floor(seconds)
    return Timestamp(seconds=whole, nanos=round((seconds - whole) * 1e9) % 1_000_000_000)


def from_timestamp(timestamp: Timestamp) -> float:
    """Returns seconds since the Unix epoch."""
    return timestamp.seconds + timestamp.nanos / 1e9


def optional_time(message: Any, field: str) -> float | None:
    """Returns the timestamp field `field` of `message` in seconds, or None when absent."""
    return from_timestamp(getattr(message, field)) if message.HasField(field) else None


def to_attribute_value(value: Any) -> types.AttributeValue:
    """Returns the typed form of an attribute value; `None` is the empty value."""
    if value is None:
        return types.AttributeValue()
    if isinstance(value, bool):  # before int: bool is an int in Python
        return types.AttributeValue(bool_value=value)
    if isinstance(value, int):
        return types.AttributeValue(int_value=value)
    if isinstance(value, float):
        return types.AttributeValue(double_value=value)
    if isinstance(value, str):
        return types.AttributeValue(string_value=value)
    if isinstance(value, (bytes, bytearray)):
        return types.AttributeValue(bytes_value=bytes(value))
    if isinstance(value, Mapping):
        return types.AttributeValue(kvlist_value=types.KeyValueList(values=to_attributes(value)))
    if isinstance(value, Iterable):
        return types.AttributeValue(array_value=types.ArrayValue(values=[to_attribute_value(v) for v in value]))
    raise TypeError(f"unsupported attribute value of type {type(value).__name__}: {value!r}")


def to_attributes(attributes: Mapping[str, Any]) -> list[types.KeyValue]:
    """Returns attributes as typed key/value pairs, in order."""
    return [types.KeyValue(key=key, value=to_attribute_value(value)) for key, value in attributes.items()]


def from_attribute_value(value: types.AttributeValue) -> Any:
    """Returns the Python value of a typed attribute value (lists for arrays, dicts for key/value lists)."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [from_attribute_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return from_attributes(value.kvlist_value.values)
    return getattr(value, which)


def from_attributes(attributes: Sequence[types.KeyValue]) -> dict[str, Any]:
    """Returns typed key/value pairs as a dict."""
    return {kv.key: from_attribute_value(kv.value) for kv in attributes}


def rollout_config(
    *,
    timeout_seconds: float | None = None,
    unresponsive_seconds: float | None = None,
    max_attempts: int = 1,
    retry_condition: Iterable[AttemptStatusName] = (),
) -> types.RolloutConfig:
    """Returns a rollout configuration: per-attempt limits and the retry policy."""
    return types.RolloutConfig(
        timeout_seconds=timeout_seconds,
        unresponsive_seconds=unresponsive_seconds,
        max_attempts=max_attempts,
        retry_condition=[ATTEMPT_STATUS.value(s) for s in retry_condition],
    )
