//! The `WorkerSession` stream: the adapter between a runner's bidirectional
//! stream and the core's [`Dispatcher`] (see the proto for the contract).

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};
use tonic::{Status, Streaming};

use super::caller::caller_of;
use super::convert as c;
use super::status::{blame_undecodable_request, status_of};
use super::streams::{RpcStream, closing_status, stream_of};
use lightning_store_core::dispatcher::{
    Dispatcher, PendingWrites, RevocationReason, SessionHandle, SessionPush, SessionWriter,
};
use lightning_store_core::engine::{Engine, StreamEnd};
use lightning_store_core::error::{StoreError, StoreResult};
use lightning_store_core::ids::WorkerId;
use lightning_store_core::model::Json;
use lightning_store_proto as pb;

fn push_to_proto(push: SessionPush, owner_epoch: u64) -> pb::WorkerSessionResponse {
    use pb::worker_session_response::Message;
    let message = match push {
        SessionPush::Assignment { rollout, resources } => Message::Assignment(pb::Assignment {
            rollout: Some(c::view_to_proto(&rollout)),
            resources: resources.as_ref().map(c::resources_to_proto),
            owner_epoch,
        }),
        SessionPush::Revoked {
            rollout_id,
            attempt_id,
            reason,
        } => Message::Revoked(pb::Revocation {
            rollout_id,
            attempt_id,
            reason: match reason {
                RevocationReason::Cancelled => pb::RevocationReason::Cancelled,
                RevocationReason::Timeout => pb::RevocationReason::Timeout,
                RevocationReason::Unresponsive => pb::RevocationReason::Unresponsive,
            } as i32,
        }),
    };
    pb::WorkerSessionResponse {
        message: Some(message),
    }
}

/// The status that ends a session which is no longer this server's.
fn moved_status(worker_id: &str) -> Status {
    Status::aborted(format!(
        "the session of worker {worker_id} ended: a newer session of the worker replaced it, \
         or its lease expired; reconnect to continue"
    ))
}

/// Runs a worker session; see the proto for the contract.
pub async fn worker_session(
    engine: &Arc<Engine>,
    dispatcher: &Arc<Dispatcher>,
    extensions: &http::Extensions,
    mut inbound: Streaming<pb::WorkerSessionRequest>,
) -> Result<RpcStream<pb::WorkerSessionResponse>, Status> {
    use pb::worker_session_request::Message;
    let open = match inbound.message().await?.and_then(|m| m.message) {
        Some(Message::Open(open)) => open,
        _ => {
            return Err(status_of(StoreError::invalid(
                "the first session message must be open",
            )));
        }
    };
    let worker_id = WorkerId::parse("worker_id", open.worker_id).map_err(status_of)?;
    let session = dispatcher
        .open(&worker_id, open.slots, &caller_of(extensions))
        .await
        .map_err(status_of)?;
    let (sender, receiver) = mpsc::channel(64);
    let opened = pb::WorkerSessionResponse {
        message: Some(pb::worker_session_response::Message::Opened(
            pb::SessionOpened {
                worker_id: worker_id.into_string(),
                adopted: session
                    .adopted
                    .iter()
                    .map(|(rollout_id, attempt_id)| pb::RolloutAttemptRef {
                        rollout_id: rollout_id.clone(),
                        attempt_id: attempt_id.clone(),
                    })
                    .collect(),
                owner_epoch: session.epoch,
            },
        )),
    };
    let _ = sender.try_send(Ok(opened));
    let closing = engine.closing();
    tokio::spawn(serve_session(session, inbound, sender, closing));
    Ok(stream_of(receiver))
}

/// The write of a session's runner messages in flight (one at a time).
type Recording = BoxFuture<'static, StoreResult<bool>>;

/// Serves an open session until it ends: pushes go out as they come, runner
/// messages are recorded one write at a time, those arriving meanwhile
/// coalescing in [`PendingWrites`].
async fn serve_session(
    mut session: SessionHandle,
    mut inbound: Streaming<pb::WorkerSessionRequest>,
    sender: mpsc::Sender<Result<pb::WorkerSessionResponse, Status>>,
    mut closing: watch::Receiver<bool>,
) {
    let writer = session.writer();
    let mut pending = PendingWrites::default();
    let mut recording: Option<Recording> = None;
    // Whether the runner closed its side: the session ends once what it
    // sent is recorded.
    let mut runner_done = false;
    loop {
        if recording.is_none()
            && let Some((released, stats)) = pending.next_write()
        {
            let writer = writer.clone();
            recording = Some(Box::pin(
                async move { writer.record(released, stats).await },
            ));
        }
        if runner_done && recording.is_none() {
            session.set_end(StreamEnd::Closed);
            break;
        }
        tokio::select! {
            push = session.pushes.recv() => {
                let item = match push {
                    Some(push) => Ok(push_to_proto(push, session.epoch)),
                    None => Err(moved_status(&session.worker_id)),
                };
                let failed = item.is_err();
                if sender.send(item).await.is_err() || failed {
                    break;
                }
            }
            recorded = async { recording.as_mut().expect("guarded").await }, if recording.is_some() => {
                recording = None;
                let ended = match recorded {
                    Ok(true) => None,
                    Ok(false) => Some(moved_status(&session.worker_id)),
                    Err(error) => Some(status_of(error)),
                };
                if let Some(status) = ended {
                    let _ = sender.send(Err(status)).await;
                    break;
                }
            }
            message = inbound.message(), if !runner_done => match message {
                Ok(Some(message)) => {
                    if let Err(status) = take_message(&writer, &mut pending, message.message) {
                        let _ = sender.send(Err(status)).await;
                        break;
                    }
                }
                // The runner closed its side: a clean close.
                Ok(None) => runner_done = true,
                // The runner went away, or sent a message that does not
                // decode (INVALID_ARGUMENT, not OK).
                Err(status) => {
                    let _ = sender.send(Err(blame_undecodable_request(status))).await;
                    break;
                }
            },
            _ = async { let _ = closing.wait_for(|closing| *closing).await; } => {
                let _ = sender.send(Err(closing_status())).await;
                break;
            }
        }
    }
    drop(session);
}

/// Takes a runner message: a release frees its slot at once; releases and
/// heartbeats wait in `pending` for their write.
fn take_message(
    writer: &SessionWriter,
    pending: &mut PendingWrites,
    message: Option<pb::worker_session_request::Message>,
) -> Result<(), Status> {
    use pb::worker_session_request::Message;
    match message {
        Some(Message::Open(_)) => {
            return Err(status_of(StoreError::FailedPrecondition(
                "the session is already open".into(),
            )));
        }
        Some(Message::Release(release)) => {
            let released = (release.rollout_id, release.attempt_id);
            writer.free_slot(&released);
            pending.release(released);
        }
        Some(Message::Heartbeat(heartbeat)) => {
            let stats = match c::json_from_text(
                "heartbeat_stats_json",
                &heartbeat.heartbeat_stats_json,
                Json::Null,
            )
            .map_err(status_of)?
            {
                Json::Null => None,
                stats => Some(stats),
            };
            pending.heartbeat(stats);
        }
        None => pending.heartbeat(None),
    }
    Ok(())
}
