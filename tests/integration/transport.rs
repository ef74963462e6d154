//! The transport's limits through the real server: the connection
//! limit, the idle timeout, streams per connection, and accept errors
//! (file descriptors exhausted) backed off instead of spinning a core.

use crate::common;

use std::time::{Duration, Instant};

use common::{Backend, ServerProcess, TestServer};
use lightning_store::proto as pb;
use lightning_store::proto::lightning_store_service_client::LightningStoreServiceClient;
use lightning_store::server::ServerConfig;
use lightning_store::transport::TransportLimits;
use tokio::io::AsyncReadExt as _;
use tonic::transport::{Channel, Endpoint};
use tonic_types::StatusExt as _;

/// How long any one step may take before the test fails.
const BOUND: Duration = Duration::from_secs(10);

async fn start(limits: TransportLimits) -> TestServer {
    TestServer::start_with(
        Backend::Memory,
        ServerConfig {
            transport: limits,
            ..ServerConfig::default()
        },
    )
    .await
}

/// A client on its own connection, connected within [`BOUND`].
async fn connect(
    url: &str,
) -> Result<LightningStoreServiceClient<Channel>, tonic::transport::Error> {
    let channel = Endpoint::from_shared(url.to_owned())
        .unwrap()
        .connect_timeout(BOUND)
        .connect()
        .await?;
    Ok(LightningStoreServiceClient::new(channel))
}

async fn capabilities(
    client: &mut LightningStoreServiceClient<Channel>,
) -> Result<pb::GetCapabilitiesResponse, tonic::Status> {
    client
        .get_capabilities(pb::GetCapabilitiesRequest {})
        .await
        .map(tonic::Response::into_inner)
}

/// Opens a `WatchEvents` stream and reads its first progress message.
async fn subscribe(
    client: &mut LightningStoreServiceClient<Channel>,
) -> tonic::Streaming<pb::WatchEventsResponse> {
    let mut stream = client
        .watch_events(pb::WatchEventsRequest::default())
        .await
        .unwrap()
        .into_inner();
    stream
        .message()
        .await
        .unwrap()
        .expect("the first progress message");
    stream
}

/// Case 4: connections beyond the limit are closed at once (the client sees
/// an error, not a hang), and a freed place is taken by the next client.
#[tokio::test]
async fn connections_beyond_the_limit_are_refused_promptly() {
    let server = start(TransportLimits {
        max_connections: 2,
        ..TransportLimits::default()
    })
    .await;
    let mut first = connect(&server.url).await.unwrap();
    let mut second = connect(&server.url).await.unwrap();
    capabilities(&mut first).await.unwrap();
    capabilities(&mut second).await.unwrap();

    let mut third = connect(&server.url).await.unwrap();
    let refused = tokio::time::timeout(BOUND, capabilities(&mut third))
        .await
        .expect("the third connection is answered, not left hanging")
        .expect_err("the third connection is refused");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().contains("too many connections"),
        "{refused:?}"
    );
    let retry = refused.get_details_retry_info().expect("a retry delay");
    assert!(retry.retry_delay.is_some());
    drop(third);

    drop(first);
    let started = Instant::now();
    loop {
        let accepted = async {
            let mut client = connect(&server.url).await.ok()?;
            capabilities(&mut client).await.ok()
        };
        if accepted.await.is_some() {
            break;
        }
        assert!(started.elapsed() < BOUND, "the freed place was never taken");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    capabilities(&mut second)
        .await
        .expect("the second connection was untouched");
    server.stop().await;
}

/// Case 4: a connection with no call in flight is closed after the idle
/// timeout; one holding a quiet subscription is not idle.
#[tokio::test]
async fn idle_connections_are_closed_busy_ones_kept() {
    let idle_timeout = Duration::from_millis(300);
    let server = start(TransportLimits {
        idle_timeout,
        ..TransportLimits::default()
    })
    .await;

    let mut silent = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let opened = Instant::now();
    let read = tokio::time::timeout(BOUND, silent.read(&mut [0; 64]))
        .await
        .expect("the idle connection is closed within the bound");
    assert!(matches!(read, Ok(0) | Err(_)), "closed: {read:?}");
    assert!(
        opened.elapsed() >= idle_timeout,
        "not before the idle timeout"
    );

    let mut watcher = connect(&server.url).await.unwrap();
    let mut events = subscribe(&mut watcher).await;
    // Well past the idle timeout with nothing sent on the connection.
    tokio::time::sleep(idle_timeout * 4).await;
    let mut writer = server.client().await;
    common::enqueue(&mut writer, "1").await;
    let event = tokio::time::timeout(BOUND, events.message())
        .await
        .expect("the event arrives")
        .expect("the subscription's connection is still open");
    assert!(event.is_some());
    capabilities(&mut watcher)
        .await
        .expect("the connection still serves calls");
    drop(events);
    server.stop().await;
}

/// Case 4: a connection carries at most `max_concurrent_streams` calls at
/// once; the client queues the next call until one ends.
#[tokio::test]
async fn streams_per_connection_are_limited() {
    let server = start(TransportLimits {
        max_concurrent_streams: 2,
        ..TransportLimits::default()
    })
    .await;
    let mut client = connect(&server.url).await.unwrap();
    let first = subscribe(&mut client).await;
    let _second = subscribe(&mut client).await;

    let mut third = client.clone();
    let mut queued = Box::pin(async move { capabilities(&mut third).await });
    assert!(
        tokio::time::timeout(Duration::from_millis(500), &mut queued)
            .await
            .is_err(),
        "a third concurrent call was admitted on the connection"
    );
    drop(first);
    tokio::time::timeout(BOUND, queued)
        .await
        .expect("the queued call runs once a stream ends")
        .unwrap();
    server.stop().await;
}

/// Case 4: when file descriptors run out the server pauses accepting
/// instead of retrying in a loop that spins a core, and accepts again once
/// descriptors are free.
#[tokio::test]
async fn exhausted_file_descriptors_do_not_spin_the_accept_loop() {
    let server = ServerProcess::start_with_fd_limit(&["--store", "memory"], 64);
    // More connections than descriptors: the kernel completes them in the
    // listen backlog, the server fails to accept the rest.
    let mut held = Vec::new();
    for _ in 0..128 {
        held.push(tokio::net::TcpStream::connect(server.addr).await.unwrap());
    }
    let started = Instant::now();
    while !server
        .log
        .lock()
        .unwrap()
        .contains("cannot accept connections, pausing")
    {
        assert!(
            started.elapsed() < BOUND,
            "the accept errors were never reported"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cpu_before = server.cpu_time();
    let wall = Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let busy = server.cpu_time() - cpu_before;
    assert!(
        busy < wall.elapsed() / 4,
        "the server used {busy:?} of CPU in {:?} while out of file descriptors",
        wall.elapsed()
    );

    drop(held);
    let started = Instant::now();
    loop {
        let served = async {
            let mut client = connect(&format!("http://{}", server.addr)).await.ok()?;
            capabilities(&mut client).await.ok()
        };
        if tokio::time::timeout(Duration::from_secs(2), served)
            .await
            .ok()
            .flatten()
            .is_some()
        {
            break;
        }
        assert!(started.elapsed() < BOUND, "the server never accepted again");
    }
    let (status, _) = server.terminate();
    assert!(status.success());
}

async fn start_subscribers(max_subscribers: usize, buffer_bytes: usize) -> TestServer {
    TestServer::start_with(
        Backend::Memory,
        ServerConfig {
            transport: TransportLimits {
                max_subscribers,
                subscriber_buffer_bytes: buffer_bytes,
                ..TransportLimits::default()
            },
            subscriber_timeout: Duration::from_millis(200),
            ..ServerConfig::default()
        },
    )
    .await
}

/// Takes a subscription place as soon as one is free, within [`BOUND`].
async fn subscribe_when_admitted(url: &str) -> tonic::Streaming<pb::WatchEventsResponse> {
    let mut client = connect(url).await.unwrap();
    let started = Instant::now();
    loop {
        match client.watch_events(pb::WatchEventsRequest::default()).await {
            Ok(stream) => return stream.into_inner(),
            Err(status) => assert_eq!(status.code(), tonic::Code::ResourceExhausted),
        }
        assert!(started.elapsed() < BOUND, "no subscription place was freed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn enqueue_many(client: &mut LightningStoreServiceClient<Channel>, count: usize) {
    client
        .enqueue_rollouts(pb::EnqueueRolloutsRequest {
            rollouts: vec![
                pb::RolloutSpec {
                    input_json: "\"a rollout input of a few dozen bytes\"".into(),
                    ..Default::default()
                };
                count
            ],
            ..Default::default()
        })
        .await
        .unwrap();
}

/// Case 5: subscriptions beyond the cap are RESOURCE_EXHAUSTED with a retry
/// delay (event subscriptions and completion watches alike); a closed one
/// frees its place.
#[tokio::test]
async fn subscribers_beyond_the_cap_are_told_to_retry() {
    let server = start_subscribers(2, 64 * 1024).await;
    let mut client = connect(&server.url).await.unwrap();
    let limits = capabilities(&mut client).await.unwrap().limits.unwrap();
    assert_eq!(
        limits.max_subscribers, 2,
        "GetCapabilities reports the limit"
    );
    assert_eq!(limits.subscriber_buffer_bytes, 64 * 1024);
    assert_eq!(limits.max_connections, 4096);
    let first = subscribe(&mut client).await;
    let pending = common::enqueue(&mut client, "1").await;
    let mut second = client
        .watch_rollout_completions(pb::WatchRolloutCompletionsRequest {
            rollout_ids: vec![pending.rollout_id],
            timeout: None,
        })
        .await
        .unwrap()
        .into_inner();

    for refused in [
        client
            .watch_events(pb::WatchEventsRequest::default())
            .await
            .map(drop),
        client
            .watch_rollout_completions(pb::WatchRolloutCompletionsRequest::default())
            .await
            .map(drop),
    ] {
        let status = refused.expect_err("a third subscription is refused");
        assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
        assert!(
            status.message().contains("limit of 2 subscriptions"),
            "{status:?}"
        );
        assert!(status.get_details_retry_info().is_some(), "a retry delay");
    }

    drop(first);
    let mut third = subscribe_when_admitted(&server.url).await;
    assert!(
        third.message().await.unwrap().is_some(),
        "the new subscriber is served"
    );
    // The completion watch was untouched: it still waits.
    assert!(
        tokio::time::timeout(Duration::from_millis(100), second.message())
            .await
            .is_err()
    );
    server.stop().await;
}

/// Case 5: a subscriber that stops reading is cut off once its byte budget
/// stays full; its queued events are dropped at once (its place is free
/// before it reads anything), and the status it gets when it reads again
/// names the position to resume from: the last event it received, with
/// nothing lost in between.
#[tokio::test]
async fn a_stalled_subscriber_is_cut_off_and_released_at_once() {
    let server = start_subscribers(1, 16 * 1024).await;
    // The smallest HTTP/2 window: the client itself buffers little.
    let channel = Endpoint::from_shared(server.url.clone())
        .unwrap()
        .initial_stream_window_size(Some(65_535))
        .initial_connection_window_size(Some(65_535))
        .connect()
        .await
        .unwrap();
    let mut stalled = LightningStoreServiceClient::new(channel)
        .watch_events(pb::WatchEventsRequest::default())
        .await
        .unwrap()
        .into_inner();
    let mut writer = server.client().await;
    // Far more events than the window and the budget hold.
    let written = 10_000;
    for _ in 0..written / 1000 {
        enqueue_many(&mut writer, 1000).await;
    }

    // The only place frees up once the stalled subscriber is cut off: its
    // pump is gone without the client reading anything.
    let mut next = subscribe_when_admitted(&server.url).await;
    next.message()
        .await
        .unwrap()
        .expect("the new subscriber is served");

    let mut last = 0;
    let mut received = 0;
    let status = loop {
        match tokio::time::timeout(BOUND, stalled.message())
            .await
            .unwrap()
        {
            Ok(Some(pb::WatchEventsResponse {
                message: Some(pb::watch_events_response::Message::Event(event)),
            })) => {
                assert_eq!(event.seq, last + 1, "in order, without gaps");
                last = event.seq;
                received += 1;
            }
            Ok(Some(_progress)) => {}
            Ok(None) => panic!("the stream must end with a status"),
            Err(status) => break status,
        }
    };
    assert!(
        received < written / 2,
        "the queued events were dropped, not delivered ({received} of {written})"
    );
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    let resume: u64 = status
        .metadata()
        .get("lightningstore-last-seq")
        .expect("the resume position")
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(resume, last, "resume from the last event received");

    drop(next);
    let mut client = connect(&server.url).await.unwrap();
    let started = Instant::now();
    let mut resumed = loop {
        match client
            .watch_events(pb::WatchEventsRequest {
                after_seq: Some(resume),
                ..Default::default()
            })
            .await
        {
            Ok(stream) => break stream.into_inner(),
            Err(status) => assert_eq!(status.code(), tonic::Code::ResourceExhausted),
        }
        assert!(started.elapsed() < BOUND, "no place to resume in");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let first_event = loop {
        match resumed.message().await.unwrap().unwrap().message {
            Some(pb::watch_events_response::Message::Event(event)) => break event,
            _ => continue,
        }
    };
    assert_eq!(
        first_event.seq,
        resume + 1,
        "nothing lost across the cut-off"
    );
    server.stop().await;
}

/// The overload test: every transport limit small and reached at once on
/// SQLite while writers run. Each refusal has its code and retry delay,
/// calls over a connection's stream limit queue and complete, a subscriber
/// that stops reading is cut off with its resume position, no acknowledged
/// write is lost, and the server answers normally afterwards. Bounded in
/// count (writers × batches × items, one burst) and time ([`BOUND`] a step).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_every_limit_at_once_refuses_cleanly_and_loses_nothing() {
    const WRITERS: usize = 2;
    // 12,000 rollouts: their events (about 100 bytes each, 1.2 MB) overflow
    // everything between the server and the stalled reader several times
    // over (its 16 KiB budget, the server's HTTP/2 send buffer of about
    // 400 KiB per stream and the client's 64 KiB window), so the cut-off
    // does not depend on how the writes interleave with the sends.
    const BATCHES: usize = 60;
    const ITEMS: usize = 100;
    /// Concurrent calls on one connection: four times its stream limit.
    const BURST: usize = 16;
    let server = TestServer::start_opts(
        Backend::Sqlite,
        common::TestOptions {
            config: ServerConfig {
                transport: TransportLimits {
                    max_connections: 4,
                    max_concurrent_streams: 4,
                    max_subscribers: 2,
                    subscriber_buffer_bytes: 16 * 1024,
                    ..TransportLimits::default()
                },
                subscriber_timeout: Duration::from_millis(200),
                ..ServerConfig::default()
            },
            ..common::TestOptions::default()
        },
    )
    .await;
    // Connection 1: a subscriber that never reads, behind a small window.
    let stalled_channel = Endpoint::from_shared(server.url.clone())
        .unwrap()
        .initial_stream_window_size(Some(65_535))
        .initial_connection_window_size(Some(65_535))
        .connect()
        .await
        .unwrap();
    let mut stalled = LightningStoreServiceClient::new(stalled_channel)
        .watch_events(pb::WatchEventsRequest::default())
        .await
        .unwrap()
        .into_inner();
    // Connection 2: a reading subscriber, then a burst of calls.
    let mut busy = connect(&server.url).await.unwrap();
    let mut live = subscribe(&mut busy).await;
    // Connections 3 and 4: writers.
    let mut writer_clients = Vec::new();
    for _ in 0..WRITERS {
        writer_clients.push(connect(&server.url).await.unwrap());
    }

    // Over the connection limit: UNAVAILABLE with a retry delay.
    let mut fifth = connect(&server.url).await.unwrap();
    let refused = tokio::time::timeout(BOUND, capabilities(&mut fifth))
        .await
        .expect("answered, not left hanging")
        .expect_err("a fifth connection is refused");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(refused.get_details_retry_info().is_some(), "a retry delay");
    drop(fifth);
    // Over the subscriber limit: RESOURCE_EXHAUSTED with a retry delay.
    let refused = busy
        .watch_events(pb::WatchEventsRequest::default())
        .await
        .expect_err("a third subscription is refused");
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(refused.get_details_retry_info().is_some(), "a retry delay");

    let writers: Vec<_> = writer_clients
        .into_iter()
        .map(|mut client| {
            tokio::spawn(async move {
                let mut acknowledged = Vec::new();
                for _ in 0..BATCHES {
                    let answer = client
                        .enqueue_rollouts(pb::EnqueueRolloutsRequest {
                            rollouts: vec![pb::RolloutSpec::default(); ITEMS],
                            ids_only: true,
                            ..Default::default()
                        })
                        .await
                        .expect("a write within every limit succeeds");
                    acknowledged.extend(answer.into_inner().rollout_ids);
                }
                acknowledged
            })
        })
        .collect();
    // Over the stream limit (one stream is the live subscription): the
    // client queues the calls, and all of them complete.
    let burst = (0..BURST).map(|_| {
        let mut client = busy.clone();
        async move { capabilities(&mut client).await }
    });
    let answers = tokio::time::timeout(BOUND, futures::future::join_all(burst))
        .await
        .expect("the queued calls complete");
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    let mut acknowledged = Vec::new();
    for writer in writers {
        let ids = tokio::time::timeout(BOUND * 6, writer)
            .await
            .expect("the writers finish")
            .unwrap();
        acknowledged.extend(ids);
    }
    assert_eq!(acknowledged.len(), WRITERS * BATCHES * ITEMS);

    // The subscriber that stopped reading was cut off, told where to resume.
    let status = loop {
        match tokio::time::timeout(BOUND, stalled.message())
            .await
            .expect("the stalled stream ends")
        {
            Ok(Some(_)) => {}
            Ok(None) => panic!("the stream must end with a status"),
            Err(status) => break status,
        }
    };
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(status.metadata().get("lightningstore-last-seq").is_some());
    // The reading one was not.
    let event = tokio::time::timeout(BOUND, live.message())
        .await
        .expect("the live subscriber is served")
        .expect("still open");
    assert!(event.is_some());
    drop((stalled, live));

    // Every acknowledged write is there, and the server answers normally.
    // (in pieces: an id list is capped at 10,000)
    let mut found = 0;
    for ids in acknowledged.chunks(5_000) {
        let page = tokio::time::timeout(BOUND, async {
            busy.query_rollouts(pb::QueryRolloutsRequest {
                rollout_id_in: ids.to_vec(),
                ..Default::default()
            })
            .await
        })
        .await
        .expect("the query is answered")
        .unwrap()
        .into_inner();
        found += page.total as usize;
    }
    assert_eq!(found, acknowledged.len(), "no write lost");
    common::enqueue(&mut busy, "\"after the overload\"").await;
    server.stop().await;
}

/// `DequeueRolloutRequest`'s `worker_id` (field 1) and an unknown field:
/// prost drops unknown fields on decoding, so no handler could measure them.
#[derive(Clone, PartialEq, prost::Message)]
struct PaddedDequeue {
    #[prost(string, optional, tag = "1")]
    worker_id: Option<String>,
    #[prost(bytes = "vec", tag = "1000")]
    padding: Vec<u8>,
}

/// Sends a `DequeueRollout` padded to about `padding` bytes.
async fn padded_dequeue(
    channel: Channel,
    padding: usize,
) -> Result<pb::DequeueRolloutResponse, tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let request = PaddedDequeue {
        worker_id: Some("worker-1".to_owned()),
        padding: vec![7; padding],
    };
    let path = http::uri::PathAndQuery::from_static(
        "/lightningstore.v1.LightningStoreService/DequeueRollout",
    );
    grpc.unary(
        tonic::Request::new(request),
        path,
        tonic_prost::ProstCodec::default(),
    )
    .await
    .map(tonic::Response::into_inner)
}

/// A control call over the control message limit is refused by its method's
/// size group before any handler runs (the rollout stays queued), even when
/// the excess is fields the handler would never see; under the limit the
/// same call claims it.
#[tokio::test]
async fn a_control_call_over_its_limit_is_refused_before_its_handler() {
    let server = TestServer::start_with_limits(
        Backend::Memory,
        lightning_store::core::limits::RequestLimits {
            max_control_message_bytes: 64 * 1024,
            ..Default::default()
        },
    )
    .await;
    let mut client = server.client().await;
    let queued = common::enqueue(&mut client, "{}").await;

    let refused = padded_dequeue(server.channel().await, 100 * 1024)
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(
        refused
            .message()
            .contains("more than the control message limit of 65536 bytes"),
        "{refused:?}"
    );
    let rollout = client
        .get_rollout(pb::GetRolloutRequest {
            rollout_id: queued.rollout_id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap();
    assert_eq!(rollout.status, queued.status, "the handler ran");

    let claimed = padded_dequeue(server.channel().await, 1024).await.unwrap();
    assert_eq!(claimed.rollout.unwrap().rollout_id, queued.rollout_id);
    server.stop().await;
}
