import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RolloutStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLLOUT_STATUS_UNSPECIFIED: _ClassVar[RolloutStatus]
    ROLLOUT_STATUS_QUEUING: _ClassVar[RolloutStatus]
    ROLLOUT_STATUS_PREPARING: _ClassVar[RolloutStatus]
    ROLLOUT_STATUS_RUNNING: _ClassVar[RolloutStatus]
    ROLLOUT_STATUS_FAILED: _ClassVar[RolloutStatus]
    ROLLOUT_STATUS_SUCCEEDED: _ClassVar[RolloutStatus]
    ROLLOUT_STATUS_CANCELLED: _ClassVar[RolloutStatus]
    ROLLOUT_STATUS_REQUEUING: _ClassVar[RolloutStatus]

class AttemptStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ATTEMPT_STATUS_UNSPECIFIED: _ClassVar[AttemptStatus]
    ATTEMPT_STATUS_PREPARING: _ClassVar[AttemptStatus]
    ATTEMPT_STATUS_RUNNING: _ClassVar[AttemptStatus]
    ATTEMPT_STATUS_FAILED: _ClassVar[AttemptStatus]
    ATTEMPT_STATUS_SUCCEEDED: _ClassVar[AttemptStatus]
    ATTEMPT_STATUS_UNRESPONSIVE: _ClassVar[AttemptStatus]
    ATTEMPT_STATUS_TIMEOUT: _ClassVar[AttemptStatus]

class WorkerStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WORKER_STATUS_UNSPECIFIED: _ClassVar[WorkerStatus]
    WORKER_STATUS_IDLE: _ClassVar[WorkerStatus]
    WORKER_STATUS_BUSY: _ClassVar[WorkerStatus]
    WORKER_STATUS_UNKNOWN: _ClassVar[WorkerStatus]
    WORKER_STATUS_LOST: _ClassVar[WorkerStatus]

class RolloutMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLLOUT_MODE_UNSPECIFIED: _ClassVar[RolloutMode]
    ROLLOUT_MODE_TRAIN: _ClassVar[RolloutMode]
    ROLLOUT_MODE_VAL: _ClassVar[RolloutMode]
    ROLLOUT_MODE_TEST: _ClassVar[RolloutMode]

class SpanStatusCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SPAN_STATUS_CODE_UNSPECIFIED: _ClassVar[SpanStatusCode]
    SPAN_STATUS_CODE_OK: _ClassVar[SpanStatusCode]
    SPAN_STATUS_CODE_ERROR: _ClassVar[SpanStatusCode]

class SpanKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SPAN_KIND_UNSPECIFIED: _ClassVar[SpanKind]
    SPAN_KIND_INTERNAL: _ClassVar[SpanKind]
    SPAN_KIND_SERVER: _ClassVar[SpanKind]
    SPAN_KIND_CLIENT: _ClassVar[SpanKind]
    SPAN_KIND_PRODUCER: _ClassVar[SpanKind]
    SPAN_KIND_CONSUMER: _ClassVar[SpanKind]

class EventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVENT_KIND_UNSPECIFIED: _ClassVar[EventKind]
    EVENT_KIND_ROLLOUT_CREATED: _ClassVar[EventKind]
    EVENT_KIND_ROLLOUT_CHANGED: _ClassVar[EventKind]
    EVENT_KIND_ATTEMPT_CREATED: _ClassVar[EventKind]
    EVENT_KIND_ATTEMPT_CHANGED: _ClassVar[EventKind]
    EVENT_KIND_SPANS_ADDED: _ClassVar[EventKind]
    EVENT_KIND_RESOURCES_CHANGED: _ClassVar[EventKind]
    EVENT_KIND_WORKER_CHANGED: _ClassVar[EventKind]
    EVENT_KIND_ROLLOUT_DELETED: _ClassVar[EventKind]
    EVENT_KIND_GATEWAY_CHANGED: _ClassVar[EventKind]
    EVENT_KIND_MODELS_CHANGED: _ClassVar[EventKind]
ROLLOUT_STATUS_UNSPECIFIED: RolloutStatus
ROLLOUT_STATUS_QUEUING: RolloutStatus
ROLLOUT_STATUS_PREPARING: RolloutStatus
ROLLOUT_STATUS_RUNNING: RolloutStatus
ROLLOUT_STATUS_FAILED: RolloutStatus
ROLLOUT_STATUS_SUCCEEDED: RolloutStatus
ROLLOUT_STATUS_CANCELLED: RolloutStatus
ROLLOUT_STATUS_REQUEUING: RolloutStatus
ATTEMPT_STATUS_UNSPECIFIED: AttemptStatus
ATTEMPT_STATUS_PREPARING: AttemptStatus
ATTEMPT_STATUS_RUNNING: AttemptStatus
ATTEMPT_STATUS_FAILED: AttemptStatus
ATTEMPT_STATUS_SUCCEEDED: AttemptStatus
ATTEMPT_STATUS_UNRESPONSIVE: AttemptStatus
ATTEMPT_STATUS_TIMEOUT: AttemptStatus
WORKER_STATUS_UNSPECIFIED: WorkerStatus
WORKER_STATUS_IDLE: WorkerStatus
WORKER_STATUS_BUSY: WorkerStatus
WORKER_STATUS_UNKNOWN: WorkerStatus
WORKER_STATUS_LOST: WorkerStatus
ROLLOUT_MODE_UNSPECIFIED: RolloutMode
ROLLOUT_MODE_TRAIN: RolloutMode
ROLLOUT_MODE_VAL: RolloutMode
ROLLOUT_MODE_TEST: RolloutMode
SPAN_STATUS_CODE_UNSPECIFIED: SpanStatusCode
SPAN_STATUS_CODE_OK: SpanStatusCode
SPAN_STATUS_CODE_ERROR: SpanStatusCode
SPAN_KIND_UNSPECIFIED: SpanKind
SPAN_KIND_INTERNAL: SpanKind
SPAN_KIND_SERVER: SpanKind
SPAN_KIND_CLIENT: SpanKind
SPAN_KIND_PRODUCER: SpanKind
SPAN_KIND_CONSUMER: SpanKind
EVENT_KIND_UNSPECIFIED: EventKind
EVENT_KIND_ROLLOUT_CREATED: EventKind
EVENT_KIND_ROLLOUT_CHANGED: EventKind
EVENT_KIND_ATTEMPT_CREATED: EventKind
EVENT_KIND_ATTEMPT_CHANGED: EventKind
EVENT_KIND_SPANS_ADDED: EventKind
EVENT_KIND_RESOURCES_CHANGED: EventKind
EVENT_KIND_WORKER_CHANGED: EventKind
EVENT_KIND_ROLLOUT_DELETED: EventKind
EVENT_KIND_GATEWAY_CHANGED: EventKind
EVENT_KIND_MODELS_CHANGED: EventKind

class RolloutConfig(_message.Message):
    __slots__ = ("timeout_seconds", "unresponsive_seconds", "max_attempts", "retry_condition")
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    UNRESPONSIVE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    RETRY_CONDITION_FIELD_NUMBER: _ClassVar[int]
    timeout_seconds: float
    unresponsive_seconds: float
    max_attempts: int
    retry_condition: _containers.RepeatedScalarFieldContainer[AttemptStatus]
    def __init__(self, timeout_seconds: _Optional[float] = ..., unresponsive_seconds: _Optional[float] = ..., max_attempts: _Optional[int] = ..., retry_condition: _Optional[_Iterable[_Union[AttemptStatus, str]]] = ...) -> None: ...

class Rollout(_message.Message):
    __slots__ = ("rollout_id", "input_json", "start_time", "end_time", "mode", "resources_id", "status", "config", "metadata_json", "attempt")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    input_json: str
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    mode: RolloutMode
    resources_id: str
    status: RolloutStatus
    config: RolloutConfig
    metadata_json: str
    attempt: Attempt
    def __init__(self, rollout_id: _Optional[str] = ..., input_json: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., mode: _Optional[_Union[RolloutMode, str]] = ..., resources_id: _Optional[str] = ..., status: _Optional[_Union[RolloutStatus, str]] = ..., config: _Optional[_Union[RolloutConfig, _Mapping]] = ..., metadata_json: _Optional[str] = ..., attempt: _Optional[_Union[Attempt, _Mapping]] = ...) -> None: ...

class Attempt(_message.Message):
    __slots__ = ("rollout_id", "attempt_id", "sequence_id", "start_time", "end_time", "status", "worker_id", "last_heartbeat_time", "metadata_json")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_TIME_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    attempt_id: str
    sequence_id: int
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    status: AttemptStatus
    worker_id: str
    last_heartbeat_time: _timestamp_pb2.Timestamp
    metadata_json: str
    def __init__(self, rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ..., sequence_id: _Optional[int] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., status: _Optional[_Union[AttemptStatus, str]] = ..., worker_id: _Optional[str] = ..., last_heartbeat_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., metadata_json: _Optional[str] = ...) -> None: ...

class Worker(_message.Message):
    __slots__ = ("worker_id", "status", "heartbeat_stats_json", "last_heartbeat_time", "last_dequeue_time", "last_busy_time", "last_idle_time", "current_rollout_id", "current_attempt_id")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_STATS_JSON_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_DEQUEUE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_BUSY_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_IDLE_TIME_FIELD_NUMBER: _ClassVar[int]
    CURRENT_ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    CURRENT_ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    status: WorkerStatus
    heartbeat_stats_json: str
    last_heartbeat_time: _timestamp_pb2.Timestamp
    last_dequeue_time: _timestamp_pb2.Timestamp
    last_busy_time: _timestamp_pb2.Timestamp
    last_idle_time: _timestamp_pb2.Timestamp
    current_rollout_id: str
    current_attempt_id: str
    def __init__(self, worker_id: _Optional[str] = ..., status: _Optional[_Union[WorkerStatus, str]] = ..., heartbeat_stats_json: _Optional[str] = ..., last_heartbeat_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_dequeue_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_busy_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_idle_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., current_rollout_id: _Optional[str] = ..., current_attempt_id: _Optional[str] = ...) -> None: ...

class ResourcesUpdate(_message.Message):
    __slots__ = ("resources_id", "create_time", "update_time", "version", "resources_json")
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_JSON_FIELD_NUMBER: _ClassVar[int]
    resources_id: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    version: int
    resources_json: str
    def __init__(self, resources_id: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., version: _Optional[int] = ..., resources_json: _Optional[str] = ...) -> None: ...

class AttributeValue(_message.Message):
    __slots__ = ("string_value", "bool_value", "int_value", "double_value", "bytes_value", "array_value", "kvlist_value")
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT_VALUE_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_VALUE_FIELD_NUMBER: _ClassVar[int]
    BYTES_VALUE_FIELD_NUMBER: _ClassVar[int]
    ARRAY_VALUE_FIELD_NUMBER: _ClassVar[int]
    KVLIST_VALUE_FIELD_NUMBER: _ClassVar[int]
    string_value: str
    bool_value: bool
    int_value: int
    double_value: float
    bytes_value: bytes
    array_value: ArrayValue
    kvlist_value: KeyValueList
    def __init__(self, string_value: _Optional[str] = ..., bool_value: _Optional[bool] = ..., int_value: _Optional[int] = ..., double_value: _Optional[float] = ..., bytes_value: _Optional[bytes] = ..., array_value: _Optional[_Union[ArrayValue, _Mapping]] = ..., kvlist_value: _Optional[_Union[KeyValueList, _Mapping]] = ...) -> None: ...

class ArrayValue(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedCompositeFieldContainer[AttributeValue]
    def __init__(self, values: _Optional[_Iterable[_Union[AttributeValue, _Mapping]]] = ...) -> None: ...

class KeyValueList(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedCompositeFieldContainer[KeyValue]
    def __init__(self, values: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ...) -> None: ...

class KeyValue(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: AttributeValue
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[AttributeValue, _Mapping]] = ...) -> None: ...

class SpanStatus(_message.Message):
    __slots__ = ("code", "description", "extra_json")
    CODE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    EXTRA_JSON_FIELD_NUMBER: _ClassVar[int]
    code: SpanStatusCode
    description: str
    extra_json: str
    def __init__(self, code: _Optional[_Union[SpanStatusCode, str]] = ..., description: _Optional[str] = ..., extra_json: _Optional[str] = ...) -> None: ...

class TraceStateEntry(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class SpanContext(_message.Message):
    __slots__ = ("trace_id", "span_id", "is_remote", "trace_state", "trace_state_entries", "extra_json")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    IS_REMOTE_FIELD_NUMBER: _ClassVar[int]
    TRACE_STATE_FIELD_NUMBER: _ClassVar[int]
    TRACE_STATE_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    EXTRA_JSON_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    span_id: str
    is_remote: bool
    trace_state: str
    trace_state_entries: _containers.RepeatedCompositeFieldContainer[TraceStateEntry]
    extra_json: str
    def __init__(self, trace_id: _Optional[str] = ..., span_id: _Optional[str] = ..., is_remote: _Optional[bool] = ..., trace_state: _Optional[str] = ..., trace_state_entries: _Optional[_Iterable[_Union[TraceStateEntry, _Mapping]]] = ..., extra_json: _Optional[str] = ...) -> None: ...

class SpanEvent(_message.Message):
    __slots__ = ("name", "attributes", "time", "extra_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    EXTRA_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    attributes: _containers.RepeatedCompositeFieldContainer[KeyValue]
    time: _timestamp_pb2.Timestamp
    extra_json: str
    def __init__(self, name: _Optional[str] = ..., attributes: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., extra_json: _Optional[str] = ...) -> None: ...

class SpanLink(_message.Message):
    __slots__ = ("context", "attributes", "has_attributes", "extra_json")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    HAS_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    EXTRA_JSON_FIELD_NUMBER: _ClassVar[int]
    context: SpanContext
    attributes: _containers.RepeatedCompositeFieldContainer[KeyValue]
    has_attributes: bool
    extra_json: str
    def __init__(self, context: _Optional[_Union[SpanContext, _Mapping]] = ..., attributes: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., has_attributes: _Optional[bool] = ..., extra_json: _Optional[str] = ...) -> None: ...

class SpanResource(_message.Message):
    __slots__ = ("attributes", "schema_url")
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_URL_FIELD_NUMBER: _ClassVar[int]
    attributes: _containers.RepeatedCompositeFieldContainer[KeyValue]
    schema_url: str
    def __init__(self, attributes: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., schema_url: _Optional[str] = ...) -> None: ...

class InstrumentationScope(_message.Message):
    __slots__ = ("name", "version", "attributes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    attributes: _containers.RepeatedCompositeFieldContainer[KeyValue]
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., attributes: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ...) -> None: ...

class Span(_message.Message):
    __slots__ = ("rollout_id", "attempt_id", "sequence_id", "trace_id", "span_id", "parent_id", "name", "status", "attributes", "events", "links", "start_time", "end_time", "context", "parent", "resource", "kind", "scope", "extra_json")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    LINKS_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    EXTRA_JSON_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    attempt_id: str
    sequence_id: int
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    status: SpanStatus
    attributes: _containers.RepeatedCompositeFieldContainer[KeyValue]
    events: _containers.RepeatedCompositeFieldContainer[SpanEvent]
    links: _containers.RepeatedCompositeFieldContainer[SpanLink]
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    context: SpanContext
    parent: SpanContext
    resource: SpanResource
    kind: SpanKind
    scope: InstrumentationScope
    extra_json: str
    def __init__(self, rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ..., sequence_id: _Optional[int] = ..., trace_id: _Optional[str] = ..., span_id: _Optional[str] = ..., parent_id: _Optional[str] = ..., name: _Optional[str] = ..., status: _Optional[_Union[SpanStatus, _Mapping]] = ..., attributes: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., events: _Optional[_Iterable[_Union[SpanEvent, _Mapping]]] = ..., links: _Optional[_Iterable[_Union[SpanLink, _Mapping]]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., context: _Optional[_Union[SpanContext, _Mapping]] = ..., parent: _Optional[_Union[SpanContext, _Mapping]] = ..., resource: _Optional[_Union[SpanResource, _Mapping]] = ..., kind: _Optional[_Union[SpanKind, str]] = ..., scope: _Optional[_Union[InstrumentationScope, _Mapping]] = ..., extra_json: _Optional[str] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("seq", "time", "kind", "rollout_id", "attempt_id", "worker_id", "resources_id", "rollout_status", "attempt_status", "worker_status", "attempt_sequence_id", "span_count", "resources_version", "gateway_paused", "gateway_generation")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_STATUS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_STATUS_FIELD_NUMBER: _ClassVar[int]
    WORKER_STATUS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_COUNT_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_VERSION_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_PAUSED_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_GENERATION_FIELD_NUMBER: _ClassVar[int]
    seq: int
    time: _timestamp_pb2.Timestamp
    kind: EventKind
    rollout_id: str
    attempt_id: str
    worker_id: str
    resources_id: str
    rollout_status: RolloutStatus
    attempt_status: AttemptStatus
    worker_status: WorkerStatus
    attempt_sequence_id: int
    span_count: int
    resources_version: int
    gateway_paused: bool
    gateway_generation: int
    def __init__(self, seq: _Optional[int] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., kind: _Optional[_Union[EventKind, str]] = ..., rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ..., worker_id: _Optional[str] = ..., resources_id: _Optional[str] = ..., rollout_status: _Optional[_Union[RolloutStatus, str]] = ..., attempt_status: _Optional[_Union[AttemptStatus, str]] = ..., worker_status: _Optional[_Union[WorkerStatus, str]] = ..., attempt_sequence_id: _Optional[int] = ..., span_count: _Optional[int] = ..., resources_version: _Optional[int] = ..., gateway_paused: _Optional[bool] = ..., gateway_generation: _Optional[int] = ...) -> None: ...
