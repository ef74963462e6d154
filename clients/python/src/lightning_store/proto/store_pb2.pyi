import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from lightning_store.proto import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SortOrder(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SORT_ORDER_UNSPECIFIED: _ClassVar[SortOrder]
    SORT_ORDER_ASC: _ClassVar[SortOrder]
    SORT_ORDER_DESC: _ClassVar[SortOrder]

class FilterLogic(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FILTER_LOGIC_UNSPECIFIED: _ClassVar[FilterLogic]
    FILTER_LOGIC_AND: _ClassVar[FilterLogic]
    FILTER_LOGIC_OR: _ClassVar[FilterLogic]

class NoTrainingRowsReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NO_TRAINING_ROWS_REASON_UNSPECIFIED: _ClassVar[NoTrainingRowsReason]
    NO_TRAINING_ROWS_REASON_NO_MODEL_CALLS: _ClassVar[NoTrainingRowsReason]
    NO_TRAINING_ROWS_REASON_FAILED_CALLS: _ClassVar[NoTrainingRowsReason]
    NO_TRAINING_ROWS_REASON_NO_TOKEN_IDS: _ClassVar[NoTrainingRowsReason]
    NO_TRAINING_ROWS_REASON_NO_REWARD: _ClassVar[NoTrainingRowsReason]
    NO_TRAINING_ROWS_REASON_REWARD_NOT_A_NUMBER: _ClassVar[NoTrainingRowsReason]
    NO_TRAINING_ROWS_REASON_ROLLOUT_FAILED: _ClassVar[NoTrainingRowsReason]

class TimelineResolution(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TIMELINE_RESOLUTION_UNSPECIFIED: _ClassVar[TimelineResolution]
    TIMELINE_RESOLUTION_MINUTE: _ClassVar[TimelineResolution]
    TIMELINE_RESOLUTION_HOUR: _ClassVar[TimelineResolution]

class ExportLayout(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXPORT_LAYOUT_UNSPECIFIED: _ClassVar[ExportLayout]
    EXPORT_LAYOUT_ROLLOUTS: _ClassVar[ExportLayout]
    EXPORT_LAYOUT_TRIPLETS: _ClassVar[ExportLayout]
    EXPORT_LAYOUT_MESSAGES: _ClassVar[ExportLayout]

class RevocationReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REVOCATION_REASON_UNSPECIFIED: _ClassVar[RevocationReason]
    REVOCATION_REASON_CANCELLED: _ClassVar[RevocationReason]
    REVOCATION_REASON_TIMEOUT: _ClassVar[RevocationReason]
    REVOCATION_REASON_UNRESPONSIVE: _ClassVar[RevocationReason]
SORT_ORDER_UNSPECIFIED: SortOrder
SORT_ORDER_ASC: SortOrder
SORT_ORDER_DESC: SortOrder
FILTER_LOGIC_UNSPECIFIED: FilterLogic
FILTER_LOGIC_AND: FilterLogic
FILTER_LOGIC_OR: FilterLogic
NO_TRAINING_ROWS_REASON_UNSPECIFIED: NoTrainingRowsReason
NO_TRAINING_ROWS_REASON_NO_MODEL_CALLS: NoTrainingRowsReason
NO_TRAINING_ROWS_REASON_FAILED_CALLS: NoTrainingRowsReason
NO_TRAINING_ROWS_REASON_NO_TOKEN_IDS: NoTrainingRowsReason
NO_TRAINING_ROWS_REASON_NO_REWARD: NoTrainingRowsReason
NO_TRAINING_ROWS_REASON_REWARD_NOT_A_NUMBER: NoTrainingRowsReason
NO_TRAINING_ROWS_REASON_ROLLOUT_FAILED: NoTrainingRowsReason
TIMELINE_RESOLUTION_UNSPECIFIED: TimelineResolution
TIMELINE_RESOLUTION_MINUTE: TimelineResolution
TIMELINE_RESOLUTION_HOUR: TimelineResolution
EXPORT_LAYOUT_UNSPECIFIED: ExportLayout
EXPORT_LAYOUT_ROLLOUTS: ExportLayout
EXPORT_LAYOUT_TRIPLETS: ExportLayout
EXPORT_LAYOUT_MESSAGES: ExportLayout
REVOCATION_REASON_UNSPECIFIED: RevocationReason
REVOCATION_REASON_CANCELLED: RevocationReason
REVOCATION_REASON_TIMEOUT: RevocationReason
REVOCATION_REASON_UNRESPONSIVE: RevocationReason

class PageRequest(_message.Message):
    __slots__ = ("sort_by", "sort_order", "limit", "offset")
    SORT_BY_FIELD_NUMBER: _ClassVar[int]
    SORT_ORDER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    sort_by: str
    sort_order: SortOrder
    limit: int
    offset: int
    def __init__(self, sort_by: _Optional[str] = ..., sort_order: _Optional[_Union[SortOrder, str]] = ..., limit: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class GetCapabilitiesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetCapabilitiesResponse(_message.Message):
    __slots__ = ("thread_safe", "async_safe", "zero_copy", "otlp_traces", "limits")
    THREAD_SAFE_FIELD_NUMBER: _ClassVar[int]
    ASYNC_SAFE_FIELD_NUMBER: _ClassVar[int]
    ZERO_COPY_FIELD_NUMBER: _ClassVar[int]
    OTLP_TRACES_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    thread_safe: bool
    async_safe: bool
    zero_copy: bool
    otlp_traces: bool
    limits: Limits
    def __init__(self, thread_safe: _Optional[bool] = ..., async_safe: _Optional[bool] = ..., zero_copy: _Optional[bool] = ..., otlp_traces: _Optional[bool] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ...) -> None: ...

class Limits(_message.Message):
    __slots__ = ("max_ids_per_list", "max_batch_items", "max_control_message_bytes", "max_message_bytes", "longest_wait", "max_id_bytes", "max_connections", "idle_timeout", "max_concurrent_streams", "max_subscribers", "subscriber_buffer_bytes")
    MAX_IDS_PER_LIST_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_ITEMS_FIELD_NUMBER: _ClassVar[int]
    MAX_CONTROL_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    LONGEST_WAIT_FIELD_NUMBER: _ClassVar[int]
    MAX_ID_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENT_STREAMS_FIELD_NUMBER: _ClassVar[int]
    MAX_SUBSCRIBERS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBER_BUFFER_BYTES_FIELD_NUMBER: _ClassVar[int]
    max_ids_per_list: int
    max_batch_items: int
    max_control_message_bytes: int
    max_message_bytes: int
    longest_wait: _duration_pb2.Duration
    max_id_bytes: int
    max_connections: int
    idle_timeout: _duration_pb2.Duration
    max_concurrent_streams: int
    max_subscribers: int
    subscriber_buffer_bytes: int
    def __init__(self, max_ids_per_list: _Optional[int] = ..., max_batch_items: _Optional[int] = ..., max_control_message_bytes: _Optional[int] = ..., max_message_bytes: _Optional[int] = ..., longest_wait: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_id_bytes: _Optional[int] = ..., max_connections: _Optional[int] = ..., idle_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_concurrent_streams: _Optional[int] = ..., max_subscribers: _Optional[int] = ..., subscriber_buffer_bytes: _Optional[int] = ...) -> None: ...

class GetStatisticsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetStatisticsResponse(_message.Message):
    __slots__ = ("name", "total_rollouts", "total_attempts", "total_spans", "total_resources", "total_workers", "uptime_seconds", "queued_rollouts", "total_span_bytes", "evicted_rollouts", "evicted_spans", "evicted_span_bytes", "rollouts_by_status", "attempts_by_status", "oldest_queued_time", "oldest_queued_rollout_id")
    class RolloutsByStatusEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class AttemptsByStatusEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOTAL_ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SPANS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_RESOURCES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_WORKERS_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    QUEUED_ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SPAN_BYTES_FIELD_NUMBER: _ClassVar[int]
    EVICTED_ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    EVICTED_SPANS_FIELD_NUMBER: _ClassVar[int]
    EVICTED_SPAN_BYTES_FIELD_NUMBER: _ClassVar[int]
    ROLLOUTS_BY_STATUS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_BY_STATUS_FIELD_NUMBER: _ClassVar[int]
    OLDEST_QUEUED_TIME_FIELD_NUMBER: _ClassVar[int]
    OLDEST_QUEUED_ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    total_rollouts: int
    total_attempts: int
    total_spans: int
    total_resources: int
    total_workers: int
    uptime_seconds: float
    queued_rollouts: int
    total_span_bytes: int
    evicted_rollouts: int
    evicted_spans: int
    evicted_span_bytes: int
    rollouts_by_status: _containers.ScalarMap[str, int]
    attempts_by_status: _containers.ScalarMap[str, int]
    oldest_queued_time: _timestamp_pb2.Timestamp
    oldest_queued_rollout_id: str
    def __init__(self, name: _Optional[str] = ..., total_rollouts: _Optional[int] = ..., total_attempts: _Optional[int] = ..., total_spans: _Optional[int] = ..., total_resources: _Optional[int] = ..., total_workers: _Optional[int] = ..., uptime_seconds: _Optional[float] = ..., queued_rollouts: _Optional[int] = ..., total_span_bytes: _Optional[int] = ..., evicted_rollouts: _Optional[int] = ..., evicted_spans: _Optional[int] = ..., evicted_span_bytes: _Optional[int] = ..., rollouts_by_status: _Optional[_Mapping[str, int]] = ..., attempts_by_status: _Optional[_Mapping[str, int]] = ..., oldest_queued_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., oldest_queued_rollout_id: _Optional[str] = ...) -> None: ...

class GetRolloutActivityRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetRolloutActivityResponse(_message.Message):
    __slots__ = ("minutes",)
    MINUTES_FIELD_NUMBER: _ClassVar[int]
    minutes: _containers.RepeatedCompositeFieldContainer[RolloutMinute]
    def __init__(self, minutes: _Optional[_Iterable[_Union[RolloutMinute, _Mapping]]] = ...) -> None: ...

class RolloutMinute(_message.Message):
    __slots__ = ("start", "created", "succeeded", "failed", "cancelled")
    START_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    start: _timestamp_pb2.Timestamp
    created: int
    succeeded: int
    failed: int
    cancelled: int
    def __init__(self, start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created: _Optional[int] = ..., succeeded: _Optional[int] = ..., failed: _Optional[int] = ..., cancelled: _Optional[int] = ...) -> None: ...

class GetTrainingSummaryRequest(_message.Message):
    __slots__ = ("mode", "version_from", "version_to")
    MODE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FROM_FIELD_NUMBER: _ClassVar[int]
    VERSION_TO_FIELD_NUMBER: _ClassVar[int]
    mode: _types_pb2.RolloutMode
    version_from: int
    version_to: int
    def __init__(self, mode: _Optional[_Union[_types_pb2.RolloutMode, str]] = ..., version_from: _Optional[int] = ..., version_to: _Optional[int] = ...) -> None: ...

class GetTrainingSummaryResponse(_message.Message):
    __slots__ = ("versions",)
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[VersionSummary]
    def __init__(self, versions: _Optional[_Iterable[_Union[VersionSummary, _Mapping]]] = ...) -> None: ...

class VersionSummary(_message.Message):
    __slots__ = ("resources_id", "model_version", "version", "mode", "rollouts", "succeeded", "rewarded", "reward_mean", "reward_p10", "reward_p50", "reward_p90", "training_rows", "rollouts_without_rows", "without_rows_by_reason", "duration_seconds", "prompt_tokens", "response_tokens", "model_call_latency_seconds")
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    REWARDED_FIELD_NUMBER: _ClassVar[int]
    REWARD_MEAN_FIELD_NUMBER: _ClassVar[int]
    REWARD_P10_FIELD_NUMBER: _ClassVar[int]
    REWARD_P50_FIELD_NUMBER: _ClassVar[int]
    REWARD_P90_FIELD_NUMBER: _ClassVar[int]
    TRAINING_ROWS_FIELD_NUMBER: _ClassVar[int]
    ROLLOUTS_WITHOUT_ROWS_FIELD_NUMBER: _ClassVar[int]
    WITHOUT_ROWS_BY_REASON_FIELD_NUMBER: _ClassVar[int]
    DURATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MODEL_CALL_LATENCY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    resources_id: str
    model_version: int
    version: int
    mode: _types_pb2.RolloutMode
    rollouts: int
    succeeded: int
    rewarded: int
    reward_mean: float
    reward_p10: float
    reward_p50: float
    reward_p90: float
    training_rows: int
    rollouts_without_rows: int
    without_rows_by_reason: _containers.RepeatedCompositeFieldContainer[NoRowsCount]
    duration_seconds: Distribution
    prompt_tokens: Distribution
    response_tokens: Distribution
    model_call_latency_seconds: Distribution
    def __init__(self, resources_id: _Optional[str] = ..., model_version: _Optional[int] = ..., version: _Optional[int] = ..., mode: _Optional[_Union[_types_pb2.RolloutMode, str]] = ..., rollouts: _Optional[int] = ..., succeeded: _Optional[int] = ..., rewarded: _Optional[int] = ..., reward_mean: _Optional[float] = ..., reward_p10: _Optional[float] = ..., reward_p50: _Optional[float] = ..., reward_p90: _Optional[float] = ..., training_rows: _Optional[int] = ..., rollouts_without_rows: _Optional[int] = ..., without_rows_by_reason: _Optional[_Iterable[_Union[NoRowsCount, _Mapping]]] = ..., duration_seconds: _Optional[_Union[Distribution, _Mapping]] = ..., prompt_tokens: _Optional[_Union[Distribution, _Mapping]] = ..., response_tokens: _Optional[_Union[Distribution, _Mapping]] = ..., model_call_latency_seconds: _Optional[_Union[Distribution, _Mapping]] = ...) -> None: ...

class Distribution(_message.Message):
    __slots__ = ("count", "mean", "p10", "p50", "p90")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    MEAN_FIELD_NUMBER: _ClassVar[int]
    P10_FIELD_NUMBER: _ClassVar[int]
    P50_FIELD_NUMBER: _ClassVar[int]
    P90_FIELD_NUMBER: _ClassVar[int]
    count: int
    mean: float
    p10: float
    p50: float
    p90: float
    def __init__(self, count: _Optional[int] = ..., mean: _Optional[float] = ..., p10: _Optional[float] = ..., p50: _Optional[float] = ..., p90: _Optional[float] = ...) -> None: ...

class NoRowsCount(_message.Message):
    __slots__ = ("reason", "rollouts")
    REASON_FIELD_NUMBER: _ClassVar[int]
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    reason: NoTrainingRowsReason
    rollouts: int
    def __init__(self, reason: _Optional[_Union[NoTrainingRowsReason, str]] = ..., rollouts: _Optional[int] = ...) -> None: ...

class GetRewardTimelineRequest(_message.Message):
    __slots__ = ("mode", "resolution", "start_time", "end_time")
    MODE_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    mode: _types_pb2.RolloutMode
    resolution: TimelineResolution
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    def __init__(self, mode: _Optional[_Union[_types_pb2.RolloutMode, str]] = ..., resolution: _Optional[_Union[TimelineResolution, str]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetRewardTimelineResponse(_message.Message):
    __slots__ = ("resolution", "periods")
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    PERIODS_FIELD_NUMBER: _ClassVar[int]
    resolution: TimelineResolution
    periods: _containers.RepeatedCompositeFieldContainer[PeriodSummary]
    def __init__(self, resolution: _Optional[_Union[TimelineResolution, str]] = ..., periods: _Optional[_Iterable[_Union[PeriodSummary, _Mapping]]] = ...) -> None: ...

class PeriodSummary(_message.Message):
    __slots__ = ("start", "mode", "rollouts", "succeeded", "rewarded", "reward_mean", "reward_p10", "reward_p50", "reward_p90")
    START_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    REWARDED_FIELD_NUMBER: _ClassVar[int]
    REWARD_MEAN_FIELD_NUMBER: _ClassVar[int]
    REWARD_P10_FIELD_NUMBER: _ClassVar[int]
    REWARD_P50_FIELD_NUMBER: _ClassVar[int]
    REWARD_P90_FIELD_NUMBER: _ClassVar[int]
    start: _timestamp_pb2.Timestamp
    mode: _types_pb2.RolloutMode
    rollouts: int
    succeeded: int
    rewarded: int
    reward_mean: float
    reward_p10: float
    reward_p50: float
    reward_p90: float
    def __init__(self, start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., mode: _Optional[_Union[_types_pb2.RolloutMode, str]] = ..., rollouts: _Optional[int] = ..., succeeded: _Optional[int] = ..., rewarded: _Optional[int] = ..., reward_mean: _Optional[float] = ..., reward_p10: _Optional[float] = ..., reward_p50: _Optional[float] = ..., reward_p90: _Optional[float] = ...) -> None: ...

class CompareVersionsRequest(_message.Message):
    __slots__ = ("mode", "version_before", "version_after", "max_tasks", "model_version_before", "model_version_after")
    MODE_FIELD_NUMBER: _ClassVar[int]
    VERSION_BEFORE_FIELD_NUMBER: _ClassVar[int]
    VERSION_AFTER_FIELD_NUMBER: _ClassVar[int]
    MAX_TASKS_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_BEFORE_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_AFTER_FIELD_NUMBER: _ClassVar[int]
    mode: _types_pb2.RolloutMode
    version_before: int
    version_after: int
    max_tasks: int
    model_version_before: int
    model_version_after: int
    def __init__(self, mode: _Optional[_Union[_types_pb2.RolloutMode, str]] = ..., version_before: _Optional[int] = ..., version_after: _Optional[int] = ..., max_tasks: _Optional[int] = ..., model_version_before: _Optional[int] = ..., model_version_after: _Optional[int] = ...) -> None: ...

class CompareVersionsResponse(_message.Message):
    __slots__ = ("before", "after", "tasks", "tasks_cut")
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    TASKS_CUT_FIELD_NUMBER: _ClassVar[int]
    before: VersionDistribution
    after: VersionDistribution
    tasks: _containers.RepeatedCompositeFieldContainer[TaskChange]
    tasks_cut: bool
    def __init__(self, before: _Optional[_Union[VersionDistribution, _Mapping]] = ..., after: _Optional[_Union[VersionDistribution, _Mapping]] = ..., tasks: _Optional[_Iterable[_Union[TaskChange, _Mapping]]] = ..., tasks_cut: _Optional[bool] = ...) -> None: ...

class VersionDistribution(_message.Message):
    __slots__ = ("summary", "bins")
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    BINS_FIELD_NUMBER: _ClassVar[int]
    summary: VersionSummary
    bins: _containers.RepeatedCompositeFieldContainer[RewardBin]
    def __init__(self, summary: _Optional[_Union[VersionSummary, _Mapping]] = ..., bins: _Optional[_Iterable[_Union[RewardBin, _Mapping]]] = ...) -> None: ...

class RewardBin(_message.Message):
    __slots__ = ("reward", "rollouts")
    REWARD_FIELD_NUMBER: _ClassVar[int]
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    reward: float
    rollouts: int
    def __init__(self, reward: _Optional[float] = ..., rollouts: _Optional[int] = ...) -> None: ...

class TaskChange(_message.Message):
    __slots__ = ("input_json", "before", "after", "change")
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    input_json: str
    before: TaskRewards
    after: TaskRewards
    change: float
    def __init__(self, input_json: _Optional[str] = ..., before: _Optional[_Union[TaskRewards, _Mapping]] = ..., after: _Optional[_Union[TaskRewards, _Mapping]] = ..., change: _Optional[float] = ...) -> None: ...

class TaskRewards(_message.Message):
    __slots__ = ("rollouts", "rewarded", "reward_mean", "latest_rollout_id")
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    REWARDED_FIELD_NUMBER: _ClassVar[int]
    REWARD_MEAN_FIELD_NUMBER: _ClassVar[int]
    LATEST_ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    rollouts: int
    rewarded: int
    reward_mean: float
    latest_rollout_id: str
    def __init__(self, rollouts: _Optional[int] = ..., rewarded: _Optional[int] = ..., reward_mean: _Optional[float] = ..., latest_rollout_id: _Optional[str] = ...) -> None: ...

class GetQueuePositionRequest(_message.Message):
    __slots__ = ("rollout_id",)
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    def __init__(self, rollout_id: _Optional[str] = ...) -> None: ...

class GetQueuePositionResponse(_message.Message):
    __slots__ = ("queued", "ahead", "queue_length", "since")
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    AHEAD_FIELD_NUMBER: _ClassVar[int]
    QUEUE_LENGTH_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    queued: bool
    ahead: int
    queue_length: int
    since: _timestamp_pb2.Timestamp
    def __init__(self, queued: _Optional[bool] = ..., ahead: _Optional[int] = ..., queue_length: _Optional[int] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListRecentFailuresRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: int
    def __init__(self, limit: _Optional[int] = ...) -> None: ...

class ListRecentFailuresResponse(_message.Message):
    __slots__ = ("failures",)
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    failures: _containers.RepeatedCompositeFieldContainer[RolloutFailure]
    def __init__(self, failures: _Optional[_Iterable[_Union[RolloutFailure, _Mapping]]] = ...) -> None: ...

class RolloutFailure(_message.Message):
    __slots__ = ("rollout", "error_span", "agl1_error")
    ROLLOUT_FIELD_NUMBER: _ClassVar[int]
    ERROR_SPAN_FIELD_NUMBER: _ClassVar[int]
    AGL1_ERROR_FIELD_NUMBER: _ClassVar[int]
    rollout: _types_pb2.Rollout
    error_span: _types_pb2.Span
    agl1_error: str
    def __init__(self, rollout: _Optional[_Union[_types_pb2.Rollout, _Mapping]] = ..., error_span: _Optional[_Union[_types_pb2.Span, _Mapping]] = ..., agl1_error: _Optional[str] = ...) -> None: ...

class RolloutSpec(_message.Message):
    __slots__ = ("input_json", "mode", "resources_id", "config", "metadata_json")
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    input_json: str
    mode: _types_pb2.RolloutMode
    resources_id: str
    config: _types_pb2.RolloutConfig
    metadata_json: str
    def __init__(self, input_json: _Optional[str] = ..., mode: _Optional[_Union[_types_pb2.RolloutMode, str]] = ..., resources_id: _Optional[str] = ..., config: _Optional[_Union[_types_pb2.RolloutConfig, _Mapping]] = ..., metadata_json: _Optional[str] = ...) -> None: ...

class StartRolloutRequest(_message.Message):
    __slots__ = ("rollout", "worker_id")
    ROLLOUT_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    rollout: RolloutSpec
    worker_id: str
    def __init__(self, rollout: _Optional[_Union[RolloutSpec, _Mapping]] = ..., worker_id: _Optional[str] = ...) -> None: ...

class StartRolloutResponse(_message.Message):
    __slots__ = ("rollout",)
    ROLLOUT_FIELD_NUMBER: _ClassVar[int]
    rollout: _types_pb2.Rollout
    def __init__(self, rollout: _Optional[_Union[_types_pb2.Rollout, _Mapping]] = ...) -> None: ...

class EnqueueRolloutRequest(_message.Message):
    __slots__ = ("rollout", "request_id")
    ROLLOUT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    rollout: RolloutSpec
    request_id: str
    def __init__(self, rollout: _Optional[_Union[RolloutSpec, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class EnqueueRolloutResponse(_message.Message):
    __slots__ = ("rollout",)
    ROLLOUT_FIELD_NUMBER: _ClassVar[int]
    rollout: _types_pb2.Rollout
    def __init__(self, rollout: _Optional[_Union[_types_pb2.Rollout, _Mapping]] = ...) -> None: ...

class EnqueueRolloutsRequest(_message.Message):
    __slots__ = ("rollouts", "ids_only", "max_response_bytes", "request_id")
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    IDS_ONLY_FIELD_NUMBER: _ClassVar[int]
    MAX_RESPONSE_BYTES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    rollouts: _containers.RepeatedCompositeFieldContainer[RolloutSpec]
    ids_only: bool
    max_response_bytes: int
    request_id: str
    def __init__(self, rollouts: _Optional[_Iterable[_Union[RolloutSpec, _Mapping]]] = ..., ids_only: _Optional[bool] = ..., max_response_bytes: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class EnqueueRolloutsResponse(_message.Message):
    __slots__ = ("rollouts", "rollout_ids", "ids_only", "repeated")
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_IDS_FIELD_NUMBER: _ClassVar[int]
    IDS_ONLY_FIELD_NUMBER: _ClassVar[int]
    REPEATED_FIELD_NUMBER: _ClassVar[int]
    rollouts: _containers.RepeatedCompositeFieldContainer[_types_pb2.Rollout]
    rollout_ids: _containers.RepeatedScalarFieldContainer[str]
    ids_only: bool
    repeated: bool
    def __init__(self, rollouts: _Optional[_Iterable[_Union[_types_pb2.Rollout, _Mapping]]] = ..., rollout_ids: _Optional[_Iterable[str]] = ..., ids_only: _Optional[bool] = ..., repeated: _Optional[bool] = ...) -> None: ...

class DequeueRolloutRequest(_message.Message):
    __slots__ = ("worker_id", "wait")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    wait: _duration_pb2.Duration
    def __init__(self, worker_id: _Optional[str] = ..., wait: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class DequeueRolloutResponse(_message.Message):
    __slots__ = ("rollout",)
    ROLLOUT_FIELD_NUMBER: _ClassVar[int]
    rollout: _types_pb2.Rollout
    def __init__(self, rollout: _Optional[_Union[_types_pb2.Rollout, _Mapping]] = ...) -> None: ...

class DequeueRolloutsRequest(_message.Message):
    __slots__ = ("limit", "worker_id", "wait")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    limit: int
    worker_id: str
    wait: _duration_pb2.Duration
    def __init__(self, limit: _Optional[int] = ..., worker_id: _Optional[str] = ..., wait: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class DequeueRolloutsResponse(_message.Message):
    __slots__ = ("rollouts",)
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    rollouts: _containers.RepeatedCompositeFieldContainer[_types_pb2.Rollout]
    def __init__(self, rollouts: _Optional[_Iterable[_Union[_types_pb2.Rollout, _Mapping]]] = ...) -> None: ...

class StartAttemptRequest(_message.Message):
    __slots__ = ("rollout_id", "worker_id")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    worker_id: str
    def __init__(self, rollout_id: _Optional[str] = ..., worker_id: _Optional[str] = ...) -> None: ...

class StartAttemptResponse(_message.Message):
    __slots__ = ("rollout",)
    ROLLOUT_FIELD_NUMBER: _ClassVar[int]
    rollout: _types_pb2.Rollout
    def __init__(self, rollout: _Optional[_Union[_types_pb2.Rollout, _Mapping]] = ...) -> None: ...

class AddSpanRequest(_message.Message):
    __slots__ = ("span", "owner_epoch")
    SPAN_FIELD_NUMBER: _ClassVar[int]
    OWNER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    span: _types_pb2.Span
    owner_epoch: int
    def __init__(self, span: _Optional[_Union[_types_pb2.Span, _Mapping]] = ..., owner_epoch: _Optional[int] = ...) -> None: ...

class AddSpanResponse(_message.Message):
    __slots__ = ("span",)
    SPAN_FIELD_NUMBER: _ClassVar[int]
    span: _types_pb2.Span
    def __init__(self, span: _Optional[_Union[_types_pb2.Span, _Mapping]] = ...) -> None: ...

class AddSpansRequest(_message.Message):
    __slots__ = ("spans", "owner_epoch", "ids_only", "max_response_bytes")
    SPANS_FIELD_NUMBER: _ClassVar[int]
    OWNER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    IDS_ONLY_FIELD_NUMBER: _ClassVar[int]
    MAX_RESPONSE_BYTES_FIELD_NUMBER: _ClassVar[int]
    spans: _containers.RepeatedCompositeFieldContainer[_types_pb2.Span]
    owner_epoch: int
    ids_only: bool
    max_response_bytes: int
    def __init__(self, spans: _Optional[_Iterable[_Union[_types_pb2.Span, _Mapping]]] = ..., owner_epoch: _Optional[int] = ..., ids_only: _Optional[bool] = ..., max_response_bytes: _Optional[int] = ...) -> None: ...

class AddSpansResponse(_message.Message):
    __slots__ = ("spans", "duplicates", "sequence_ids", "ids_only")
    SPANS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_IDS_FIELD_NUMBER: _ClassVar[int]
    IDS_ONLY_FIELD_NUMBER: _ClassVar[int]
    spans: _containers.RepeatedCompositeFieldContainer[_types_pb2.Span]
    duplicates: int
    sequence_ids: _containers.RepeatedScalarFieldContainer[int]
    ids_only: bool
    def __init__(self, spans: _Optional[_Iterable[_Union[_types_pb2.Span, _Mapping]]] = ..., duplicates: _Optional[int] = ..., sequence_ids: _Optional[_Iterable[int]] = ..., ids_only: _Optional[bool] = ...) -> None: ...

class GetNextSpanSequenceIdRequest(_message.Message):
    __slots__ = ("rollout_id", "attempt_id", "allow_unknown")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    ALLOW_UNKNOWN_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    attempt_id: str
    allow_unknown: bool
    def __init__(self, rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ..., allow_unknown: _Optional[bool] = ...) -> None: ...

class GetNextSpanSequenceIdResponse(_message.Message):
    __slots__ = ("sequence_id",)
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    sequence_id: int
    def __init__(self, sequence_id: _Optional[int] = ...) -> None: ...

class RolloutAttemptRef(_message.Message):
    __slots__ = ("rollout_id", "attempt_id")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    attempt_id: str
    def __init__(self, rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ...) -> None: ...

class GetSpanSequenceIdsRequest(_message.Message):
    __slots__ = ("attempts", "allow_unknown")
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_UNKNOWN_FIELD_NUMBER: _ClassVar[int]
    attempts: _containers.RepeatedCompositeFieldContainer[RolloutAttemptRef]
    allow_unknown: bool
    def __init__(self, attempts: _Optional[_Iterable[_Union[RolloutAttemptRef, _Mapping]]] = ..., allow_unknown: _Optional[bool] = ...) -> None: ...

class GetSpanSequenceIdsResponse(_message.Message):
    __slots__ = ("sequence_ids",)
    SEQUENCE_IDS_FIELD_NUMBER: _ClassVar[int]
    sequence_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, sequence_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class QueryRolloutsRequest(_message.Message):
    __slots__ = ("status_in", "rollout_id_in", "rollout_id_contains", "filter_logic", "page", "status_in_list", "rollout_id_in_list", "mode_in", "start_time_from", "start_time_until", "worker_id", "resources_id", "end_time_from", "end_time_until", "reward_min", "reward_max", "model_version", "without_training_rows")
    STATUS_IN_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_ID_IN_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_ID_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    FILTER_LOGIC_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    STATUS_IN_LIST_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_ID_IN_LIST_FIELD_NUMBER: _ClassVar[int]
    MODE_IN_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FROM_FIELD_NUMBER: _ClassVar[int]
    START_TIME_UNTIL_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FROM_FIELD_NUMBER: _ClassVar[int]
    END_TIME_UNTIL_FIELD_NUMBER: _ClassVar[int]
    REWARD_MIN_FIELD_NUMBER: _ClassVar[int]
    REWARD_MAX_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    WITHOUT_TRAINING_ROWS_FIELD_NUMBER: _ClassVar[int]
    status_in: _containers.RepeatedScalarFieldContainer[_types_pb2.RolloutStatus]
    rollout_id_in: _containers.RepeatedScalarFieldContainer[str]
    rollout_id_contains: str
    filter_logic: FilterLogic
    page: PageRequest
    status_in_list: RolloutStatusList
    rollout_id_in_list: StringList
    mode_in: _containers.RepeatedScalarFieldContainer[_types_pb2.RolloutMode]
    start_time_from: _timestamp_pb2.Timestamp
    start_time_until: _timestamp_pb2.Timestamp
    worker_id: str
    resources_id: str
    end_time_from: _timestamp_pb2.Timestamp
    end_time_until: _timestamp_pb2.Timestamp
    reward_min: float
    reward_max: float
    model_version: int
    without_training_rows: NoTrainingRowsReason
    def __init__(self, status_in: _Optional[_Iterable[_Union[_types_pb2.RolloutStatus, str]]] = ..., rollout_id_in: _Optional[_Iterable[str]] = ..., rollout_id_contains: _Optional[str] = ..., filter_logic: _Optional[_Union[FilterLogic, str]] = ..., page: _Optional[_Union[PageRequest, _Mapping]] = ..., status_in_list: _Optional[_Union[RolloutStatusList, _Mapping]] = ..., rollout_id_in_list: _Optional[_Union[StringList, _Mapping]] = ..., mode_in: _Optional[_Iterable[_Union[_types_pb2.RolloutMode, str]]] = ..., start_time_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., start_time_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., worker_id: _Optional[str] = ..., resources_id: _Optional[str] = ..., end_time_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reward_min: _Optional[float] = ..., reward_max: _Optional[float] = ..., model_version: _Optional[int] = ..., without_training_rows: _Optional[_Union[NoTrainingRowsReason, str]] = ...) -> None: ...

class RolloutStatusList(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[_types_pb2.RolloutStatus]
    def __init__(self, values: _Optional[_Iterable[_Union[_types_pb2.RolloutStatus, str]]] = ...) -> None: ...

class WorkerStatusList(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[_types_pb2.WorkerStatus]
    def __init__(self, values: _Optional[_Iterable[_Union[_types_pb2.WorkerStatus, str]]] = ...) -> None: ...

class StringList(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...

class QueryRolloutsResponse(_message.Message):
    __slots__ = ("rollouts", "limit", "offset", "total", "rewards")
    class RewardsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    REWARDS_FIELD_NUMBER: _ClassVar[int]
    rollouts: _containers.RepeatedCompositeFieldContainer[_types_pb2.Rollout]
    limit: int
    offset: int
    total: int
    rewards: _containers.ScalarMap[str, float]
    def __init__(self, rollouts: _Optional[_Iterable[_Union[_types_pb2.Rollout, _Mapping]]] = ..., limit: _Optional[int] = ..., offset: _Optional[int] = ..., total: _Optional[int] = ..., rewards: _Optional[_Mapping[str, float]] = ...) -> None: ...

class GetRolloutRequest(_message.Message):
    __slots__ = ("rollout_id",)
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    def __init__(self, rollout_id: _Optional[str] = ...) -> None: ...

class GetRolloutResponse(_message.Message):
    __slots__ = ("rollout",)
    ROLLOUT_FIELD_NUMBER: _ClassVar[int]
    rollout: _types_pb2.Rollout
    def __init__(self, rollout: _Optional[_Union[_types_pb2.Rollout, _Mapping]] = ...) -> None: ...

class UpdateRolloutRequest(_message.Message):
    __slots__ = ("rollout_id", "update_mask", "input_json", "mode", "resources_id", "status", "config", "metadata_json")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    update_mask: _field_mask_pb2.FieldMask
    input_json: str
    mode: _types_pb2.RolloutMode
    resources_id: str
    status: _types_pb2.RolloutStatus
    config: _types_pb2.RolloutConfig
    metadata_json: str
    def __init__(self, rollout_id: _Optional[str] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ..., input_json: _Optional[str] = ..., mode: _Optional[_Union[_types_pb2.RolloutMode, str]] = ..., resources_id: _Optional[str] = ..., status: _Optional[_Union[_types_pb2.RolloutStatus, str]] = ..., config: _Optional[_Union[_types_pb2.RolloutConfig, _Mapping]] = ..., metadata_json: _Optional[str] = ...) -> None: ...

class UpdateRolloutResponse(_message.Message):
    __slots__ = ("rollout",)
    ROLLOUT_FIELD_NUMBER: _ClassVar[int]
    rollout: _types_pb2.Rollout
    def __init__(self, rollout: _Optional[_Union[_types_pb2.Rollout, _Mapping]] = ...) -> None: ...

class QueryAttemptsRequest(_message.Message):
    __slots__ = ("rollout_id", "page")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    page: PageRequest
    def __init__(self, rollout_id: _Optional[str] = ..., page: _Optional[_Union[PageRequest, _Mapping]] = ...) -> None: ...

class QueryAttemptsResponse(_message.Message):
    __slots__ = ("attempts", "limit", "offset", "total")
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    attempts: _containers.RepeatedCompositeFieldContainer[_types_pb2.Attempt]
    limit: int
    offset: int
    total: int
    def __init__(self, attempts: _Optional[_Iterable[_Union[_types_pb2.Attempt, _Mapping]]] = ..., limit: _Optional[int] = ..., offset: _Optional[int] = ..., total: _Optional[int] = ...) -> None: ...

class GetLatestAttemptRequest(_message.Message):
    __slots__ = ("rollout_id",)
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    def __init__(self, rollout_id: _Optional[str] = ...) -> None: ...

class GetLatestAttemptResponse(_message.Message):
    __slots__ = ("attempt",)
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    attempt: _types_pb2.Attempt
    def __init__(self, attempt: _Optional[_Union[_types_pb2.Attempt, _Mapping]] = ...) -> None: ...

class UpdateAttemptRequest(_message.Message):
    __slots__ = ("rollout_id", "attempt_id", "update_mask", "status", "worker_id", "last_heartbeat_time", "metadata_json", "owner_epoch")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_TIME_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    OWNER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    attempt_id: str
    update_mask: _field_mask_pb2.FieldMask
    status: _types_pb2.AttemptStatus
    worker_id: str
    last_heartbeat_time: _timestamp_pb2.Timestamp
    metadata_json: str
    owner_epoch: int
    def __init__(self, rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ..., status: _Optional[_Union[_types_pb2.AttemptStatus, str]] = ..., worker_id: _Optional[str] = ..., last_heartbeat_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., metadata_json: _Optional[str] = ..., owner_epoch: _Optional[int] = ...) -> None: ...

class UpdateAttemptResponse(_message.Message):
    __slots__ = ("attempt",)
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    attempt: _types_pb2.Attempt
    def __init__(self, attempt: _Optional[_Union[_types_pb2.Attempt, _Mapping]] = ...) -> None: ...

class UpdateAttemptsRequest(_message.Message):
    __slots__ = ("updates",)
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    updates: _containers.RepeatedCompositeFieldContainer[UpdateAttemptRequest]
    def __init__(self, updates: _Optional[_Iterable[_Union[UpdateAttemptRequest, _Mapping]]] = ...) -> None: ...

class UpdateAttemptsResponse(_message.Message):
    __slots__ = ("attempts",)
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    attempts: _containers.RepeatedCompositeFieldContainer[_types_pb2.Attempt]
    def __init__(self, attempts: _Optional[_Iterable[_Union[_types_pb2.Attempt, _Mapping]]] = ...) -> None: ...

class WaitForRolloutsRequest(_message.Message):
    __slots__ = ("rollout_ids", "timeout")
    ROLLOUT_IDS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    rollout_ids: _containers.RepeatedScalarFieldContainer[str]
    timeout: _duration_pb2.Duration
    def __init__(self, rollout_ids: _Optional[_Iterable[str]] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class WaitForRolloutsResponse(_message.Message):
    __slots__ = ("rollouts",)
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    rollouts: _containers.RepeatedCompositeFieldContainer[_types_pb2.Rollout]
    def __init__(self, rollouts: _Optional[_Iterable[_Union[_types_pb2.Rollout, _Mapping]]] = ...) -> None: ...

class QuerySpansRequest(_message.Message):
    __slots__ = ("rollout_id", "attempt_id", "trace_id", "trace_id_contains", "span_id", "span_id_contains", "parent_id", "parent_id_contains", "name", "name_contains", "filter_logic", "page")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAME_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    FILTER_LOGIC_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    attempt_id: str
    trace_id: str
    trace_id_contains: str
    span_id: str
    span_id_contains: str
    parent_id: str
    parent_id_contains: str
    name: str
    name_contains: str
    filter_logic: FilterLogic
    page: PageRequest
    def __init__(self, rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ..., trace_id: _Optional[str] = ..., trace_id_contains: _Optional[str] = ..., span_id: _Optional[str] = ..., span_id_contains: _Optional[str] = ..., parent_id: _Optional[str] = ..., parent_id_contains: _Optional[str] = ..., name: _Optional[str] = ..., name_contains: _Optional[str] = ..., filter_logic: _Optional[_Union[FilterLogic, str]] = ..., page: _Optional[_Union[PageRequest, _Mapping]] = ...) -> None: ...

class QuerySpansResponse(_message.Message):
    __slots__ = ("spans", "limit", "offset", "total")
    SPANS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    spans: _containers.RepeatedCompositeFieldContainer[_types_pb2.Span]
    limit: int
    offset: int
    total: int
    def __init__(self, spans: _Optional[_Iterable[_Union[_types_pb2.Span, _Mapping]]] = ..., limit: _Optional[int] = ..., offset: _Optional[int] = ..., total: _Optional[int] = ...) -> None: ...

class ExportRolloutsRequest(_message.Message):
    __slots__ = ("status_in", "mode_in", "start_time_from", "start_time_until", "resources_id", "worker_id", "rollout_id_contains", "layout", "after", "end_time_from", "end_time_until")
    STATUS_IN_FIELD_NUMBER: _ClassVar[int]
    MODE_IN_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FROM_FIELD_NUMBER: _ClassVar[int]
    START_TIME_UNTIL_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_ID_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FROM_FIELD_NUMBER: _ClassVar[int]
    END_TIME_UNTIL_FIELD_NUMBER: _ClassVar[int]
    status_in: _containers.RepeatedScalarFieldContainer[_types_pb2.RolloutStatus]
    mode_in: _containers.RepeatedScalarFieldContainer[_types_pb2.RolloutMode]
    start_time_from: _timestamp_pb2.Timestamp
    start_time_until: _timestamp_pb2.Timestamp
    resources_id: str
    worker_id: str
    rollout_id_contains: str
    layout: ExportLayout
    after: str
    end_time_from: _timestamp_pb2.Timestamp
    end_time_until: _timestamp_pb2.Timestamp
    def __init__(self, status_in: _Optional[_Iterable[_Union[_types_pb2.RolloutStatus, str]]] = ..., mode_in: _Optional[_Iterable[_Union[_types_pb2.RolloutMode, str]]] = ..., start_time_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., start_time_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., resources_id: _Optional[str] = ..., worker_id: _Optional[str] = ..., rollout_id_contains: _Optional[str] = ..., layout: _Optional[_Union[ExportLayout, str]] = ..., after: _Optional[str] = ..., end_time_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ExportRolloutsResponse(_message.Message):
    __slots__ = ("start", "batch")
    START_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    start: ExportStart
    batch: ExportBatch
    def __init__(self, start: _Optional[_Union[ExportStart, _Mapping]] = ..., batch: _Optional[_Union[ExportBatch, _Mapping]] = ...) -> None: ...

class ExportStart(_message.Message):
    __slots__ = ("total", "cursor")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    total: int
    cursor: str
    def __init__(self, total: _Optional[int] = ..., cursor: _Optional[str] = ...) -> None: ...

class ExportBatch(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[ExportRecord]
    def __init__(self, records: _Optional[_Iterable[_Union[ExportRecord, _Mapping]]] = ...) -> None: ...

class ExportRecord(_message.Message):
    __slots__ = ("json", "cursor")
    JSON_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    json: str
    cursor: str
    def __init__(self, json: _Optional[str] = ..., cursor: _Optional[str] = ...) -> None: ...

class AddResourcesRequest(_message.Message):
    __slots__ = ("resources_json",)
    RESOURCES_JSON_FIELD_NUMBER: _ClassVar[int]
    resources_json: str
    def __init__(self, resources_json: _Optional[str] = ...) -> None: ...

class AddResourcesResponse(_message.Message):
    __slots__ = ("resources",)
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resources: _types_pb2.ResourcesUpdate
    def __init__(self, resources: _Optional[_Union[_types_pb2.ResourcesUpdate, _Mapping]] = ...) -> None: ...

class UpdateResourcesRequest(_message.Message):
    __slots__ = ("resources_id", "resources_json")
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_JSON_FIELD_NUMBER: _ClassVar[int]
    resources_id: str
    resources_json: str
    def __init__(self, resources_id: _Optional[str] = ..., resources_json: _Optional[str] = ...) -> None: ...

class UpdateResourcesResponse(_message.Message):
    __slots__ = ("resources",)
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resources: _types_pb2.ResourcesUpdate
    def __init__(self, resources: _Optional[_Union[_types_pb2.ResourcesUpdate, _Mapping]] = ...) -> None: ...

class GetResourcesRequest(_message.Message):
    __slots__ = ("resources_id",)
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    resources_id: str
    def __init__(self, resources_id: _Optional[str] = ...) -> None: ...

class GetResourcesResponse(_message.Message):
    __slots__ = ("resources",)
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resources: _types_pb2.ResourcesUpdate
    def __init__(self, resources: _Optional[_Union[_types_pb2.ResourcesUpdate, _Mapping]] = ...) -> None: ...

class GetLatestResourcesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetLatestResourcesResponse(_message.Message):
    __slots__ = ("resources",)
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resources: _types_pb2.ResourcesUpdate
    def __init__(self, resources: _Optional[_Union[_types_pb2.ResourcesUpdate, _Mapping]] = ...) -> None: ...

class QueryResourcesRequest(_message.Message):
    __slots__ = ("resources_id", "resources_id_contains", "page")
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_ID_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    resources_id: str
    resources_id_contains: str
    page: PageRequest
    def __init__(self, resources_id: _Optional[str] = ..., resources_id_contains: _Optional[str] = ..., page: _Optional[_Union[PageRequest, _Mapping]] = ...) -> None: ...

class QueryResourcesResponse(_message.Message):
    __slots__ = ("resources", "limit", "offset", "total")
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[_types_pb2.ResourcesUpdate]
    limit: int
    offset: int
    total: int
    def __init__(self, resources: _Optional[_Iterable[_Union[_types_pb2.ResourcesUpdate, _Mapping]]] = ..., limit: _Optional[int] = ..., offset: _Optional[int] = ..., total: _Optional[int] = ...) -> None: ...

class QueryWorkersRequest(_message.Message):
    __slots__ = ("status_in", "worker_id_contains", "filter_logic", "page", "status_in_list")
    STATUS_IN_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    FILTER_LOGIC_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    STATUS_IN_LIST_FIELD_NUMBER: _ClassVar[int]
    status_in: _containers.RepeatedScalarFieldContainer[_types_pb2.WorkerStatus]
    worker_id_contains: str
    filter_logic: FilterLogic
    page: PageRequest
    status_in_list: WorkerStatusList
    def __init__(self, status_in: _Optional[_Iterable[_Union[_types_pb2.WorkerStatus, str]]] = ..., worker_id_contains: _Optional[str] = ..., filter_logic: _Optional[_Union[FilterLogic, str]] = ..., page: _Optional[_Union[PageRequest, _Mapping]] = ..., status_in_list: _Optional[_Union[WorkerStatusList, _Mapping]] = ...) -> None: ...

class QueryWorkersResponse(_message.Message):
    __slots__ = ("workers", "limit", "offset", "total")
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[_types_pb2.Worker]
    limit: int
    offset: int
    total: int
    def __init__(self, workers: _Optional[_Iterable[_Union[_types_pb2.Worker, _Mapping]]] = ..., limit: _Optional[int] = ..., offset: _Optional[int] = ..., total: _Optional[int] = ...) -> None: ...

class GetWorkerRequest(_message.Message):
    __slots__ = ("worker_id",)
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ...) -> None: ...

class GetWorkerResponse(_message.Message):
    __slots__ = ("worker",)
    WORKER_FIELD_NUMBER: _ClassVar[int]
    worker: _types_pb2.Worker
    def __init__(self, worker: _Optional[_Union[_types_pb2.Worker, _Mapping]] = ...) -> None: ...

class UpdateWorkerRequest(_message.Message):
    __slots__ = ("worker_id", "heartbeat_stats_json")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_STATS_JSON_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    heartbeat_stats_json: str
    def __init__(self, worker_id: _Optional[str] = ..., heartbeat_stats_json: _Optional[str] = ...) -> None: ...

class UpdateWorkerResponse(_message.Message):
    __slots__ = ("worker",)
    WORKER_FIELD_NUMBER: _ClassVar[int]
    worker: _types_pb2.Worker
    def __init__(self, worker: _Optional[_Union[_types_pb2.Worker, _Mapping]] = ...) -> None: ...

class WatchRolloutCompletionsRequest(_message.Message):
    __slots__ = ("rollout_ids", "timeout")
    ROLLOUT_IDS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    rollout_ids: _containers.RepeatedScalarFieldContainer[str]
    timeout: _duration_pb2.Duration
    def __init__(self, rollout_ids: _Optional[_Iterable[str]] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class WatchRolloutCompletionsResponse(_message.Message):
    __slots__ = ("rollout",)
    ROLLOUT_FIELD_NUMBER: _ClassVar[int]
    rollout: _types_pb2.Rollout
    def __init__(self, rollout: _Optional[_Union[_types_pb2.Rollout, _Mapping]] = ...) -> None: ...

class WatchEventsRequest(_message.Message):
    __slots__ = ("after_seq", "kinds", "rollout_ids", "rollout_status_in", "attempt_status_in")
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_IDS_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_STATUS_IN_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_STATUS_IN_FIELD_NUMBER: _ClassVar[int]
    after_seq: int
    kinds: _containers.RepeatedScalarFieldContainer[_types_pb2.EventKind]
    rollout_ids: _containers.RepeatedScalarFieldContainer[str]
    rollout_status_in: _containers.RepeatedScalarFieldContainer[_types_pb2.RolloutStatus]
    attempt_status_in: _containers.RepeatedScalarFieldContainer[_types_pb2.AttemptStatus]
    def __init__(self, after_seq: _Optional[int] = ..., kinds: _Optional[_Iterable[_Union[_types_pb2.EventKind, str]]] = ..., rollout_ids: _Optional[_Iterable[str]] = ..., rollout_status_in: _Optional[_Iterable[_Union[_types_pb2.RolloutStatus, str]]] = ..., attempt_status_in: _Optional[_Iterable[_Union[_types_pb2.AttemptStatus, str]]] = ...) -> None: ...

class WatchEventsResponse(_message.Message):
    __slots__ = ("progress", "event")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    progress: WatchProgress
    event: _types_pb2.Event
    def __init__(self, progress: _Optional[_Union[WatchProgress, _Mapping]] = ..., event: _Optional[_Union[_types_pb2.Event, _Mapping]] = ...) -> None: ...

class WatchProgress(_message.Message):
    __slots__ = ("latest_seq", "oldest_retained_seq")
    LATEST_SEQ_FIELD_NUMBER: _ClassVar[int]
    OLDEST_RETAINED_SEQ_FIELD_NUMBER: _ClassVar[int]
    latest_seq: int
    oldest_retained_seq: int
    def __init__(self, latest_seq: _Optional[int] = ..., oldest_retained_seq: _Optional[int] = ...) -> None: ...

class WorkerSessionRequest(_message.Message):
    __slots__ = ("open", "release", "heartbeat")
    OPEN_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    open: OpenSession
    release: ReleaseAssignment
    heartbeat: SessionHeartbeat
    def __init__(self, open: _Optional[_Union[OpenSession, _Mapping]] = ..., release: _Optional[_Union[ReleaseAssignment, _Mapping]] = ..., heartbeat: _Optional[_Union[SessionHeartbeat, _Mapping]] = ...) -> None: ...

class OpenSession(_message.Message):
    __slots__ = ("worker_id", "slots")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    slots: int
    def __init__(self, worker_id: _Optional[str] = ..., slots: _Optional[int] = ...) -> None: ...

class ReleaseAssignment(_message.Message):
    __slots__ = ("rollout_id", "attempt_id")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    attempt_id: str
    def __init__(self, rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ...) -> None: ...

class SessionHeartbeat(_message.Message):
    __slots__ = ("heartbeat_stats_json",)
    HEARTBEAT_STATS_JSON_FIELD_NUMBER: _ClassVar[int]
    heartbeat_stats_json: str
    def __init__(self, heartbeat_stats_json: _Optional[str] = ...) -> None: ...

class WorkerSessionResponse(_message.Message):
    __slots__ = ("opened", "assignment", "revoked")
    OPENED_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    opened: SessionOpened
    assignment: Assignment
    revoked: Revocation
    def __init__(self, opened: _Optional[_Union[SessionOpened, _Mapping]] = ..., assignment: _Optional[_Union[Assignment, _Mapping]] = ..., revoked: _Optional[_Union[Revocation, _Mapping]] = ...) -> None: ...

class SessionOpened(_message.Message):
    __slots__ = ("worker_id", "adopted", "owner_epoch")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADOPTED_FIELD_NUMBER: _ClassVar[int]
    OWNER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    adopted: _containers.RepeatedCompositeFieldContainer[RolloutAttemptRef]
    owner_epoch: int
    def __init__(self, worker_id: _Optional[str] = ..., adopted: _Optional[_Iterable[_Union[RolloutAttemptRef, _Mapping]]] = ..., owner_epoch: _Optional[int] = ...) -> None: ...

class Assignment(_message.Message):
    __slots__ = ("rollout", "resources", "owner_epoch")
    ROLLOUT_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    OWNER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    rollout: _types_pb2.Rollout
    resources: _types_pb2.ResourcesUpdate
    owner_epoch: int
    def __init__(self, rollout: _Optional[_Union[_types_pb2.Rollout, _Mapping]] = ..., resources: _Optional[_Union[_types_pb2.ResourcesUpdate, _Mapping]] = ..., owner_epoch: _Optional[int] = ...) -> None: ...

class Revocation(_message.Message):
    __slots__ = ("rollout_id", "attempt_id", "reason")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    attempt_id: str
    reason: RevocationReason
    def __init__(self, rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ..., reason: _Optional[_Union[RevocationReason, str]] = ...) -> None: ...

class Namespace(_message.Message):
    __slots__ = ("name", "created", "span_retention", "quotas")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    SPAN_RETENTION_FIELD_NUMBER: _ClassVar[int]
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    name: str
    created: _timestamp_pb2.Timestamp
    span_retention: SpanRetention
    quotas: NamespaceQuotas
    def __init__(self, name: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., span_retention: _Optional[_Union[SpanRetention, _Mapping]] = ..., quotas: _Optional[_Union[NamespaceQuotas, _Mapping]] = ...) -> None: ...

class NamespaceQuotas(_message.Message):
    __slots__ = ("max_queued_rollouts", "max_spans", "max_span_bytes")
    MAX_QUEUED_ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    MAX_SPANS_FIELD_NUMBER: _ClassVar[int]
    MAX_SPAN_BYTES_FIELD_NUMBER: _ClassVar[int]
    max_queued_rollouts: int
    max_spans: int
    max_span_bytes: int
    def __init__(self, max_queued_rollouts: _Optional[int] = ..., max_spans: _Optional[int] = ..., max_span_bytes: _Optional[int] = ...) -> None: ...

class SpanRetention(_message.Message):
    __slots__ = ("max_age", "max_bytes")
    MAX_AGE_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    max_age: _duration_pb2.Duration
    max_bytes: int
    def __init__(self, max_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class CreateNamespaceRequest(_message.Message):
    __slots__ = ("name", "span_retention", "quotas")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SPAN_RETENTION_FIELD_NUMBER: _ClassVar[int]
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    name: str
    span_retention: SpanRetention
    quotas: NamespaceQuotas
    def __init__(self, name: _Optional[str] = ..., span_retention: _Optional[_Union[SpanRetention, _Mapping]] = ..., quotas: _Optional[_Union[NamespaceQuotas, _Mapping]] = ...) -> None: ...

class CreateNamespaceResponse(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: Namespace
    def __init__(self, namespace: _Optional[_Union[Namespace, _Mapping]] = ...) -> None: ...

class ListNamespacesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NamespaceSummary(_message.Message):
    __slots__ = ("namespace", "statistics", "stored_bytes")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    STATISTICS_FIELD_NUMBER: _ClassVar[int]
    STORED_BYTES_FIELD_NUMBER: _ClassVar[int]
    namespace: Namespace
    statistics: GetStatisticsResponse
    stored_bytes: int
    def __init__(self, namespace: _Optional[_Union[Namespace, _Mapping]] = ..., statistics: _Optional[_Union[GetStatisticsResponse, _Mapping]] = ..., stored_bytes: _Optional[int] = ...) -> None: ...

class ListNamespacesResponse(_message.Message):
    __slots__ = ("namespaces",)
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    namespaces: _containers.RepeatedCompositeFieldContainer[NamespaceSummary]
    def __init__(self, namespaces: _Optional[_Iterable[_Union[NamespaceSummary, _Mapping]]] = ...) -> None: ...

class DeleteNamespaceRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteNamespaceResponse(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: Namespace
    def __init__(self, namespace: _Optional[_Union[Namespace, _Mapping]] = ...) -> None: ...
