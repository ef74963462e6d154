//! The `LightningStoreService` gRPC adapter: each handler validates and
//! converts its request, calls the engine, and converts the result back.
//!
//! One file over 600 lines on purpose: tonic's service trait is implemented
//! in one `impl` block, one thin handler per RPC (32 of them); conversions
//! live in [`super::convert`], streams in [`super::streams`] and
//! [`super::worker_session`], the message size groups in
//! [`super::size_groups`].

use std::sync::Arc;
use std::time::Duration;

use tonic::{Request, Response, Status};

use super::caller::caller_of;
use super::convert::{self as c, ProtoEnum as _};
use super::status::status_of;
use super::streams::{self, RpcStream, SubscriberLimits};
use super::worker_session;
use crate::namespaces::{NamespaceServices, Namespaces};
use crate::transport::TransportLimits;
use lightning_store_core::engine::{AttemptPatch, AttemptUpdate, Engine, RolloutPatch};
use lightning_store_core::error::{StoreError, item_message};
use lightning_store_core::idempotency::checked_request_id;
use lightning_store_core::ids::{self, AttemptId, ResourcesId, RolloutId, WorkerId};
use lightning_store_core::limits::RequestLimits;
use lightning_store_core::model::{AttemptStatus, Json, RolloutStatus, WorkerStatus};
use lightning_store_core::namespace::{NamespaceName, NamespaceSettings};
use lightning_store_core::overview::{DEFAULT_FAILURES, MAX_FAILURES};
use lightning_store_core::query::{
    AttemptSelector, ResourcesFilter, RewardRange, RolloutFilter, SpanFilter, TextMatch,
    WorkerFilter,
};
use lightning_store_proto as pb;
use lightning_store_proto::lightning_store_service_server::LightningStoreService;

/// The gRPC face of the engine.
#[derive(Clone)]
pub struct StoreService {
    namespaces: Arc<Namespaces>,
    subscriber_limits: SubscriberLimits,
    /// The transport limits, reported by `GetCapabilities`.
    transport: TransportLimits,
    /// Writes the records of `ExportRollouts`.
    record_json: streams::RecordJson,
}

impl StoreService {
    /// Returns the service over the engines of `namespaces` and their
    /// worker sessions, within the `transport` limits, writing the records
    /// of exports with `record_json` (`crate::export::record_lines`).
    pub fn new(
        namespaces: Arc<Namespaces>,
        transport: TransportLimits,
        subscriber_timeout: Duration,
        record_json: streams::RecordJson,
    ) -> Self {
        Self {
            namespaces,
            subscriber_limits: SubscriberLimits::new(
                transport.max_subscribers,
                transport.subscriber_buffer_bytes,
                subscriber_timeout,
            ),
            transport,
            record_json,
        }
    }

    /// Returns the services of the namespace `request` names.
    async fn namespace<T>(&self, request: &Request<T>) -> Result<Arc<NamespaceServices>, Status> {
        self.namespaces
            .for_call(request.extensions())
            .await
            .map_err(status_of)
    }

    /// Allocates one sequence id per pair, looking the pairs up first unless
    /// the caller allows unknown ids (agent-lightning's stores never look).
    async fn allocate_sequence_ids(
        &self,
        engine: &Engine,
        pairs: &[(RolloutId, AttemptId)],
        allow_unknown: bool,
    ) -> Result<Vec<i64>, StoreError> {
        if allow_unknown {
            engine.next_sequence_ids_unchecked(pairs).await
        } else {
            engine.next_sequence_ids(pairs).await
        }
    }
}

/// The effective limits, as `GetCapabilities` reports them.
fn limits_to_proto(request: &RequestLimits, transport: &TransportLimits) -> pb::Limits {
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    pb::Limits {
        max_ids_per_list: count(request.max_ids_per_list),
        max_batch_items: count(request.max_batch_items),
        max_control_message_bytes: count(request.max_control_message_bytes),
        max_message_bytes: count(request.max_message_bytes),
        longest_wait: prost_types::Duration::try_from(request.longest_wait).ok(),
        max_id_bytes: count(ids::MAX_ID_LEN),
        max_connections: count(transport.max_connections),
        idle_timeout: prost_types::Duration::try_from(transport.idle_timeout).ok(),
        max_concurrent_streams: i64::from(transport.max_concurrent_streams),
        max_subscribers: count(transport.max_subscribers),
        subscriber_buffer_bytes: count(transport.subscriber_buffer_bytes),
    }
}

type RpcResult<T> = Result<Response<T>, Status>;

/// The receive limit a client announces by default: gRPC's 4 MiB.
const DEFAULT_RECEIVE_LIMIT: i64 = 4 * 1024 * 1024;

/// Returns the receive limit a batch write's client announced, checked
/// before anything is written.
fn receive_limit(max_response_bytes: Option<i64>) -> Result<usize, StoreError> {
    match max_response_bytes {
        None => Ok(DEFAULT_RECEIVE_LIMIT as usize),
        Some(limit) => usize::try_from(limit)
            .ok()
            .filter(|&limit| limit > 0)
            .ok_or_else(|| {
                StoreError::invalid(format!("max_response_bytes must be positive, got {limit}"))
            }),
    }
}

/// Returns the response with its items (`full` of the ids-only one) when the
/// client did not ask for ids only and it fits the client's receive limit,
/// else the ids-only one: a committed write's answer always reaches its
/// client.
fn within_receive_limit<T: prost::Message>(
    ids_only: bool,
    receive_limit: usize,
    ids: T,
    full: impl FnOnce(&T) -> T,
) -> T {
    if ids_only {
        return ids;
    }
    let full = full(&ids);
    if full.encoded_len() <= receive_limit {
        full
    } else {
        ids
    }
}

fn ok<T>(message: T) -> RpcResult<T> {
    Ok(Response::new(message))
}

/// Returns the field mask's paths, rejecting any not in `allowed`.
fn mask_paths<'a>(
    mask: Option<&'a prost_types::FieldMask>,
    allowed: &[&str],
) -> Result<Vec<&'a str>, StoreError> {
    let paths: Vec<&str> = mask
        .map(|m| m.paths.iter().map(String::as_str).collect())
        .unwrap_or_default();
    if let Some(bad) = paths.iter().find(|p| !allowed.contains(p)) {
        return Err(StoreError::invalid(format!(
            "update_mask path {bad:?} is not one of: {}",
            allowed.join(", ")
        )));
    }
    Ok(paths)
}

/// Reads an optional worker id.
fn opt_worker_id(worker_id: Option<String>) -> Result<Option<WorkerId>, StoreError> {
    worker_id
        .map(|id| WorkerId::parse("worker_id", id))
        .transpose()
}

/// Reads one attempt update.
fn attempt_update(request: pb::UpdateAttemptRequest) -> Result<AttemptUpdate, Status> {
    let rollout_id = RolloutId::parse("rollout_id", request.rollout_id).map_err(status_of)?;
    let attempt_id = AttemptId::parse("attempt_id", request.attempt_id).map_err(status_of)?;
    let paths = mask_paths(
        request.update_mask.as_ref(),
        &[
            "status",
            "worker_id",
            "last_heartbeat_time",
            "metadata_json",
        ],
    )
    .map_err(status_of)?;
    let mut patch = AttemptPatch::default();
    for path in paths {
        match path {
            "status" => {
                patch.status = Some(AttemptStatus::from_proto(request.status).map_err(status_of)?)
            }
            "worker_id" => {
                patch.worker_id = Some(
                    WorkerId::parse("worker_id", request.worker_id.clone()).map_err(status_of)?,
                );
            }
            "last_heartbeat_time" => {
                let time = request
                    .last_heartbeat_time
                    .as_ref()
                    .ok_or_else(|| {
                        StoreError::invalid("last_heartbeat_time is in update_mask but not set")
                    })
                    .map_err(status_of)?;
                patch.last_heartbeat_time =
                    Some(c::timestamp_from_proto("last_heartbeat_time", time).map_err(status_of)?);
            }
            _ => {
                patch.metadata = Some(
                    c::json_from_text("metadata_json", &request.metadata_json, Json::Null)
                        .map_err(status_of)?,
                )
            }
        }
    }
    Ok(AttemptUpdate {
        rollout_id,
        attempt_id,
        patch,
        owner_epoch: request.owner_epoch,
    })
}

fn text_match(exact: Option<String>, contains: Option<String>) -> TextMatch {
    TextMatch { exact, contains }
}

/// Returns the list a filter was given: the explicit list when given
/// (possibly empty: a condition nothing meets), else the legacy repeated
/// field, whose empty value means "no condition".
fn given_list<'a, V>(explicit: Option<&'a [V]>, legacy: &'a [V]) -> Option<&'a [V]> {
    match explicit {
        Some(values) => Some(values),
        None if legacy.is_empty() => None,
        None => Some(legacy),
    }
}

/// Converts a filter list (see [`given_list`]) item by item.
fn filter_list<T, V: Clone>(
    values: Option<&[V]>,
    convert: impl Fn(V) -> Result<T, StoreError>,
) -> Result<Option<Vec<T>>, StoreError> {
    values
        .map(|values| values.iter().cloned().map(convert).collect())
        .transpose()
}

#[tonic::async_trait]
impl LightningStoreService for StoreService {
    type WatchRolloutCompletionsStream = RpcStream<pb::WatchRolloutCompletionsResponse>;
    type WatchEventsStream = RpcStream<pb::WatchEventsResponse>;
    type WorkerSessionStream = RpcStream<pb::WorkerSessionResponse>;
    type ExportRolloutsStream = RpcStream<pb::ExportRolloutsResponse>;

    async fn watch_rollout_completions(
        &self,
        request: Request<pb::WatchRolloutCompletionsRequest>,
    ) -> RpcResult<Self::WatchRolloutCompletionsStream> {
        let ns = self.namespace(&request).await?;
        streams::watch_rollout_completions(
            &ns.engine,
            request.into_inner(),
            &self.subscriber_limits,
        )
        .await
        .map(Response::new)
    }

    async fn watch_events(
        &self,
        request: Request<pb::WatchEventsRequest>,
    ) -> RpcResult<Self::WatchEventsStream> {
        let ns = self.namespace(&request).await?;
        streams::watch_events(&ns.engine, request.into_inner(), &self.subscriber_limits)
            .await
            .map(Response::new)
    }

    async fn export_rollouts(
        &self,
        request: Request<pb::ExportRolloutsRequest>,
    ) -> RpcResult<Self::ExportRolloutsStream> {
        let ns = self.namespace(&request).await?;
        streams::export_rollouts(
            &ns.engine,
            request.into_inner(),
            &self.subscriber_limits,
            self.record_json,
        )
        .await
        .map(Response::new)
    }

    async fn worker_session(
        &self,
        request: Request<tonic::Streaming<pb::WorkerSessionRequest>>,
    ) -> RpcResult<Self::WorkerSessionStream> {
        let ns = self.namespace(&request).await?;
        let (_, extensions, inbound) = request.into_parts();
        worker_session::worker_session(&ns.engine, &ns.dispatcher, &extensions, inbound)
            .await
            .map(Response::new)
    }

    async fn get_capabilities(
        &self,
        request: Request<pb::GetCapabilitiesRequest>,
    ) -> RpcResult<pb::GetCapabilitiesResponse> {
        let ns = self.namespace(&request).await?;
        ok(pb::GetCapabilitiesResponse {
            thread_safe: true,
            async_safe: true,
            zero_copy: true,
            otlp_traces: true,
            limits: Some(limits_to_proto(ns.engine.limits(), &self.transport)),
        })
    }

    async fn get_statistics(
        &self,
        request: Request<pb::GetStatisticsRequest>,
    ) -> RpcResult<pb::GetStatisticsResponse> {
        let ns = self.namespace(&request).await?;
        let stats = ns.engine.statistics().await.map_err(status_of)?;
        ok(c::statistics_to_proto(stats))
    }

    async fn get_rollout_activity(
        &self,
        request: Request<pb::GetRolloutActivityRequest>,
    ) -> RpcResult<pb::GetRolloutActivityResponse> {
        let ns = self.namespace(&request).await?;
        let minutes = ns.engine.finished_per_minute().await.map_err(status_of)?;
        ok(pb::GetRolloutActivityResponse {
            minutes: minutes.iter().map(c::minute_to_proto).collect(),
        })
    }

    async fn get_training_summary(
        &self,
        request: Request<pb::GetTrainingSummaryRequest>,
    ) -> RpcResult<pb::GetTrainingSummaryResponse> {
        let ns = self.namespace(&request).await?;
        let (mode, versions) =
            c::training_request_from_proto(request.get_ref()).map_err(status_of)?;
        let summaries = ns
            .engine
            .training_summary(mode, versions)
            .await
            .map_err(status_of)?;
        ok(pb::GetTrainingSummaryResponse {
            versions: summaries.iter().map(c::version_summary_to_proto).collect(),
        })
    }

    async fn get_reward_timeline(
        &self,
        request: Request<pb::GetRewardTimelineRequest>,
    ) -> RpcResult<pb::GetRewardTimelineResponse> {
        let ns = self.namespace(&request).await?;
        let (mode, resolution, starts) =
            c::timeline_request_from_proto(request.get_ref()).map_err(status_of)?;
        let timeline = ns
            .engine
            .reward_timeline(mode, resolution, starts)
            .await
            .map_err(status_of)?;
        ok(c::timeline_to_proto(&timeline))
    }

    async fn compare_versions(
        &self,
        request: Request<pb::CompareVersionsRequest>,
    ) -> RpcResult<pb::CompareVersionsResponse> {
        let ns = self.namespace(&request).await?;
        let compared = c::comparison_request_from_proto(request.get_ref()).map_err(status_of)?;
        let comparison = ns
            .engine
            .compare_versions(
                compared.mode,
                compared.before,
                compared.after,
                compared.tasks,
            )
            .await
            .map_err(status_of)?;
        ok(c::comparison_to_proto(&comparison))
    }

    async fn get_queue_position(
        &self,
        request: Request<pb::GetQueuePositionRequest>,
    ) -> RpcResult<pb::GetQueuePositionResponse> {
        let ns = self.namespace(&request).await?;
        let rollout_id =
            RolloutId::parse("rollout_id", request.into_inner().rollout_id).map_err(status_of)?;
        let place = ns
            .engine
            .queue_place(&rollout_id)
            .await
            .map_err(status_of)?;
        ok(
            place.map_or_else(Default::default, |place| pb::GetQueuePositionResponse {
                queued: true,
                ahead: i64::try_from(place.ahead).unwrap_or(i64::MAX),
                queue_length: i64::try_from(place.queued).unwrap_or(i64::MAX),
                since: Some(c::timestamp_to_proto(place.since)),
            }),
        )
    }

    async fn list_recent_failures(
        &self,
        request: Request<pb::ListRecentFailuresRequest>,
    ) -> RpcResult<pb::ListRecentFailuresResponse> {
        let ns = self.namespace(&request).await?;
        let limit = match request.get_ref().limit {
            0 => DEFAULT_FAILURES,
            limit => usize::try_from(limit)
                .ok()
                .filter(|&l| l <= MAX_FAILURES)
                .ok_or_else(|| StoreError::invalid(format!("limit must be 0 to {MAX_FAILURES}")))
                .map_err(status_of)?,
        };
        let failures = ns.engine.latest_failures(limit).await.map_err(status_of)?;
        ok(pb::ListRecentFailuresResponse {
            failures: failures.iter().map(c::failure_to_proto).collect(),
        })
    }

    async fn start_rollout(
        &self,
        request: Request<pb::StartRolloutRequest>,
    ) -> RpcResult<pb::StartRolloutResponse> {
        let ns = self.namespace(&request).await?;
        let (_, extensions, request) = request.into_parts();
        let spec = c::spec_from_proto(request.rollout.as_ref()).map_err(status_of)?;
        let worker_id = opt_worker_id(request.worker_id).map_err(status_of)?;
        let view = ns
            .engine
            .start_rollout(spec, worker_id, &caller_of(&extensions))
            .await
            .map_err(status_of)?;
        ok(pb::StartRolloutResponse {
            rollout: Some(c::view_to_proto(&view)),
        })
    }

    async fn enqueue_rollout(
        &self,
        request: Request<pb::EnqueueRolloutRequest>,
    ) -> RpcResult<pb::EnqueueRolloutResponse> {
        let ns = self.namespace(&request).await?;
        let request = request.into_inner();
        let request_id = checked_request_id(request.request_id).map_err(status_of)?;
        let spec = c::spec_from_proto(request.rollout.as_ref()).map_err(status_of)?;
        let enqueued = ns
            .engine
            .enqueue_rollouts(vec![spec], request_id)
            .await
            .map_err(status_of)?;
        ok(pb::EnqueueRolloutResponse {
            rollout: enqueued.rollouts.first().map(c::rollout_to_proto),
        })
    }

    async fn enqueue_rollouts(
        &self,
        request: Request<pb::EnqueueRolloutsRequest>,
    ) -> RpcResult<pb::EnqueueRolloutsResponse> {
        let ns = self.namespace(&request).await?;
        let request = request.get_ref();
        let request_id = checked_request_id(request.request_id.clone()).map_err(status_of)?;
        let receive_limit = receive_limit(request.max_response_bytes).map_err(status_of)?;
        let specs = ns
            .engine
            .limits()
            .batch("rollouts", &request.rollouts)
            .map_err(status_of)?
            .iter()
            .map(|spec| c::spec_from_proto(Some(spec)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(status_of)?;
        let enqueued = ns
            .engine
            .enqueue_rollouts(specs, request_id)
            .await
            .map_err(status_of)?;
        let ids = pb::EnqueueRolloutsResponse {
            rollouts: Vec::new(),
            rollout_ids: enqueued.rollout_ids.clone(),
            ids_only: true,
            repeated: enqueued.repeated,
        };
        // A repeated request whose rollouts were deleted since answers with
        // their ids only.
        let complete = enqueued.rollouts.len() == enqueued.rollout_ids.len();
        ok(within_receive_limit(
            request.ids_only || !complete,
            receive_limit,
            ids,
            |ids| pb::EnqueueRolloutsResponse {
                rollouts: enqueued.rollouts.iter().map(c::rollout_to_proto).collect(),
                rollout_ids: ids.rollout_ids.clone(),
                ids_only: false,
                repeated: ids.repeated,
            },
        ))
    }

    async fn dequeue_rollout(
        &self,
        request: Request<pb::DequeueRolloutRequest>,
    ) -> RpcResult<pb::DequeueRolloutResponse> {
        let ns = self.namespace(&request).await?;
        let (_, extensions, request) = request.into_parts();
        let worker_id = opt_worker_id(request.worker_id).map_err(status_of)?;
        let wait = c::duration_from_proto("wait", request.wait.as_ref())
            .map_err(status_of)?
            .unwrap_or_default();
        let claimed = ns
            .engine
            .dequeue(1, worker_id, wait, &caller_of(&extensions))
            .await
            .map_err(status_of)?;
        ok(pb::DequeueRolloutResponse {
            rollout: claimed.first().map(c::view_to_proto),
        })
    }

    async fn dequeue_rollouts(
        &self,
        request: Request<pb::DequeueRolloutsRequest>,
    ) -> RpcResult<pb::DequeueRolloutsResponse> {
        let ns = self.namespace(&request).await?;
        let (_, extensions, request) = request.into_parts();
        // Absent (0) claims one, as DequeueRollout; the engine checks the range.
        let limit = match request.limit {
            0 => 1,
            n => n,
        };
        let worker_id = opt_worker_id(request.worker_id).map_err(status_of)?;
        let wait = c::duration_from_proto("wait", request.wait.as_ref())
            .map_err(status_of)?
            .unwrap_or_default();
        let claimed = ns
            .engine
            .dequeue(limit, worker_id, wait, &caller_of(&extensions))
            .await
            .map_err(status_of)?;
        ok(pb::DequeueRolloutsResponse {
            rollouts: claimed.iter().map(c::view_to_proto).collect(),
        })
    }

    async fn start_attempt(
        &self,
        request: Request<pb::StartAttemptRequest>,
    ) -> RpcResult<pb::StartAttemptResponse> {
        let ns = self.namespace(&request).await?;
        let (_, extensions, request) = request.into_parts();
        let rollout_id = RolloutId::parse("rollout_id", request.rollout_id).map_err(status_of)?;
        let worker_id = opt_worker_id(request.worker_id).map_err(status_of)?;
        let view = ns
            .engine
            .start_attempt(&rollout_id, worker_id, &caller_of(&extensions))
            .await
            .map_err(status_of)?;
        ok(pb::StartAttemptResponse {
            rollout: Some(c::view_to_proto(&view)),
        })
    }

    async fn add_span(
        &self,
        request: Request<pb::AddSpanRequest>,
    ) -> RpcResult<pb::AddSpanResponse> {
        let ns = self.namespace(&request).await?;
        let request = request.into_inner();
        let span = request
            .span
            .ok_or_else(|| StoreError::invalid("span is required"))
            .map_err(status_of)?;
        let added = ns
            .engine
            .add_spans(
                vec![c::span_from_proto(span).map_err(status_of)?],
                request.owner_epoch,
            )
            .await
            .map_err(status_of)?;
        ok(pb::AddSpanResponse {
            span: added.spans.first().map(|span| c::span_to_proto(span)),
        })
    }

    async fn add_spans(
        &self,
        request: Request<pb::AddSpansRequest>,
    ) -> RpcResult<pb::AddSpansResponse> {
        let ns = self.namespace(&request).await?;
        let request = request.into_inner();
        let receive_limit = receive_limit(request.max_response_bytes).map_err(status_of)?;
        let spans = ns
            .engine
            .limits()
            .batch("spans", request.spans)
            .map_err(status_of)?
            .into_iter()
            .map(c::span_from_proto)
            .collect::<Result<Vec<_>, _>>()
            .map_err(status_of)?;
        let added = ns
            .engine
            .add_spans(spans, request.owner_epoch)
            .await
            .map_err(status_of)?;
        let ids = pb::AddSpansResponse {
            spans: Vec::new(),
            duplicates: i64::try_from(added.duplicates).unwrap_or(i64::MAX),
            sequence_ids: added.spans.iter().map(|span| span.sequence_id).collect(),
            ids_only: true,
        };
        ok(within_receive_limit(
            request.ids_only,
            receive_limit,
            ids,
            |ids| pb::AddSpansResponse {
                spans: added
                    .spans
                    .iter()
                    .map(|span| c::span_to_proto(span))
                    .collect(),
                duplicates: ids.duplicates,
                sequence_ids: ids.sequence_ids.clone(),
                ids_only: false,
            },
        ))
    }

    async fn get_next_span_sequence_id(
        &self,
        request: Request<pb::GetNextSpanSequenceIdRequest>,
    ) -> RpcResult<pb::GetNextSpanSequenceIdResponse> {
        let ns = self.namespace(&request).await?;
        let request = request.into_inner();
        let pair = (
            RolloutId::parse("rollout_id", request.rollout_id).map_err(status_of)?,
            AttemptId::parse("attempt_id", request.attempt_id).map_err(status_of)?,
        );
        let ids = self
            .allocate_sequence_ids(&ns.engine, &[pair], request.allow_unknown)
            .await
            .map_err(status_of)?;
        ok(pb::GetNextSpanSequenceIdResponse {
            sequence_id: ids[0],
        })
    }

    async fn get_span_sequence_ids(
        &self,
        request: Request<pb::GetSpanSequenceIdsRequest>,
    ) -> RpcResult<pb::GetSpanSequenceIdsResponse> {
        let ns = self.namespace(&request).await?;
        let request = request.into_inner();
        let pairs = ns
            .engine
            .limits()
            .batch("attempts", request.attempts)
            .map_err(status_of)?
            .into_iter()
            .map(|r| {
                Ok((
                    RolloutId::parse("rollout_id", r.rollout_id)?,
                    AttemptId::parse("attempt_id", r.attempt_id)?,
                ))
            })
            .collect::<Result<Vec<_>, StoreError>>()
            .map_err(status_of)?;
        let sequence_ids = self
            .allocate_sequence_ids(&ns.engine, &pairs, request.allow_unknown)
            .await
            .map_err(status_of)?;
        ok(pb::GetSpanSequenceIdsResponse { sequence_ids })
    }

    async fn query_rollouts(
        &self,
        request: Request<pb::QueryRolloutsRequest>,
    ) -> RpcResult<pb::QueryRolloutsResponse> {
        let ns = self.namespace(&request).await?;
        let request = request.into_inner();
        // The id list's length is checked before anything is converted.
        let rollout_ids = given_list(
            request
                .rollout_id_in_list
                .as_ref()
                .map(|l| l.values.as_slice()),
            &request.rollout_id_in,
        )
        .map(|ids| ns.engine.limits().ids("rollout_id_in", ids))
        .transpose()
        .map_err(status_of)?;
        let filter = RolloutFilter {
            status_in: filter_list(
                given_list(
                    request.status_in_list.as_ref().map(|l| l.values.as_slice()),
                    &request.status_in,
                ),
                RolloutStatus::from_proto,
            )
            .map_err(status_of)?,
            rollout_id_in: rollout_ids.map(<[String]>::to_vec),
            rollout_id_contains: request.rollout_id_contains,
            logic: c::filter_logic_from_proto(request.filter_logic).map_err(status_of)?,
            mode_in: filter_list(given_list(None, &request.mode_in), c::mode_from_proto)
                .map_err(status_of)?,
            start_time: c::time_range_from_proto(
                "start_time",
                request.start_time_from,
                request.start_time_until,
            )
            .map_err(status_of)?,
            end_time: c::time_range_from_proto(
                "end_time",
                request.end_time_from,
                request.end_time_until,
            )
            .map_err(status_of)?,
            worker_id: request.worker_id,
            resources_id: request.resources_id,
            model_version: request.model_version,
            without_rows: c::without_rows_from_proto(request.without_training_rows)
                .map_err(status_of)?,
            reward: RewardRange::new(request.reward_min, request.reward_max).map_err(status_of)?,
            ..RolloutFilter::default()
        };
        let page = c::page_from_proto(request.page.as_ref()).map_err(status_of)?;
        let result = ns
            .engine
            .query_rewarded_rollouts(&filter, &page)
            .await
            .map_err(status_of)?;
        let (limit, offset, total) = c::page_bounds(&result.rollouts);
        ok(pb::QueryRolloutsResponse {
            rollouts: result.rollouts.items.iter().map(c::view_to_proto).collect(),
            limit,
            offset,
            total,
            rewards: result.rewards.into_iter().collect(),
        })
    }

    async fn get_rollout(
        &self,
        request: Request<pb::GetRolloutRequest>,
    ) -> RpcResult<pb::GetRolloutResponse> {
        let ns = self.namespace(&request).await?;
        let rollout_id =
            RolloutId::parse("rollout_id", request.into_inner().rollout_id).map_err(status_of)?;
        let view = ns
            .engine
            .get_rollout(&rollout_id)
            .await
            .map_err(status_of)?;
        ok(pb::GetRolloutResponse {
            rollout: Some(c::view_to_proto(&view)),
        })
    }

    async fn update_rollout(
        &self,
        request: Request<pb::UpdateRolloutRequest>,
    ) -> RpcResult<pb::UpdateRolloutResponse> {
        let ns = self.namespace(&request).await?;
        let request = request.into_inner();
        let rollout_id =
            RolloutId::parse("rollout_id", request.rollout_id.clone()).map_err(status_of)?;
        let paths = mask_paths(
            request.update_mask.as_ref(),
            &[
                "input_json",
                "mode",
                "resources_id",
                "status",
                "config",
                "metadata_json",
            ],
        )
        .map_err(status_of)?;
        let mut patch = RolloutPatch::default();
        for path in paths {
            match path {
                "input_json" => {
                    patch.input = Some(
                        c::json_from_text("input_json", &request.input_json, Json::Null)
                            .map_err(status_of)?,
                    )
                }
                "mode" => patch.mode = Some(c::mode_from_proto(request.mode).map_err(status_of)?),
                "resources_id" => patch.resources_id = Some(request.resources_id.clone()),
                "status" => {
                    patch.status =
                        Some(RolloutStatus::from_proto(request.status).map_err(status_of)?)
                }
                "config" => {
                    let config = request
                        .config
                        .as_ref()
                        .ok_or_else(|| StoreError::invalid("config is in update_mask but not set"))
                        .map_err(status_of)?;
                    patch.config = Some(c::config_from_proto(Some(config)).map_err(status_of)?);
                }
                _ => {
                    patch.metadata = Some(
                        c::json_from_text("metadata_json", &request.metadata_json, Json::Null)
                            .map_err(status_of)?,
                    )
                }
            }
        }
        let rollout = ns
            .engine
            .update_rollout(&rollout_id, patch)
            .await
            .map_err(status_of)?;
        ok(pb::UpdateRolloutResponse {
            rollout: Some(c::rollout_to_proto(&rollout)),
        })
    }

    async fn query_attempts(
        &self,
        request: Request<pb::QueryAttemptsRequest>,
    ) -> RpcResult<pb::QueryAttemptsResponse> {
        let ns = self.namespace(&request).await?;
        let request = request.into_inner();
        let rollout_id = RolloutId::parse("rollout_id", request.rollout_id).map_err(status_of)?;
        let page = c::page_from_proto(request.page.as_ref()).map_err(status_of)?;
        let result = ns
            .engine
            .query_attempts(&rollout_id, &page)
            .await
            .map_err(status_of)?;
        let (limit, offset, total) = c::page_bounds(&result);
        ok(pb::QueryAttemptsResponse {
            attempts: result.items.iter().map(c::attempt_to_proto).collect(),
            limit,
            offset,
            total,
        })
    }

    async fn get_latest_attempt(
        &self,
        request: Request<pb::GetLatestAttemptRequest>,
    ) -> RpcResult<pb::GetLatestAttemptResponse> {
        let ns = self.namespace(&request).await?;
        let rollout_id =
            RolloutId::parse("rollout_id", request.into_inner().rollout_id).map_err(status_of)?;
        let attempt = ns
            .engine
            .latest_attempt(&rollout_id)
            .await
            .map_err(status_of)?;
        ok(pb::GetLatestAttemptResponse {
            attempt: attempt.as_ref().map(c::attempt_to_proto),
        })
    }

    async fn update_attempt(
        &self,
        request: Request<pb::UpdateAttemptRequest>,
    ) -> RpcResult<pb::UpdateAttemptResponse> {
        let ns = self.namespace(&request).await?;
        let (_, extensions, request) = request.into_parts();
        let update = attempt_update(request)?;
        let attempt = ns
            .engine
            .update_attempt(
                &update.rollout_id,
                &update.attempt_id,
                update.patch,
                update.owner_epoch,
                &caller_of(&extensions),
            )
            .await
            .map_err(status_of)?;
        ok(pb::UpdateAttemptResponse {
            attempt: Some(c::attempt_to_proto(&attempt)),
        })
    }

    async fn update_attempts(
        &self,
        request: Request<pb::UpdateAttemptsRequest>,
    ) -> RpcResult<pb::UpdateAttemptsResponse> {
        let ns = self.namespace(&request).await?;
        let (_, extensions, request) = request.into_parts();
        let updates = ns
            .engine
            .limits()
            .batch("updates", request.updates)
            .map_err(status_of)?
            .into_iter()
            .enumerate()
            .map(|(index, update)| {
                attempt_update(update).map_err(|status| {
                    Status::new(
                        status.code(),
                        item_message("updates", index, status.message()),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let attempts = ns
            .engine
            .update_attempts(updates, &caller_of(&extensions))
            .await
            .map_err(status_of)?;
        ok(pb::UpdateAttemptsResponse {
            attempts: attempts.iter().map(c::attempt_to_proto).collect(),
        })
    }

    async fn wait_for_rollouts(
        &self,
        request: Request<pb::WaitForRolloutsRequest>,
    ) -> RpcResult<pb::WaitForRolloutsResponse> {
        let ns = self.namespace(&request).await?;
        let request = request.into_inner();
        let rollout_ids = ids::parse_all(
            "rollout_ids",
            ns.engine
                .limits()
                .ids("rollout_ids", request.rollout_ids)
                .map_err(status_of)?,
        )
        .map_err(status_of)?;
        let timeout: Option<Duration> =
            c::duration_from_proto("timeout", request.timeout.as_ref()).map_err(status_of)?;
        let rollouts = ns
            .engine
            .wait_for_rollouts(&rollout_ids, timeout)
            .await
            .map_err(status_of)?;
        ok(pb::WaitForRolloutsResponse {
            rollouts: rollouts.iter().map(c::rollout_to_proto).collect(),
        })
    }

    async fn query_spans(
        &self,
        request: Request<pb::QuerySpansRequest>,
    ) -> RpcResult<pb::QuerySpansResponse> {
        let ns = self.namespace(&request).await?;
        let request = request.into_inner();
        let attempt = match request.attempt_id.as_deref() {
            None => AttemptSelector::All,
            Some(ids::LATEST) => AttemptSelector::Latest,
            Some(attempt_id) => AttemptSelector::Id(attempt_id.to_owned()),
        };
        let filter = SpanFilter {
            rollout_id: request.rollout_id,
            attempt,
            trace_id: text_match(request.trace_id, request.trace_id_contains),
            span_id: text_match(request.span_id, request.span_id_contains),
            parent_id: text_match(request.parent_id, request.parent_id_contains),
            name: text_match(request.name, request.name_contains),
            logic: c::filter_logic_from_proto(request.filter_logic).map_err(status_of)?,
        };
        let page = c::page_from_proto(request.page.as_ref()).map_err(status_of)?;
        let result = ns
            .engine
            .query_spans(filter, &page)
            .await
            .map_err(status_of)?;
        let (limit, offset, total) = c::page_bounds(&result);
        ok(pb::QuerySpansResponse {
            spans: result
                .items
                .iter()
                .map(|span| c::span_to_proto(span))
                .collect(),
            limit,
            offset,
            total,
        })
    }

    async fn add_resources(
        &self,
        request: Request<pb::AddResourcesRequest>,
    ) -> RpcResult<pb::AddResourcesResponse> {
        let ns = self.namespace(&request).await?;
        let resources =
            c::resources_from_text(&request.get_ref().resources_json).map_err(status_of)?;
        let update = ns
            .engine
            .add_resources(resources)
            .await
            .map_err(status_of)?;
        ok(pb::AddResourcesResponse {
            resources: Some(c::resources_to_proto(&update)),
        })
    }

    async fn update_resources(
        &self,
        request: Request<pb::UpdateResourcesRequest>,
    ) -> RpcResult<pb::UpdateResourcesResponse> {
        let ns = self.namespace(&request).await?;
        let request = request.into_inner();
        let resources_id =
            ResourcesId::parse("resources_id", request.resources_id).map_err(status_of)?;
        let resources = c::resources_from_text(&request.resources_json).map_err(status_of)?;
        let update = ns
            .engine
            .update_resources(&resources_id, resources)
            .await
            .map_err(status_of)?;
        ok(pb::UpdateResourcesResponse {
            resources: Some(c::resources_to_proto(&update)),
        })
    }

    async fn get_resources(
        &self,
        request: Request<pb::GetResourcesRequest>,
    ) -> RpcResult<pb::GetResourcesResponse> {
        let ns = self.namespace(&request).await?;
        let resources_id = ResourcesId::parse("resources_id", request.into_inner().resources_id)
            .map_err(status_of)?;
        let update = ns
            .engine
            .get_resources(&resources_id)
            .await
            .map_err(status_of)?;
        ok(pb::GetResourcesResponse {
            resources: Some(c::resources_to_proto(&update)),
        })
    }

    async fn get_latest_resources(
        &self,
        request: Request<pb::GetLatestResourcesRequest>,
    ) -> RpcResult<pb::GetLatestResourcesResponse> {
        let ns = self.namespace(&request).await?;
        let update = ns.engine.latest_resources().await.map_err(status_of)?;
        ok(pb::GetLatestResourcesResponse {
            resources: update.as_ref().map(c::resources_to_proto),
        })
    }

    async fn query_resources(
        &self,
        request: Request<pb::QueryResourcesRequest>,
    ) -> RpcResult<pb::QueryResourcesResponse> {
        let ns = self.namespace(&request).await?;
        let request = request.into_inner();
        let filter = ResourcesFilter {
            resources_id: request.resources_id,
            resources_id_contains: request.resources_id_contains,
        };
        let page = c::page_from_proto(request.page.as_ref()).map_err(status_of)?;
        let result = ns
            .engine
            .query_resources(&filter, &page)
            .await
            .map_err(status_of)?;
        let (limit, offset, total) = c::page_bounds(&result);
        ok(pb::QueryResourcesResponse {
            resources: result.items.iter().map(c::resources_to_proto).collect(),
            limit,
            offset,
            total,
        })
    }

    async fn query_workers(
        &self,
        request: Request<pb::QueryWorkersRequest>,
    ) -> RpcResult<pb::QueryWorkersResponse> {
        let ns = self.namespace(&request).await?;
        let request = request.into_inner();
        let filter = WorkerFilter {
            status_in: filter_list(
                given_list(
                    request.status_in_list.as_ref().map(|l| l.values.as_slice()),
                    &request.status_in,
                ),
                WorkerStatus::from_proto,
            )
            .map_err(status_of)?,
            worker_id_contains: request.worker_id_contains,
            logic: c::filter_logic_from_proto(request.filter_logic).map_err(status_of)?,
        };
        let page = c::page_from_proto(request.page.as_ref()).map_err(status_of)?;
        let result = ns
            .engine
            .query_workers(&filter, &page)
            .await
            .map_err(status_of)?;
        let (limit, offset, total) = c::page_bounds(&result);
        ok(pb::QueryWorkersResponse {
            workers: result.items.iter().map(c::worker_to_proto).collect(),
            limit,
            offset,
            total,
        })
    }

    async fn get_worker(
        &self,
        request: Request<pb::GetWorkerRequest>,
    ) -> RpcResult<pb::GetWorkerResponse> {
        let ns = self.namespace(&request).await?;
        let worker_id =
            WorkerId::parse("worker_id", request.into_inner().worker_id).map_err(status_of)?;
        let worker = ns.engine.get_worker(&worker_id).await.map_err(status_of)?;
        ok(pb::GetWorkerResponse {
            worker: Some(c::worker_to_proto(&worker)),
        })
    }

    async fn update_worker(
        &self,
        request: Request<pb::UpdateWorkerRequest>,
    ) -> RpcResult<pb::UpdateWorkerResponse> {
        let ns = self.namespace(&request).await?;
        let (_, extensions, request) = request.into_parts();
        let worker_id = WorkerId::parse("worker_id", request.worker_id).map_err(status_of)?;
        let stats = match &request.heartbeat_stats_json {
            None => None,
            Some(text) => match c::json_from_text("heartbeat_stats_json", text, Json::Null)
                .map_err(status_of)?
            {
                Json::Null => {
                    return Err(status_of(StoreError::invalid(
                        "heartbeat_stats_json must not be null",
                    )));
                }
                stats => Some(stats),
            },
        };
        let worker = ns
            .engine
            .update_worker(&worker_id, stats, &caller_of(&extensions))
            .await
            .map_err(status_of)?;
        ok(pb::UpdateWorkerResponse {
            worker: Some(c::worker_to_proto(&worker)),
        })
    }

    async fn create_namespace(
        &self,
        request: Request<pb::CreateNamespaceRequest>,
    ) -> RpcResult<pb::CreateNamespaceResponse> {
        let request = request.into_inner();
        let name = NamespaceName::parse(request.name).map_err(status_of)?;
        let settings = NamespaceSettings {
            retention: c::retention_from_proto(request.span_retention.as_ref())
                .map_err(status_of)?,
            quotas: c::quotas_from_proto(request.quotas.as_ref()).map_err(status_of)?,
        };
        let namespace = self
            .namespaces
            .create(&name, settings)
            .await
            .map_err(status_of)?;
        ok(pb::CreateNamespaceResponse {
            namespace: Some(c::namespace_to_proto(&namespace)),
        })
    }

    async fn list_namespaces(
        &self,
        _request: Request<pb::ListNamespacesRequest>,
    ) -> RpcResult<pb::ListNamespacesResponse> {
        let listed = self.namespaces.list().await.map_err(status_of)?;
        let mut namespaces = Vec::with_capacity(listed.len());
        for namespace in listed {
            let services = match self.namespaces.resolve(&namespace.name).await {
                Ok(services) => services,
                // Deleted since it was listed.
                Err(StoreError::NotFound(_)) => continue,
                Err(error) => return Err(status_of(error)),
            };
            let statistics = services.engine.statistics().await.map_err(status_of)?;
            let stored_bytes = self
                .namespaces
                .stored_bytes(&namespace)
                .await
                .map_err(status_of)?;
            namespaces.push(pb::NamespaceSummary {
                namespace: Some(c::namespace_to_proto(&namespace)),
                statistics: Some(c::statistics_to_proto(statistics)),
                stored_bytes: i64::try_from(stored_bytes).unwrap_or(i64::MAX),
            });
        }
        ok(pb::ListNamespacesResponse { namespaces })
    }

    async fn delete_namespace(
        &self,
        request: Request<pb::DeleteNamespaceRequest>,
    ) -> RpcResult<pb::DeleteNamespaceResponse> {
        let name = NamespaceName::parse(request.into_inner().name).map_err(status_of)?;
        let namespace = self.namespaces.delete(&name).await.map_err(status_of)?;
        ok(pb::DeleteNamespaceResponse {
            namespace: Some(c::namespace_to_proto(&namespace)),
        })
    }
}
