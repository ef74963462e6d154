//! Helpers that keep the conformance tests about behaviour, not plumbing.

use lightning_store::proto as pb;
use pb::watch_events_response::Message as WatchMessage;
use pb::worker_session_request::Message as ToServer;
use pb::worker_session_response::Message as FromServer;
use prost_types::FieldMask;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::Streaming;

pub use crate::common::Client;

pub use pb::{AttemptStatus as A, RolloutStatus as R};

/// Returns a spec with `input` as JSON text and default config.
pub fn spec(input: &str) -> pb::RolloutSpec {
    pb::RolloutSpec {
        input_json: input.to_owned(),
        ..Default::default()
    }
}

/// Returns a spec with a retry configuration.
pub fn retry_spec(max_attempts: i64, retry_on: &[A]) -> pb::RolloutSpec {
    pb::RolloutSpec {
        config: Some(pb::RolloutConfig {
            max_attempts: Some(max_attempts),
            retry_condition: retry_on.iter().map(|&s| s as i32).collect(),
            ..Default::default()
        }),
        ..spec("{}")
    }
}

// Shared with the other test binaries; not every binary that includes this file uses both.
#[allow(unused_imports)]
pub use crate::common::{enqueue, enqueue_spec};

pub async fn dequeue(client: &mut Client, worker_id: Option<&str>) -> Option<pb::Rollout> {
    client
        .dequeue_rollout(pb::DequeueRolloutRequest {
            worker_id: worker_id.map(str::to_owned),
            wait: None,
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
}

/// Dequeues, waiting up to `secs` for a rollout.
pub async fn dequeue_wait(client: &mut Client, secs: u64) -> Option<pb::Rollout> {
    client
        .dequeue_rollout(pb::DequeueRolloutRequest {
            worker_id: None,
            wait: Some(prost_types::Duration {
                seconds: secs as i64,
                nanos: 0,
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
}

pub async fn get(client: &mut Client, rollout_id: &str) -> pb::Rollout {
    client
        .get_rollout(pb::GetRolloutRequest {
            rollout_id: rollout_id.to_owned(),
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap()
}

pub fn attempt_of(rollout: &pb::Rollout) -> &pb::Attempt {
    rollout.attempt.as_ref().expect("rollout has an attempt")
}

pub fn status(rollout: &pb::Rollout) -> R {
    R::try_from(rollout.status).unwrap()
}

pub fn attempt_status(attempt: &pb::Attempt) -> A {
    A::try_from(attempt.status).unwrap()
}

pub fn mask(paths: &[&str]) -> Option<FieldMask> {
    Some(FieldMask {
        paths: paths.iter().map(|p| (*p).to_owned()).collect(),
    })
}

pub async fn set_attempt_status(
    client: &mut Client,
    rollout_id: &str,
    attempt_id: &str,
    status: A,
) -> Result<pb::Attempt, tonic::Status> {
    client
        .update_attempt(pb::UpdateAttemptRequest {
            rollout_id: rollout_id.to_owned(),
            attempt_id: attempt_id.to_owned(),
            update_mask: mask(&["status"]),
            status: status as i32,
            ..Default::default()
        })
        .await
        .map(|r| r.into_inner().attempt.unwrap())
}

/// Starts the rollout's next attempt (no worker) and returns its id.
pub async fn start_attempt(client: &mut Client, rollout_id: &str) -> String {
    client
        .start_attempt(pb::StartAttemptRequest {
            rollout_id: rollout_id.to_owned(),
            worker_id: None,
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap()
        .attempt
        .unwrap()
        .attempt_id
}

pub async fn set_rollout_status(client: &mut Client, rollout_id: &str, status: R) -> pb::Rollout {
    client
        .update_rollout(pb::UpdateRolloutRequest {
            rollout_id: rollout_id.to_owned(),
            update_mask: mask(&["status"]),
            status: status as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap()
}

/// Returns a span with fresh random ids.
pub fn span(rollout_id: &str, attempt_id: &str, name: &str, sequence_id: Option<i64>) -> pb::Span {
    let hex = uuid::Uuid::new_v4().simple().to_string();
    pb::Span {
        rollout_id: rollout_id.to_owned(),
        attempt_id: attempt_id.to_owned(),
        sequence_id,
        trace_id: hex.clone(),
        span_id: hex[..16].to_owned(),
        name: name.to_owned(),
        ..Default::default()
    }
}

pub async fn add_span(client: &mut Client, span: pb::Span) -> Option<pb::Span> {
    client
        .add_span(pb::AddSpanRequest {
            span: Some(span),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .span
}

pub async fn query_spans(
    client: &mut Client,
    request: pb::QuerySpansRequest,
) -> pb::QuerySpansResponse {
    client.query_spans(request).await.unwrap().into_inner()
}

/// Returns every span of one rollout (the first page of an unfiltered query).
pub async fn rollout_spans(
    client: &mut Client,
    rollout_id: impl Into<String>,
) -> pb::QuerySpansResponse {
    let request = pb::QuerySpansRequest {
        rollout_id: rollout_id.into(),
        ..Default::default()
    };
    query_spans(client, request).await
}

pub async fn wait_for(client: &mut Client, ids: &[&str], timeout_secs: f64) -> Vec<pb::Rollout> {
    client
        .wait_for_rollouts(pb::WaitForRolloutsRequest {
            rollout_ids: ids.iter().map(|s| (*s).to_owned()).collect(),
            timeout: Some(
                prost_types::Duration::try_from(std::time::Duration::from_secs_f64(timeout_secs))
                    .unwrap(),
            ),
        })
        .await
        .unwrap()
        .into_inner()
        .rollouts
}

pub async fn worker(client: &mut Client, worker_id: &str) -> pb::Worker {
    client
        .get_worker(pb::GetWorkerRequest {
            worker_id: worker_id.to_owned(),
        })
        .await
        .unwrap()
        .into_inner()
        .worker
        .unwrap()
}

pub async fn stats(client: &mut Client) -> pb::GetStatisticsResponse {
    client
        .get_statistics(pb::GetStatisticsRequest {})
        .await
        .unwrap()
        .into_inner()
}

pub fn page(sort_by: &str, desc: bool, limit: Option<i64>, offset: i64) -> Option<pb::PageRequest> {
    Some(pb::PageRequest {
        sort_by: sort_by.to_owned(),
        sort_order: if desc {
            pb::SortOrder::Desc
        } else {
            pb::SortOrder::Asc
        } as i32,
        limit,
        offset,
    })
}

/// Asserts that a call failed with `code` and a message containing `text`.
#[track_caller]
pub fn assert_code<T: std::fmt::Debug>(
    result: Result<T, tonic::Status>,
    code: tonic::Code,
    text: &str,
) {
    let status = result.expect_err("call should fail");
    assert_eq!(status.code(), code, "unexpected code: {status:?}");
    assert!(
        status.message().contains(text),
        "message {:?} does not contain {text:?}",
        status.message()
    );
}

/// Returns the event a subscription message carries.
pub fn event_of(message: pb::WatchEventsResponse) -> Option<pb::Event> {
    match message.message {
        Some(WatchMessage::Event(event)) => Some(event),
        _ => None,
    }
}

/// Subscribes to the events committed from now on.
pub async fn watch(client: &mut Client) -> Streaming<pb::WatchEventsResponse> {
    client
        .watch_events(pb::WatchEventsRequest::default())
        .await
        .unwrap()
        .into_inner()
}

/// Reads `events` until one matches `wanted`, and returns it.
pub async fn next_event(
    events: &mut Streaming<pb::WatchEventsResponse>,
    wanted: impl Fn(&pb::Event) -> bool,
) -> pb::Event {
    loop {
        let message = events
            .message()
            .await
            .unwrap()
            .expect("the subscription is open");
        if let Some(event) = event_of(message)
            && wanted(&event)
        {
            return event;
        }
    }
}

/// A runner's side of a session.
pub struct Runner {
    pub to_server: mpsc::UnboundedSender<pb::WorkerSessionRequest>,
    pub from_server: Streaming<pb::WorkerSessionResponse>,
    pub opened: pb::SessionOpened,
}

impl Runner {
    pub async fn open(client: &mut Client, worker_id: &str, slots: i64) -> Runner {
        Self::try_open(client, worker_id, slots).await.unwrap()
    }

    /// Opens a session; fails when the server cannot be reached.
    pub async fn try_open(
        client: &mut Client,
        worker_id: &str,
        slots: i64,
    ) -> Result<Runner, tonic::Status> {
        let (to_server, requests) = mpsc::unbounded_channel();
        to_server
            .send(pb::WorkerSessionRequest {
                message: Some(ToServer::Open(pb::OpenSession {
                    worker_id: worker_id.into(),
                    slots,
                })),
            })
            .unwrap();
        let mut from_server = client
            .worker_session(UnboundedReceiverStream::new(requests))
            .await?
            .into_inner();
        let Some(FromServer::Opened(opened)) = from_server.message().await?.and_then(|m| m.message)
        else {
            return Err(tonic::Status::internal("the first message is not opened"));
        };
        Ok(Runner {
            to_server,
            from_server,
            opened,
        })
    }

    /// The session's owner epoch.
    pub fn epoch(&self) -> u64 {
        self.opened.owner_epoch
    }

    pub async fn next(&mut self) -> FromServer {
        self.from_server
            .message()
            .await
            .unwrap()
            .expect("session open")
            .message
            .unwrap()
    }

    /// Returns the server's next message, or the status that ended the stream.
    pub async fn try_next(&mut self) -> Result<Option<FromServer>, tonic::Status> {
        Ok(self.from_server.message().await?.and_then(|m| m.message))
    }

    pub async fn assignment(&mut self) -> pb::Rollout {
        match self.next().await {
            FromServer::Assignment(assignment) => {
                assert_eq!(assignment.owner_epoch, self.epoch());
                assignment.rollout.unwrap()
            }
            other => panic!("expected an assignment, got {other:?}"),
        }
    }

    pub fn release(&self, rollout: &pb::Rollout) {
        let _ = self.to_server.send(pb::WorkerSessionRequest {
            message: Some(ToServer::Release(pb::ReleaseAssignment {
                rollout_id: rollout.rollout_id.clone(),
                attempt_id: attempt_of(rollout).attempt_id.clone(),
            })),
        });
    }

    /// Closes the runner's side of the stream (a clean close) and reads
    /// the server's side to its end.
    pub async fn close(self) {
        let Runner {
            to_server,
            mut from_server,
            ..
        } = self;
        drop(to_server);
        while from_server.message().await.unwrap().is_some() {}
    }
}

/// A loopback TCP proxy to a server whose connections can be cut, so that
/// the streams through it break as when a runner's host goes away.
pub struct Proxy {
    pub url: String,
    connections: Arc<Mutex<JoinSet<()>>>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// Starts a proxy to `server`.
    pub async fn to(server: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let connections = Arc::new(Mutex::new(JoinSet::new()));
        let accepted = connections.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let Ok(mut outbound) = TcpStream::connect(server).await else {
                    return;
                };
                accepted.lock().unwrap().spawn(async move {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                });
            }
        });
        Proxy {
            url,
            connections,
            accept,
        }
    }

    /// Returns a client connected through the proxy.
    pub async fn client(&self) -> Client {
        Client::connect(self.url.clone()).await.unwrap()
    }

    /// Closes every connection through the proxy.
    pub fn cut(&self) {
        self.connections.lock().unwrap().abort_all();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}
