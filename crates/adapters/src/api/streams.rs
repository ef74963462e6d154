//! The server-streaming RPCs: completion watches, event subscriptions and
//! exports (worker sessions are in [`super::worker_session`]). Each stream
//! is pumped by its own task into a bounded channel; a client that reads
//! too slowly is cut off instead of slowing anyone else.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use prost::Message as _;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;
use tonic::metadata::MetadataValue;

use super::convert::{self as c, ProtoEnum as _};
use super::status::status_of;
use super::subscribers::Outbox;
pub use super::subscribers::SubscriberLimits;
use lightning_store_core::engine::Engine;
use lightning_store_core::error::StoreError;
use lightning_store_core::error::StoreResult;
use lightning_store_core::events::Event;
use lightning_store_core::export::{Cursor, Layout, RolloutRecord};
use lightning_store_core::ids::{self, RolloutId};
use lightning_store_core::limits::RequestLimits;
use lightning_store_core::model::{AttemptStatus, RolloutStatus};
use lightning_store_core::query::RolloutFilter;
use lightning_store_core::subscription::{EventFilter, SubscriptionError};
use lightning_store_proto as pb;

/// A server stream as tonic wants it.
pub type RpcStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// Trailer carrying the last event sequence number a subscriber received.
pub const LAST_SEQ_TRAILER: &str = "lightningstore-last-seq";

pub(super) fn stream_of<T: Send + 'static>(
    receiver: mpsc::Receiver<Result<T, Status>>,
) -> RpcStream<T> {
    Box::pin(ReceiverStream::new(receiver))
}

pub(super) fn closing_status() -> Status {
    status_of(StoreError::shutting_down())
}

fn subscription_status(error: SubscriptionError) -> Status {
    match error {
        SubscriptionError::HistoryGone { .. } | SubscriptionError::Ahead { .. } => {
            Status::out_of_range(error.to_string())
        }
        SubscriptionError::Closing => closing_status(),
        SubscriptionError::Store(error) => status_of(error),
    }
}

/// Adds the resume position to a status that ends a subscription.
fn with_last_seq(status: Status, last_seq: u64) -> Status {
    let message = format!("{}; resume with after_seq={last_seq}", status.message());
    let mut status = Status::new(status.code(), message);
    if let Ok(value) = MetadataValue::try_from(last_seq.to_string()) {
        status.metadata_mut().insert(LAST_SEQ_TRAILER, value);
    }
    status
}

/// Streams each watched rollout once it is terminal.
pub async fn watch_rollout_completions(
    engine: &Arc<Engine>,
    request: pb::WatchRolloutCompletionsRequest,
    limits: &SubscriberLimits,
) -> Result<RpcStream<pb::WatchRolloutCompletionsResponse>, Status> {
    let rollout_ids = ids::parse_all(
        "rollout_ids",
        engine
            .limits()
            .ids("rollout_ids", request.rollout_ids)
            .map_err(status_of)?,
    )
    .map_err(status_of)?;
    let timeout = c::duration_from_proto("timeout", request.timeout.as_ref()).map_err(status_of)?;
    let deadline = engine
        .limits()
        .deadline_after(timeout.unwrap_or(Duration::MAX));
    let place = limits.admit()?;
    let mut watch = engine
        .watch_completions(rollout_ids)
        .await
        .map_err(status_of)?;
    let (sender, receiver) = mpsc::channel(64);
    tokio::spawn(async move {
        let _place = place;
        loop {
            let next = tokio::select! {
                next = watch.next() => next,
                _ = tokio::time::sleep_until(deadline) => {
                    let _ = sender.send(Err(Status::deadline_exceeded("the watch timed out before every rollout finished"))).await;
                    return;
                }
                _ = sender.closed() => return,
            };
            let item = match next {
                Ok(Some(view)) => Ok(pb::WatchRolloutCompletionsResponse {
                    rollout: Some(c::view_to_proto(&view)),
                }),
                Ok(None) => return,
                Err(error) => Err(subscription_status(error)),
            };
            let failed = item.is_err();
            if sender.send(item).await.is_err() || failed {
                return;
            }
        }
    });
    Ok(stream_of(receiver))
}

fn event_filter(
    request: &pb::WatchEventsRequest,
    limits: &RequestLimits,
) -> Result<EventFilter, StoreError> {
    let rollout_ids = limits.ids("rollout_ids", request.rollout_ids.as_slice())?;
    let list = |values: &[i32]| !values.is_empty();
    Ok(EventFilter {
        kinds: list(&request.kinds)
            .then(|| {
                request
                    .kinds
                    .iter()
                    .map(|&k| c::event_kind_from_proto(k))
                    .collect()
            })
            .transpose()?,
        rollout_ids: list_of_ids(rollout_ids)?,
        rollout_status_in: list(&request.rollout_status_in)
            .then(|| {
                request
                    .rollout_status_in
                    .iter()
                    .map(|&s| RolloutStatus::from_proto(s))
                    .collect()
            })
            .transpose()?,
        attempt_status_in: list(&request.attempt_status_in)
            .then(|| {
                request
                    .attempt_status_in
                    .iter()
                    .map(|&s| AttemptStatus::from_proto(s))
                    .collect()
            })
            .transpose()?,
    })
}

fn list_of_ids(
    rollout_ids: &[String],
) -> Result<Option<std::collections::HashSet<RolloutId>>, StoreError> {
    if rollout_ids.is_empty() {
        return Ok(None);
    }
    rollout_ids
        .iter()
        .map(|r| RolloutId::parse("rollout_ids", r.clone()))
        .collect::<Result<_, _>>()
        .map(Some)
}

/// Streams the store's events after a position; see the proto for the contract.
pub async fn watch_events(
    engine: &Arc<Engine>,
    request: pb::WatchEventsRequest,
    limits: &SubscriberLimits,
) -> Result<RpcStream<pb::WatchEventsResponse>, Status> {
    let filter = event_filter(&request, engine.limits()).map_err(status_of)?;
    let place = limits.admit()?;
    let mut subscription = engine
        .subscribe(request.after_seq)
        .await
        .map_err(subscription_status)?;
    // Everything up to here is delivered or filtered out: a resume point.
    let mut resume_from = subscription.last_seq();
    let (mut outbox, stream) = Outbox::new(limits.buffer_bytes, resume_from);
    let progress = Outgoing::Progress(pb::WatchProgress {
        latest_seq: subscription.start_latest,
        oldest_retained_seq: subscription.start_oldest,
    });
    let bytes = progress.to_proto().encoded_len();
    outbox.push(progress, bytes, resume_from);
    let timeout = limits.timeout;
    tokio::spawn(async move {
        // Held until the pump ends: a cut-off subscriber frees its place.
        let _place = place;
        loop {
            let next = tokio::select! {
                next = subscription.next() => next,
                () = outbox.gone() => return,
            };
            let event = match next {
                Ok(event) => event,
                Err(error) => {
                    outbox.finish(with_last_seq(subscription_status(error), resume_from));
                    return;
                }
            };
            let seq = event.seq;
            if filter.matches(&event.change) {
                let message = Outgoing::Event(event);
                let bytes = message.to_proto().encoded_len();
                // A subscriber that stays behind is cut off, never waited for.
                if !outbox.wait_for_room(bytes, timeout).await {
                    outbox.cut_off(|delivered| {
                        tracing::info!(
                            resume_from = delivered,
                            "event subscriber too slow, disconnecting"
                        );
                        with_last_seq(
                            Status::resource_exhausted("the subscriber reads events too slowly"),
                            delivered,
                        )
                    });
                    return;
                }
                outbox.push(message, bytes, seq);
            }
            resume_from = seq;
        }
    });
    Ok(Box::pin(tokio_stream::StreamExt::map(stream, |message| {
        message.map(|message| message.to_proto())
    })))
}

/// Writes a rollout's records in a layout as lines of JSON, only the last
/// carrying the cursor: `crate::export`'s writer, given to the service
/// where it is built.
pub type RecordJson = fn(Layout, &RolloutRecord) -> StoreResult<Vec<String>>;

/// An export's records are sent in batches of about this many bytes.
const EXPORT_BATCH_BYTES: usize = 256 * 1024;

fn export_layout(layout: i32) -> Result<Layout, Status> {
    match pb::ExportLayout::try_from(layout) {
        Ok(pb::ExportLayout::Unspecified | pb::ExportLayout::Rollouts) => Ok(Layout::Rollouts),
        Ok(pb::ExportLayout::Triplets) => Ok(Layout::Triplets),
        Ok(pb::ExportLayout::Messages) => Ok(Layout::Messages),
        Err(_) => Err(Status::invalid_argument(format!(
            "layout: unknown export layout {layout}"
        ))),
    }
}

fn export_filter(request: &pb::ExportRolloutsRequest) -> Result<RolloutFilter, StoreError> {
    let list = |values: &[i32]| !values.is_empty();
    Ok(RolloutFilter {
        status_in: list(&request.status_in)
            .then(|| {
                request
                    .status_in
                    .iter()
                    .map(|&s| RolloutStatus::from_proto(s))
                    .collect()
            })
            .transpose()?,
        mode_in: list(&request.mode_in)
            .then(|| {
                request
                    .mode_in
                    .iter()
                    .map(|&m| c::mode_from_proto(m))
                    .collect()
            })
            .transpose()?,
        start_time: c::time_range_from_proto(
            "start_time",
            request.start_time_from,
            request.start_time_until,
        )?,
        end_time: c::time_range_from_proto(
            "end_time",
            request.end_time_from,
            request.end_time_until,
        )?,
        resources_id: request.resources_id.clone(),
        worker_id: request.worker_id.clone(),
        rollout_id_contains: request.rollout_id_contains.clone(),
        ..RolloutFilter::default()
    })
}

/// Streams the records of an export; see the proto for the contract.
pub async fn export_rollouts(
    engine: &Arc<Engine>,
    request: pb::ExportRolloutsRequest,
    limits: &SubscriberLimits,
    record_json: RecordJson,
) -> Result<RpcStream<pb::ExportRolloutsResponse>, Status> {
    let layout = export_layout(request.layout)?;
    let filter = export_filter(&request).map_err(status_of)?;
    let after = (!request.after.is_empty())
        .then(|| Cursor::parse("after", &request.after))
        .transpose()
        .map_err(status_of)?;
    let place = limits.admit()?;
    let mut export = engine
        .export(filter, layout, after)
        .await
        .map_err(status_of)?;
    let (mut outbox, stream) = Outbox::new(limits.buffer_bytes, 0);
    let start = pb::ExportRolloutsResponse {
        message: Some(pb::export_rollouts_response::Message::Start(
            pb::ExportStart {
                total: export.total() as u64,
                cursor: export.start_cursor().encode(),
            },
        )),
    };
    outbox.push(start.clone(), start.encoded_len(), 0);
    let timeout = limits.timeout;
    tokio::spawn(async move {
        let _place = place;
        let mut batch = Vec::new();
        let mut bytes = 0;
        let mut sent = 0u64;
        loop {
            let next = tokio::select! {
                next = export.next() => next,
                () = outbox.gone() => return,
            };
            let record = match next {
                Ok(record) => record,
                Err(error) => {
                    outbox.finish(status_of(error));
                    return;
                }
            };
            let done = record.is_none();
            if let Some(record) = record {
                match record_json(layout, &record) {
                    Ok(lines) => {
                        let last = lines.len().saturating_sub(1);
                        for (index, json) in lines.into_iter().enumerate() {
                            bytes += json.len();
                            // Only a rollout's last record carries its cursor.
                            let cursor = if index == last {
                                record.cursor.encode()
                            } else {
                                String::new()
                            };
                            batch.push(pb::ExportRecord { json, cursor });
                        }
                    }
                    Err(error) => {
                        outbox.finish(status_of(error));
                        return;
                    }
                }
            }
            if batch.is_empty() || (!done && bytes < EXPORT_BATCH_BYTES) {
                if done {
                    return;
                }
                continue;
            }
            sent += batch.len() as u64;
            let message = pb::ExportRolloutsResponse {
                message: Some(pb::export_rollouts_response::Message::Batch(
                    pb::ExportBatch {
                        records: std::mem::take(&mut batch),
                    },
                )),
            };
            bytes = 0;
            let size = message.encoded_len();
            // The export waits for a slow reader (it reads the store no
            // further meanwhile), but not forever.
            if !outbox.wait_for_room(size, timeout).await {
                outbox.cut_off(|_| {
                    tracing::info!("export reader too slow, disconnecting");
                    Status::resource_exhausted(
                        "the client reads the export too slowly; resume with the cursor \
                         of the last record received as `after`",
                    )
                });
                return;
            }
            outbox.push(message, size, sent);
            if done {
                return;
            }
        }
    });
    Ok(Box::pin(stream))
}

/// A message queued for a `WatchEvents` subscriber. An event stays the
/// engine's shared one until the stream takes it: a subscriber that stops
/// reading holds a pointer per event, not a copy (its budget counts the
/// encoded size, which a decoded copy would exceed several times over).
enum Outgoing {
    Progress(pb::WatchProgress),
    Event(Arc<Event>),
}

impl Outgoing {
    /// The message as sent (an event converted each time: it is small, and
    /// converting it beats holding the copy).
    fn to_proto(&self) -> pb::WatchEventsResponse {
        use pb::watch_events_response::Message;
        let message = match self {
            Self::Progress(progress) => Message::Progress(*progress),
            Self::Event(event) => Message::Event(c::event_to_proto(event)),
        };
        pb::WatchEventsResponse {
            message: Some(message),
        }
    }
}

#[cfg(test)]
mod tests {
    //! The slow-subscriber cut-off, driven on the server side of the stream:
    //! through a real connection, HTTP/2 flow-control buffers of unknown
    //! size sit between the client and this code and make the point at
    //! which a non-reading client stalls the server unpredictable.

    use std::time::Duration;

    use tokio_stream::StreamExt as _;

    use super::*;
    use lightning_store_backends::memory::MemoryStore;
    use lightning_store_core::engine::EngineConfig;
    use lightning_store_core::model::RolloutSpec;

    fn seq_of(message: pb::WatchEventsResponse) -> u64 {
        match message.message {
            Some(pb::watch_events_response::Message::Event(event)) => event.seq,
            other => panic!("expected an event, got {other:?}"),
        }
    }

    // A stalled subscriber's queue costs pointers, not copies: the event it
    // holds is the one the engine published to every listener.
    #[tokio::test(start_paused = true)]
    async fn a_stalled_subscriber_holds_the_engines_events_not_copies() {
        let engine = Arc::new(Engine::new(
            Arc::new(MemoryStore::new()),
            EngineConfig::default(),
        ));
        let mut bus = engine.events().subscribe();
        let one = || engine.enqueue_rollouts(vec![RolloutSpec::default()], None);
        // Without a subscriber: the bus and this receiver hold it.
        one().await.unwrap();
        let unwatched = bus.recv().await.unwrap();
        let limits = SubscriberLimits::new(1, 64 * 1024, Duration::from_secs(60));
        let mut stalled = watch_events(&engine, pb::WatchEventsRequest::default(), &limits)
            .await
            .unwrap();
        stalled.next().await.unwrap().unwrap();
        one().await.unwrap();
        let watched = bus.recv().await.unwrap();
        // Paused time: every ready task (the subscriber's pump) runs first.
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(
            Arc::strong_count(&watched),
            Arc::strong_count(&unwatched) + 1,
            "the subscriber's queue holds the published event itself"
        );
        assert_eq!(seq_of(stalled.next().await.unwrap().unwrap()), watched.seq);
    }

    // An export waits for its reader (it reads the store no further), but
    // one that stops reading is cut off, its queued batches dropped, and
    // told to resume from the last record it received.
    #[tokio::test(start_paused = true)]
    async fn a_stalled_export_reader_is_cut_off() {
        use lightning_store_core::engine::RolloutPatch;

        let engine = Arc::new(Engine::new(
            Arc::new(MemoryStore::new()),
            EngineConfig::default(),
        ));
        let enqueued = engine
            .enqueue_rollouts(vec![RolloutSpec::default(); 12], None)
            .await
            .unwrap();
        for rollout_id in enqueued.rollout_ids {
            let patch = RolloutPatch {
                status: Some(RolloutStatus::Succeeded),
                ..RolloutPatch::default()
            };
            let id = RolloutId::parse("rollout_id", rollout_id).unwrap();
            engine.update_rollout(&id, patch).await.unwrap();
        }
        // Records of about 100 kB: several batches.
        fn large(_: Layout, record: &RolloutRecord) -> StoreResult<Vec<String>> {
            Ok(vec![format!(
                "{}{}",
                record.cursor.encode(),
                " ".repeat(100_000)
            )])
        }
        let limits = SubscriberLimits::new(1, 4096, Duration::from_millis(200));
        let mut stalled = export_rollouts(
            &engine,
            pb::ExportRolloutsRequest::default(),
            &limits,
            large,
        )
        .await
        .unwrap();
        match stalled.next().await.unwrap().unwrap().message {
            Some(pb::export_rollouts_response::Message::Start(start)) => {
                assert_eq!(start.total, 12);
            }
            other => panic!("expected the start first, got {other:?}"),
        }
        // The only place is taken while the export runs.
        assert!(limits.admit().is_err());
        tokio::time::sleep(limits.timeout * 5).await;
        let status = match stalled.next().await {
            Some(Err(status)) => status,
            other => panic!("expected the cut-off status, got {other:?}"),
        };
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert!(
            status.message().contains("resume with the cursor"),
            "{status:?}"
        );
        assert!(
            stalled.next().await.is_none(),
            "the stream ends after the status"
        );
        // The pump ended: its place is free again.
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(limits.admit().is_ok());
    }

    // Paused time: the runtime runs every ready task before it moves the
    // clock, so the slow subscriber's cut-off timer fires deterministically.
    #[tokio::test(start_paused = true)]
    async fn a_slow_subscriber_is_cut_off_while_a_fast_one_keeps_receiving() {
        let engine = Arc::new(Engine::new(
            Arc::new(MemoryStore::new()),
            EngineConfig::default(),
        ));
        let limits = SubscriberLimits::new(2, 4096, Duration::from_millis(200));
        let mut slow = watch_events(&engine, pb::WatchEventsRequest::default(), &limits)
            .await
            .unwrap();
        let mut fast = watch_events(&engine, pb::WatchEventsRequest::default(), &limits)
            .await
            .unwrap();
        // Both start with the progress message.
        slow.next().await.unwrap().unwrap();
        fast.next().await.unwrap().unwrap();

        let total = 500u64;
        let fast_reader = tokio::spawn(async move {
            let mut seqs = Vec::new();
            while (seqs.len() as u64) < total {
                seqs.push(seq_of(fast.next().await.unwrap().unwrap()));
            }
            seqs
        });
        for _ in 0..total / 100 {
            engine
                .enqueue_rollouts(vec![RolloutSpec::default(); 100], None)
                .await
                .unwrap();
        }
        let seqs = tokio::time::timeout(Duration::from_secs(60), fast_reader)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            seqs,
            (1..=total).collect::<Vec<_>>(),
            "the fast one got everything"
        );

        // Let the slow subscriber's pump fill its buffer and give up on it.
        tokio::time::sleep(limits.timeout * 2).await;
        // The slow one never read: its buffered events were dropped at the
        // cut-off, so it gets the status at once, resuming after the last
        // event it took (none).
        let status = match tokio::time::timeout(Duration::from_secs(60), slow.next())
            .await
            .unwrap()
        {
            Some(Err(status)) => status,
            other => panic!("expected the cut-off status first, got {other:?}"),
        };
        let last = 0;
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert!(
            status
                .message()
                .contains(&format!("resume with after_seq={last}")),
            "{}",
            status.message()
        );
        let trailer = status
            .metadata()
            .get(LAST_SEQ_TRAILER)
            .unwrap()
            .to_str()
            .unwrap();
        assert_eq!(trailer, last.to_string());
        assert!(
            slow.next().await.is_none(),
            "the stream ends after the status"
        );
    }
}
