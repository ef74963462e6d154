//! A benchmark runner's side of a `WorkerSession`: open it, take the
//! assignments the server pushes, release them.

use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Status, Streaming};

use super::target::StoreClient;
use lightning_store_proto as pb;
use pb::worker_session_request::Message as ToServer;
use pb::worker_session_response::Message as FromServer;

/// An open session.
pub struct BenchSession {
    to_server: mpsc::UnboundedSender<pb::WorkerSessionRequest>,
    pushes: Streaming<pb::WorkerSessionResponse>,
    /// The epoch the session's writes present (0 from a server without
    /// fencing).
    pub owner_epoch: u64,
}

impl BenchSession {
    /// Opens a session for `worker_id` with `slots` slots.
    pub async fn open(
        client: &mut StoreClient,
        worker_id: &str,
        slots: i64,
    ) -> Result<Self, Status> {
        let (to_server, requests) = mpsc::unbounded_channel();
        let _ = to_server.send(pb::WorkerSessionRequest {
            message: Some(ToServer::Open(pb::OpenSession {
                worker_id: worker_id.to_owned(),
                slots,
            })),
        });
        let mut pushes = client
            .worker_session(UnboundedReceiverStream::new(requests))
            .await?
            .into_inner();
        let owner_epoch = match pushes.message().await? {
            Some(pb::WorkerSessionResponse {
                message: Some(FromServer::Opened(opened)),
            }) => opened.owner_epoch,
            _ => return Err(Status::internal("the session did not open")),
        };
        Ok(Self {
            to_server,
            pushes,
            owner_epoch,
        })
    }

    /// Returns the next pushed assignment's rollout; `None` when the
    /// session ended.
    pub async fn assignment(&mut self) -> Result<Option<pb::Rollout>, Status> {
        loop {
            match self.pushes.message().await? {
                Some(pb::WorkerSessionResponse {
                    message: Some(FromServer::Assignment(assignment)),
                }) => {
                    if let Some(rollout) = assignment.rollout {
                        return Ok(Some(rollout));
                    }
                }
                Some(_) => {}
                None => return Ok(None),
            }
        }
    }

    /// Frees the slot of an assignment.
    pub fn release(&self, rollout_id: &str, attempt_id: &str) {
        let _ = self.to_server.send(pb::WorkerSessionRequest {
            message: Some(ToServer::Release(pb::ReleaseAssignment {
                rollout_id: rollout_id.to_owned(),
                attempt_id: attempt_id.to_owned(),
            })),
        });
    }
}
