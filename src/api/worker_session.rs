//! The `WorkerSession` stream: the adapter between a runner's bidirectional
//! stream and the core's [`Sessions`] (see the proto for the contract).

use std::sync::Arc;

use tokio::sync::mpsc;
use tonic::{Status, Streaming};

use super::convert::{self as c, id};
use super::status::blame_undecodable_request;
use super::streams::{RpcStream, closing_status, stream_of};
use crate::core::engine::{Engine, StreamEnd};
use crate::core::error::StoreError;
use crate::core::model::Json;
use crate::core::sessions::{RevocationReason, SessionHandle, SessionPush, Sessions};
use crate::proto as pb;

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
    sessions: &Arc<Sessions>,
    extensions: &http::Extensions,
    mut inbound: Streaming<pb::WorkerSessionRequest>,
) -> Result<RpcStream<pb::WorkerSessionResponse>, Status> {
    use pb::worker_session_request::Message;
    let open = match inbound.message().await?.and_then(|m| m.message) {
        Some(Message::Open(open)) => open,
        _ => return Err(StoreError::invalid("the first session message must be open").into()),
    };
    let worker_id = id("worker_id", &open.worker_id)?;
    crate::auth::check_worker(extensions.get(), Some(&worker_id))?;
    let mut session = sessions.open(&worker_id, open.slots.into()).await?;
    let (sender, receiver) = mpsc::channel(64);
    let opened = pb::WorkerSessionResponse {
        message: Some(pb::worker_session_response::Message::Opened(
            pb::SessionOpened {
                worker_id: worker_id.clone(),
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
    let mut closing = engine.closing();
    let sessions = sessions.clone();
    tokio::spawn(async move {
        loop {
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
                message = inbound.message() => match message {
                    Ok(Some(message)) => {
                        if let Err(status) = handle_message(&sessions, &session, message.message).await {
                            let _ = sender.send(Err(status)).await;
                            break;
                        }
                    }
                    // The runner closed its side: a clean close.
                    Ok(None) => {
                        session.set_end(StreamEnd::Closed);
                        break;
                    }
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
    });
    Ok(stream_of(receiver))
}

async fn handle_message(
    sessions: &Sessions,
    session: &SessionHandle,
    message: Option<pb::worker_session_request::Message>,
) -> Result<(), Status> {
    use pb::worker_session_request::Message;
    let (released, stats) = match message {
        Some(Message::Open(_)) => {
            return Err(
                StoreError::FailedPrecondition("the session is already open".into()).into(),
            );
        }
        Some(Message::Release(release)) => (Some((release.rollout_id, release.attempt_id)), None),
        Some(Message::Heartbeat(heartbeat)) => {
            let stats = match c::json_from_text(
                "heartbeat_stats_json",
                &heartbeat.heartbeat_stats_json,
                Json::Null,
            )? {
                Json::Null => None,
                stats => Some(stats),
            };
            (None, stats)
        }
        None => (None, None),
    };
    if sessions.message(session, released, stats).await? {
        Ok(())
    } else {
        Err(moved_status(&session.worker_id))
    }
}
