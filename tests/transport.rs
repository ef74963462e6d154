//! Issue 17's transport cases through the real server: the connection
//! limit, the idle timeout, streams per connection, and accept errors
//! (file descriptors exhausted) backed off instead of spinning a core.

mod common;

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
async fn case_04_connections_beyond_the_limit_are_refused_promptly() {
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
async fn case_04_idle_connections_are_closed_busy_ones_kept() {
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
    writer
        .enqueue_rollout(pb::EnqueueRolloutRequest {
            rollout: Some(pb::RolloutSpec {
                input_json: "1".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
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
async fn case_04_streams_per_connection_are_limited() {
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
async fn case_04_exhausted_file_descriptors_do_not_spin_the_accept_loop() {
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
