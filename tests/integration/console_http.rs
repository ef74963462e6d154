//! The console over plain HTTP (no browser): its flag, its headers, the
//! cookie only its routes accept, its live pages' streams, which end
//! when the server drains and are cut off when the browser reads nothing;
//! its pages' reads, bounded whatever the store holds; the cancel rule the
//! rollout page and the cancel action share; and a rollout whose spans the
//! retention deleted.

use std::time::{Duration, SystemTime};

use lightning_store::auth::Tokens;
use lightning_store::core::access::Caller;
use lightning_store::core::ids::{RolloutId, WorkerId};
use lightning_store::core::model::RolloutStatus;
use lightning_store::core::pages::{MAX_ROWS, OverviewLimits, RolloutLimits};
use lightning_store::core::retention::RetentionPolicy;
use lightning_store::metrics::Metrics;
use lightning_store::proto as pb;
use lightning_store::server::ServerConfig;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::common::http::{HttpClient, Version};
use crate::common::{Backend, TestOptions, TestServer};
use crate::console::support::{add_spans, dequeue, enqueue, finish, span, text};

const KEY: &str = "console-http-key";

async fn start(config: ServerConfig) -> TestServer {
    TestServer::start_opts(
        Backend::Memory,
        TestOptions {
            config,
            ..TestOptions::default()
        },
    )
    .await
}

#[tokio::test]
async fn the_flag_turns_the_console_off() {
    let server = start(ServerConfig {
        console: false,
        ..ServerConfig::default()
    })
    .await;
    let http = HttpClient::new(server.addr, Version::Http1);
    for path in ["/", "/console/rollouts", "/console/assets/console.css"] {
        let response = http.get(path).await;
        assert_eq!(response.status, 404, "{path}");
        assert_eq!(response.json(), serde_json::json!({"detail": "Not Found"}));
    }
}

#[tokio::test]
async fn pages_carry_a_strict_policy_and_only_console_routes_take_the_cookie() {
    let server = start(ServerConfig {
        tokens: Tokens::load(None, Some(KEY)).unwrap(),
        ..ServerConfig::default()
    })
    .await;
    let http = HttpClient::new(server.addr, Version::Http1);
    // Without a token: the sign-in page, itself under the policy.
    let refused = http.get("/console/rollouts?status=running").await;
    assert_eq!(refused.status, 303);
    assert_eq!(
        refused.headers["location"],
        "/console/login?next=%2Fconsole%2Frollouts%3Fstatus%3Drunning"
    );
    let policy = refused.headers["content-security-policy"].to_str().unwrap();
    assert!(policy.contains("script-src 'self'") && policy.contains("default-src 'none'"));
    assert!(!policy.contains("unsafe-inline"));
    // Signing in sets an HttpOnly, SameSite=Strict cookie and goes on.
    let signed = http
        .request(
            "POST",
            "/console/login",
            &[
                ("content-type", "application/x-www-form-urlencoded"),
                ("sec-fetch-site", "same-origin"),
            ],
            format!("token={KEY}&next=%2Fconsole%2Fworkers"),
        )
        .await;
    assert_eq!(signed.status, 303, "{}", signed.text());
    assert_eq!(signed.headers["location"], "/console/workers");
    let cookie = signed.headers["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(!cookie.contains(KEY), "the cookie holds the token encoded");
    let pair = cookie.split(';').next().unwrap().to_owned();
    let page = http
        .request("GET", "/console/workers", &[("cookie", &pair)], "")
        .await;
    assert_eq!(page.status, 200);
    assert!(page.text().contains("<h1>Workers</h1>"));
    assert!(!page.text().contains(KEY), "the token is on no page");
    // A browser that holds a revoked token's cookie can sign in again.
    let stale = format!("lightning_store_token={}", hex::encode("revoked"));
    let again = http
        .request(
            "POST",
            "/console/login",
            &[
                ("cookie", &stale),
                ("content-type", "application/x-www-form-urlencoded"),
                ("sec-fetch-site", "same-origin"),
            ],
            format!("token={KEY}"),
        )
        .await;
    assert_eq!(again.status, 303, "{}", again.text());
    // The API never takes the cookie: another page could make a browser send it.
    let api = http
        .request("GET", "/api/rollouts", &[("cookie", &pair)], "")
        .await;
    assert_eq!(api.status, 401);
    // Scripts may send the bearer token to the console, as to the API.
    let bearer = format!("Bearer {KEY}");
    let page = http
        .request("GET", "/", &[("authorization", &bearer)], "")
        .await;
    assert_eq!(page.status, 200);
    // A form from another site is refused, whatever it carries.
    let forged = http
        .request(
            "POST",
            "/console/gateway/pause",
            &[
                ("cookie", &pair),
                ("sec-fetch-site", "cross-site"),
                ("content-type", "application/x-www-form-urlencoded"),
            ],
            "retry_after=5",
        )
        .await;
    assert_eq!(forged.status, 403);
    assert!(!server.engine.gateway_pause().await.unwrap().paused);
    // Assets are public and cached for good (their URL changes with them).
    let css = http.get("/console/assets/console.css").await;
    assert_eq!(css.status, 200);
    assert!(
        css.headers["cache-control"]
            .to_str()
            .unwrap()
            .contains("immutable")
    );
}

/// Opens a live page's event stream on a raw connection; returns it after
/// the response's head.
async fn open_stream(
    addr: std::net::SocketAddr,
    path: &str,
    receive_buffer: Option<u32>,
) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    if let Some(bytes) = receive_buffer {
        socket.set_recv_buffer_size(bytes).unwrap();
    }
    let mut stream = socket.connect(addr).await.unwrap();
    let request =
        format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        assert_eq!(
            stream.read(&mut byte).await.unwrap(),
            1,
            "the stream answered"
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("content-type: text/event-stream"), "{head}");
    stream
}

/// Reads until the server ends the response or closes the connection;
/// returns what was read.
async fn read_to_end(stream: &mut TcpStream) -> Vec<u8> {
    let mut read = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return read,
            Ok(n) => {
                read.extend_from_slice(&buffer[..n]);
                // The last chunk of a chunked body.
                if read.ends_with(b"\r\n0\r\n\r\n") {
                    return read;
                }
            }
        }
    }
}

#[tokio::test]
async fn live_pages_end_when_the_server_drains() {
    let server = start(ServerConfig {
        drain_timeout: Duration::from_secs(60),
        ..ServerConfig::default()
    })
    .await;
    let mut streams = Vec::new();
    for path in ["/", "/console/rollouts", "/console/workers"] {
        streams.push(open_stream(server.addr, path, None).await);
    }
    // Well within the drain's 60 s: open streams do not hold it.
    tokio::time::timeout(Duration::from_secs(20), server.stop())
        .await
        .expect("the server drained with live pages open");
    for mut stream in streams {
        let read = tokio::time::timeout(Duration::from_secs(5), read_to_end(&mut stream))
            .await
            .expect("each stream ended");
        assert!(String::from_utf8_lossy(&read).contains("retry:"));
    }
}

#[tokio::test]
async fn a_live_page_that_reads_nothing_is_cut_off() {
    let metrics = Metrics::new();
    let server = start(ServerConfig {
        subscriber_timeout: Duration::from_millis(300),
        metrics: metrics.clone(),
        ..ServerConfig::default()
    })
    .await;
    let mut client = server.client().await;
    let rollout_id = enqueue(&mut client, "{}").await;
    let (_, attempt) = dequeue(&mut client, "w").await;
    // A heavy page: each render is megabytes, more than the sockets hold.
    let base = SystemTime::now();
    let padding = "x".repeat(3_500);
    let spans: Vec<pb::Span> = (0..600)
        .map(|i| {
            let id = format!("s{i}");
            let attributes = (0..3)
                .map(|k| text(&format!("pad.{k}"), &padding))
                .collect();
            span(
                &rollout_id,
                &attempt,
                &id,
                None,
                "padded",
                base,
                (i, i + 1),
                attributes,
            )
        })
        .collect();
    add_spans(&mut client, spans).await;
    let path = format!("/console/rollouts/{rollout_id}");
    let mut stalled = open_stream(server.addr, &path, Some(4096)).await;
    assert_eq!(metrics.console_live_pages_open(), 1);
    // Each new span makes a new render; the page is cut off once frames
    // wait longer than the subscriber timeout (bounded: 20 s of changes).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut added = 0;
    while metrics.console_live_pages_open() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a page that reads nothing was not cut off ({added} changes)"
        );
        let more = span(
            &rollout_id,
            &attempt,
            &format!("more{added}"),
            None,
            "more",
            base,
            (0, 1),
            Vec::new(),
        );
        add_spans(&mut client, vec![more]).await;
        added += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Its connection was closed: what it holds ends (no more frames come).
    tokio::time::timeout(Duration::from_secs(10), read_to_end(&mut stalled))
        .await
        .expect("the connection was closed");
    // Another page still gets its updates (of changes after it rendered).
    let latest = server.engine.events_after(0, 0).await.unwrap().latest;
    let path = format!("/console/rollouts?live_after={latest}");
    let mut reader = open_stream(server.addr, &path, None).await;
    enqueue(&mut client, "{}").await;
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("event: update") {
        let n = tokio::time::timeout(Duration::from_secs(10), reader.read(&mut buffer))
            .await
            .expect("an update within 10 s")
            .unwrap();
        assert!(n > 0, "the stream ended");
        seen.extend_from_slice(&buffer[..n]);
    }
}

/// Workers whose sessions the Overview counts (the console's limit).
const OVERVIEW_SESSION_WORKERS: usize = 1_000;

async fn add_workers(server: &TestServer, from: usize, to: usize) {
    for i in from..to {
        let worker_id = WorkerId::parse("worker_id", format!("worker-{i:05}")).unwrap();
        server
            .engine
            .update_worker(&worker_id, None, &Caller::anyone())
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn the_overview_is_one_bounded_read() {
    let server = start(ServerConfig::default()).await;
    add_workers(&server, 0, 5).await;
    let limits = OverviewLimits {
        failures: 1,
        events: 10,
        workers: 3,
    };
    let read = server.engine.overview_page(limits).await.unwrap();
    // Counted whole, listed up to the limit.
    assert_eq!(read.workers_total, 5);
    assert_eq!(read.workers_by_status.values().sum::<u64>(), 5);
    assert_eq!(read.sessions_of, 3);
    let unbounded = OverviewLimits {
        workers: MAX_ROWS + 1,
        ..limits
    };
    assert!(server.engine.overview_page(unbounded).await.is_err());

    // The page: every worker counted, the sessions of the first ones, and
    // it says so.
    let http = HttpClient::new(server.addr, Version::Http1);
    let page = http.get("/").await.text();
    assert!(page.contains("5 known"), "{page}");
    assert!(!page.contains("of the first"), "{page}");
    add_workers(&server, 5, OVERVIEW_SESSION_WORKERS + 1).await;
    let page = http.get("/").await.text();
    assert!(page.contains("1,001 known"), "{page}");
    assert!(page.contains("of the first 1,000 workers"), "{page}");
}

/// Posts a console form (from no browser: no origin headers, no form token
/// needed on an open port).
async fn post_form(http: &HttpClient, path: &str) -> u16 {
    http.request(
        "POST",
        path,
        &[("content-type", "application/x-www-form-urlencoded")],
        "",
    )
    .await
    .status
}

#[tokio::test]
async fn a_rollout_may_be_cancelled_until_it_finishes() {
    let server = start(ServerConfig::default()).await;
    let mut client = server.client().await;
    let rollout_id = enqueue(&mut client, "{}").await;
    let http = HttpClient::new(server.addr, Version::Http1);
    let page = format!("/console/rollouts/{rollout_id}");
    let cancel = format!("{page}/cancel");
    assert!(http.get(&page).await.text().contains(&cancel));
    let confirm = http.get(&cancel).await;
    assert_eq!(confirm.status, 200);
    assert!(confirm.text().contains("Cancel rollout"));
    assert_eq!(post_form(&http, &cancel).await, 303);
    let id = RolloutId::parse("rollout_id", rollout_id.clone()).unwrap();
    let view = server.engine.get_rollout(&id).await.unwrap();
    assert_eq!(view.rollout.status, RolloutStatus::Cancelled);
    // Finished: no link, no confirmation, nothing to cancel.
    assert!(!http.get(&page).await.text().contains(&cancel));
    assert_eq!(http.get(&cancel).await.status, 409);
    assert_eq!(post_form(&http, &cancel).await, 409);
}

#[tokio::test]
async fn a_rollout_whose_spans_the_retention_deleted_says_so() {
    let server = TestServer::start_opts(
        Backend::Memory,
        TestOptions {
            span_retention: RetentionPolicy {
                max_age: Some(Duration::ZERO),
                max_bytes: None,
            },
            retention_interval: Duration::from_secs(3600),
            ..TestOptions::default()
        },
    )
    .await;
    let mut client = server.client().await;
    let rollout_id = enqueue(&mut client, "{}").await;
    let (_, attempt) = dequeue(&mut client, "w").await;
    let base = SystemTime::now();
    let spans = vec![span(
        &rollout_id,
        &attempt,
        "s",
        None,
        "run",
        base,
        (0, 1),
        Vec::new(),
    )];
    add_spans(&mut client, spans).await;
    finish(
        &mut client,
        &rollout_id,
        &attempt,
        pb::AttemptStatus::Succeeded,
    )
    .await;
    let id = RolloutId::parse("rollout_id", rollout_id.clone()).unwrap();
    let limits = RolloutLimits {
        attempts: 10,
        spans: 10,
        events: 10,
        workers: 10,
    };
    let before = server.engine.rollout_page(&id, limits, 0).await.unwrap();
    assert!(!before.spans_evicted);
    assert_eq!(before.spans.total, 1);
    assert!(!before.cancellable);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let evicted = server.engine.apply_retention().await.unwrap();
    assert_eq!(evicted.rollouts, 1);
    let after = server.engine.rollout_page(&id, limits, 0).await.unwrap();
    assert!(after.spans_evicted);
    assert!(after.spans.items.is_empty());
    let http = HttpClient::new(server.addr, Version::Http1);
    let page = http.get(&format!("/console/rollouts/{rollout_id}")).await;
    assert_eq!(page.status, 200);
    assert!(
        page.text()
            .contains("The span retention deleted this rollout")
    );
    let download = http
        .get(&format!("/console/rollouts/{rollout_id}/download"))
        .await;
    assert_eq!(download.status, 200);
    assert_eq!(download.json()["spans_evicted"], serde_json::json!(true));
}

/// A comparison whose URL names a version the store does not hold shows
/// the Training page with why, not an error page.
#[tokio::test]
async fn comparing_a_version_the_store_does_not_hold_says_so_on_the_page() {
    let server = start(ServerConfig::default()).await;
    let mut client = server.client().await;
    crate::common::add_resources(&mut client, r#"{"policy": "v1"}"#).await;
    enqueue(&mut client, "{}").await;
    let (rollout_id, attempt_id) = dequeue(&mut client, "w").await;
    finish(
        &mut client,
        &rollout_id,
        &attempt_id,
        pb::AttemptStatus::Succeeded,
    )
    .await;
    let http = HttpClient::new(server.addr, Version::Http1);
    let page = http
        .get("/console/training?compare_mode=train&before=1&after=7")
        .await;
    assert_eq!(page.status, 200, "{}", page.text());
    let body = page.text();
    assert!(
        body.contains(
            r#"<p class="bad" id="compare-refused">Cannot compare: no resources version 7.</p>"#
        ),
        "{body}"
    );
    assert!(!body.contains("compare-none"), "one reason, not two");
}
