//! Access control through the real server: every role against every RPC
//! and HTTP route (allowed, or refused with nothing written), worker-bound
//! runner tokens, TLS with a CA made here, mTLS, rotation of certificates
//! and tokens while clients are connected, and the refusal to expose an
//! unguarded port.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::http::{HttpClient, Version};
use common::{Backend, TestServer};
use lightning_store::auth::Tokens;
use lightning_store::auth::policy::Role;
use lightning_store::auth::tokens::{LineScope, file_line};
use lightning_store::cli::connection::ConnectArgs;
use lightning_store::core::model::Counts;
use lightning_store::metrics::{Exposition, Metrics};
use lightning_store::proto;
use lightning_store::proto::lightning_store_service_client::LightningStoreServiceClient;
use lightning_store::server::ServerConfig;
use lightning_store::tls::{TlsAcceptor, TlsFiles};
use lightning_store::transport::TransportLimits;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use tonic::Code;
use tonic::transport::Channel;
use tonic_types::StatusExt as _;

/// A request with no fields: every request message decodes from it, and
/// every response decodes into it (unknown fields are skipped).
#[derive(Clone, PartialEq, prost::Message)]
struct Empty {}

/// The tokens of the table test, one per role.
const ROLES: [(&str, Role); 5] = [
    ("admin-token", Role::Admin),
    ("algorithm-token", Role::Algorithm),
    ("runner-token", Role::Runner),
    ("ingest-token", Role::Ingest),
    ("read-token", Role::Read),
];

/// What each role may do, written here independently of the server's
/// table: R read, O rollouts, S resources, G gateway, W work, I ingest,
/// N namespaces, X export.
fn grants(role: Role) -> &'static str {
    match role {
        Role::Admin => "ROSGWINX",
        Role::Algorithm => "ROSGX",
        Role::Runner => "RWI",
        Role::Ingest => "I",
        Role::Read => "RX",
    }
}

/// Every RPC with the permission it needs (`-`: open) and its shape
/// (u unary, s server stream, b bidirectional stream).
const RPCS: &[(&str, char, char)] = &[
    (
        "lightningstore.v1.LightningStoreService/GetCapabilities",
        'R',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/GetStatistics",
        'R',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/GetRolloutActivity",
        'R',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/GetTrainingSummary",
        'R',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/GetRewardTimeline",
        'R',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/CompareVersions",
        'R',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/GetQueuePosition",
        'R',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/ListRecentFailures",
        'R',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/StartRollout",
        'O',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/EnqueueRollout",
        'O',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/EnqueueRollouts",
        'O',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/DequeueRollout",
        'W',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/DequeueRollouts",
        'W',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/StartAttempt",
        'W',
        'u',
    ),
    ("lightningstore.v1.LightningStoreService/AddSpan", 'W', 'u'),
    ("lightningstore.v1.LightningStoreService/AddSpans", 'W', 'u'),
    (
        "lightningstore.v1.LightningStoreService/GetNextSpanSequenceId",
        'W',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/GetSpanSequenceIds",
        'W',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/QueryRollouts",
        'R',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/GetRollout",
        'R',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/UpdateRollout",
        'O',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/QueryAttempts",
        'R',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/GetLatestAttempt",
        'R',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/UpdateAttempt",
        'W',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/UpdateAttempts",
        'W',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/WaitForRollouts",
        'R',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/WatchRolloutCompletions",
        'R',
        's',
    ),
    (
        "lightningstore.v1.LightningStoreService/WatchEvents",
        'R',
        's',
    ),
    (
        "lightningstore.v1.LightningStoreService/WorkerSession",
        'W',
        'b',
    ),
    (
        "lightningstore.v1.LightningStoreService/QuerySpans",
        'R',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/ExportRollouts",
        'X',
        's',
    ),
    (
        "lightningstore.v1.LightningStoreService/AddResources",
        'S',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/UpdateResources",
        'S',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/GetResources",
        'R',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/GetLatestResources",
        'R',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/QueryResources",
        'R',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/QueryWorkers",
        'R',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/GetWorker",
        'R',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/UpdateWorker",
        'W',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/CreateNamespace",
        'N',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/ListNamespaces",
        'N',
        'u',
    ),
    (
        "lightningstore.v1.LightningStoreService/DeleteNamespace",
        'N',
        'u',
    ),
    (
        "opentelemetry.proto.collector.trace.v1.TraceService/Export",
        'I',
        'u',
    ),
    ("grpc.health.v1.Health/Check", '-', 'u'),
];

/// Every HTTP route (method, a path matching it, permission).
const ROUTES: &[(&str, &str, char)] = &[
    ("GET", "/v1/agl/health", '-'),
    ("GET", "/v1/agl/statistics", 'R'),
    ("POST", "/v1/agl/queues/rollouts/enqueue", 'O'),
    ("POST", "/v1/agl/queues/rollouts/dequeue", 'W'),
    ("GET", "/v1/agl/rollouts", 'R'),
    ("POST", "/v1/agl/rollouts", 'O'),
    ("POST", "/v1/agl/rollouts/search", 'R'),
    ("GET", "/v1/agl/rollouts/search", 'R'),
    ("GET", "/v1/agl/rollouts/ro-1", 'R'),
    ("POST", "/v1/agl/rollouts/ro-1", 'O'),
    ("GET", "/v1/agl/rollouts/ro-1/attempts", 'R'),
    ("POST", "/v1/agl/rollouts/ro-1/attempts", 'W'),
    ("POST", "/v1/agl/rollouts/ro-1/attempts/search", 'R'),
    ("GET", "/v1/agl/rollouts/ro-1/attempts/latest", 'R'),
    ("POST", "/v1/agl/rollouts/ro-1/attempts/latest", 'W'),
    ("POST", "/v1/agl/rollouts/ro-1/attempts/at-1", 'W'),
    ("POST", "/v1/agl/waits/rollouts", 'R'),
    ("GET", "/v1/agl/spans", 'R'),
    ("POST", "/v1/agl/spans", 'W'),
    ("POST", "/v1/agl/spans/search", 'R'),
    ("POST", "/v1/agl/spans/next", 'W'),
    ("GET", "/v1/agl/resources", 'R'),
    ("POST", "/v1/agl/resources", 'S'),
    ("GET", "/v1/agl/resources/latest", 'R'),
    ("POST", "/v1/agl/resources/latest", 'S'),
    ("GET", "/v1/agl/resources/rs-1", 'R'),
    ("POST", "/v1/agl/resources/rs-1", 'S'),
    ("GET", "/v1/agl/workers", 'R'),
    ("POST", "/v1/agl/workers/search", 'R'),
    ("GET", "/v1/agl/workers/search", 'R'),
    ("GET", "/v1/agl/workers/w-1", 'R'),
    ("POST", "/v1/agl/workers/w-1", 'W'),
    ("POST", "/v1/traces", 'I'),
    ("POST", "/v1/metrics", 'I'),
    ("POST", "/v1/logs", 'I'),
    ("POST", "/v1/development/profiles", 'I'),
    ("GET", "/healthz", '-'),
    ("POST", "/api/rollouts", 'O'),
    ("GET", "/api/rollouts", 'R'),
    ("GET", "/api/rollouts/terminal", 'R'),
    ("GET", "/api/rollouts/ro-1", 'R'),
    ("PATCH", "/api/rollouts/ro-1", 'O'),
    ("DELETE", "/api/rollouts/ro-1", 'O'),
    ("POST", "/api/rollouts/ro-1/attempt/at-1/events", 'W'),
    ("GET", "/api/rollouts/ro-1/events", 'R'),
    ("POST", "/api/models", 'S'),
    ("DELETE", "/api/models", 'S'),
    ("POST", "/proxy/pause", 'G'),
    ("POST", "/proxy/resume", 'G'),
    ("GET", "/proxy/state", 'R'),
    (
        "POST",
        "/proxy/rollout/ro-1/attempt/at-1/mode/train/openai/v1/chat/completions",
        'W',
    ),
];

/// Writes a tokens file holding `lines` and returns its directory.
fn tokens_file(lines: &[String]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens");
    std::fs::write(&path, lines.join("\n")).unwrap();
    (dir, path)
}

fn role_tokens() -> Vec<String> {
    ROLES
        .iter()
        .map(|(token, role)| {
            file_line(
                token,
                &[*role],
                &LineScope {
                    name: Some(&role.to_string()),
                    ..LineScope::default()
                },
            )
        })
        .collect()
}

/// Sends one call to `path` with an empty request and `token`; returns the
/// status code (OK for a stream whose response started).
async fn call(channel: &Channel, path: &str, shape: char, token: Option<&str>) -> Code {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<Empty, Empty>::default();
    let name = path;
    let path: http::uri::PathAndQuery = format!("/{path}").parse().unwrap();
    let call = async {
        match shape {
            'u' => grpc
                .unary(
                    with_token(tonic::Request::new(Empty {}), token),
                    path,
                    codec,
                )
                .await
                .map(drop),
            's' => grpc
                .server_streaming(
                    with_token(tonic::Request::new(Empty {}), token),
                    path,
                    codec,
                )
                .await
                .map(drop),
            _ => {
                let messages = futures::stream::iter([Empty {}]);
                grpc.streaming(
                    with_token(tonic::Request::new(messages), token),
                    path,
                    codec,
                )
                .await
                .map(drop)
            }
        }
    };
    match tokio::time::timeout(Duration::from_secs(10), call).await {
        Ok(Ok(())) => Code::Ok,
        Ok(Err(status)) => status.code(),
        Err(_) => panic!("{name} did not answer"),
    }
}

fn with_token<T>(mut request: tonic::Request<T>, token: Option<&str>) -> tonic::Request<T> {
    if let Some(token) = token {
        let value = format!("Bearer {token}").parse().unwrap();
        request.metadata_mut().insert("authorization", value);
    }
    request
}

fn refusal_codes(allowed: bool, code: Code) -> bool {
    if allowed {
        !matches!(code, Code::PermissionDenied | Code::Unauthenticated)
    } else {
        code == Code::PermissionDenied
    }
}

async fn auth_failures(metrics: &Metrics, server: &TestServer, reason: &str) -> u64 {
    let text = metrics
        .render(
            &[("default".into(), server.engine.clone())],
            Exposition::PrometheusText,
        )
        .await;
    let prefix = format!("lightning_store_auth_failures_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map_or(0, |value| value.parse().unwrap())
}

#[tokio::test]
async fn every_role_against_every_rpc_and_route_and_nothing_written_when_refused() {
    let (_dir, path) = tokens_file(&role_tokens());
    let metrics = Metrics::new();
    let server = TestServer::start_with(
        Backend::Memory,
        ServerConfig {
            tokens: Tokens::load(Some(&path), None).unwrap(),
            metrics: metrics.clone(),
            ..ServerConfig::default()
        },
    )
    .await;
    let channel = server.channel().await;
    let http = HttpClient::new(server.addr, Version::Http1);

    // The table covers every method of the contract.
    let contract = include_str!("../../proto/lightningstore/v1/store.proto");
    let methods = contract
        .lines()
        .filter(|l| l.trim().starts_with("rpc "))
        .count();
    assert_eq!(RPCS.len(), methods + 2, "a method is missing from RPCS");
    // And every route the server declares.
    let declared = lightning_store::http::routes().needs().declared().count();
    assert_eq!(ROUTES.len(), declared, "a route is missing from ROUTES");

    // Refused calls first: nothing may be written by them.
    let mut refused = 0;
    for (path, need, shape) in RPCS {
        for credential in [None, Some("not-a-token")] {
            let code = call(&channel, path, *shape, credential).await;
            let expected = if *need == '-' {
                code != Code::Unauthenticated
            } else {
                code == Code::Unauthenticated
            };
            assert!(expected, "{path} with {credential:?}: {code:?}");
        }
        for (token, role) in ROLES {
            if *need == '-' || grants(role).contains(*need) {
                continue;
            }
            let code = call(&channel, path, *shape, Some(token)).await;
            assert!(refusal_codes(false, code), "{path} as {role}: {code:?}");
            refused += 1;
        }
    }
    for (method, path, need) in ROUTES {
        let body = if *method == "GET" { "" } else { "{}" };
        let headers = [("content-type", "application/json")];
        let anonymous = http.request(method, path, &headers, body).await;
        if *need == '-' {
            assert_eq!(anonymous.status, 200, "{method} {path}");
        } else {
            assert_eq!(
                anonymous.status,
                401,
                "{method} {path}: {}",
                anonymous.text()
            );
            assert_eq!(anonymous.headers["www-authenticate"], "Bearer");
        }
        for (token, role) in ROLES {
            if *need == '-' || grants(role).contains(*need) {
                continue;
            }
            let bearer = format!("Bearer {token}");
            let headers = [
                ("content-type", "application/json"),
                ("authorization", bearer.as_str()),
            ];
            let response = http.request(method, path, &headers, body).await;
            assert_eq!(
                response.status,
                403,
                "{method} {path} as {role}: {}",
                response.text()
            );
            refused += 1;
        }
    }
    assert!(refused > 150, "{refused}");
    let counts = server.engine.statistics().await.unwrap().counts;
    assert_eq!(counts, Counts::default(), "a refused call wrote");
    let state = http
        .request(
            "GET",
            "/proxy/state",
            &[("authorization", "Bearer read-token")],
            "",
        )
        .await;
    assert_eq!(state.status, 200);
    assert!(
        !state.text().contains("\"paused\":true"),
        "{}",
        state.text()
    );
    assert!(auth_failures(&metrics, &server, "forbidden").await >= refused);
    assert!(auth_failures(&metrics, &server, "missing").await > 0);
    assert!(auth_failures(&metrics, &server, "invalid").await > 0);

    // Then every allowed call passes the check (its own answer may be an
    // error about the empty request).
    for (path, need, shape) in RPCS {
        for (token, role) in ROLES {
            if *need != '-' && grants(role).contains(*need) {
                let code = call(&channel, path, *shape, Some(token)).await;
                assert!(refusal_codes(true, code), "{path} as {role}: {code:?}");
            }
        }
    }
    for (method, path, need) in ROUTES {
        let body = if *method == "GET" { "" } else { "{}" };
        for (token, role) in ROLES {
            if *need != '-' && grants(role).contains(*need) {
                let bearer = format!("Bearer {token}");
                let headers = [
                    ("content-type", "application/json"),
                    ("authorization", bearer.as_str()),
                ];
                let response = http.request(method, path, &headers, body).await;
                assert!(
                    ![401, 403].contains(&response.status),
                    "{method} {path} as {role}: {} {}",
                    response.status,
                    response.text()
                );
            }
        }
    }
    // agent-lightning 1.x's clients send the key as x-api-key.
    let response = http
        .request("GET", "/proxy/state", &[("x-api-key", "read-token")], "")
        .await;
    assert_eq!(response.status, 200);
    server.stop().await;
}

#[tokio::test]
async fn a_worker_bound_runner_token_is_refused_for_another_worker() {
    let (_dir, path) = tokens_file(&[
        file_line(
            "bound",
            &[Role::Runner],
            &LineScope {
                workers: &["w-1".into()],
                name: Some("runner-1"),
                ..LineScope::default()
            },
        ),
        file_line("algo", &[Role::Algorithm], &LineScope::default()),
    ]);
    let metrics = Metrics::new();
    let server = TestServer::start_with(
        Backend::Memory,
        ServerConfig {
            tokens: Tokens::load(Some(&path), None).unwrap(),
            metrics: metrics.clone(),
            ..ServerConfig::default()
        },
    )
    .await;
    let args = ConnectArgs::default();
    let client = |token: &'static str| {
        let endpoint = args.endpoint(&server.url).unwrap();
        async move {
            let channel = endpoint.connect().await.unwrap();
            LightningStoreServiceClient::with_interceptor(
                channel,
                move |mut r: tonic::Request<()>| {
                    r.metadata_mut()
                        .insert("authorization", format!("Bearer {token}").parse().unwrap());
                    Ok(r)
                },
            )
        }
    };
    let mut algo = client("algo").await;
    let mut runner = client("bound").await;
    for _ in 0..2 {
        algo.enqueue_rollout(proto::EnqueueRolloutRequest {
            request_id: None,
            rollout: Some(proto::RolloutSpec {
                input_json: "{}".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    }
    let dequeue = |worker: Option<&str>| proto::DequeueRolloutRequest {
        worker_id: worker.map(str::to_owned),
        ..Default::default()
    };
    let denied = runner
        .dequeue_rollout(dequeue(Some("w-2")))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    let anonymous = runner.dequeue_rollout(dequeue(None)).await.unwrap_err();
    assert_eq!(anonymous.code(), Code::PermissionDenied, "{anonymous:?}");
    assert_eq!(
        server.engine.statistics().await.unwrap().counts.queued,
        2,
        "nothing taken"
    );
    let claimed = runner
        .dequeue_rollout(dequeue(Some("w-1")))
        .await
        .unwrap()
        .into_inner();
    let rollout = claimed.rollout.expect("w-1 takes work");
    let attempt = rollout.attempt.unwrap();

    let hijack = runner
        .update_attempt(proto::UpdateAttemptRequest {
            rollout_id: rollout.rollout_id.clone(),
            attempt_id: attempt.attempt_id.clone(),
            worker_id: "w-2".into(),
            update_mask: Some(prost_types::FieldMask {
                paths: vec!["worker_id".into()],
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(hijack.code(), Code::PermissionDenied);
    // In a batch, the one update for another worker refuses the whole batch.
    let update = |worker_id: &str| proto::UpdateAttemptRequest {
        rollout_id: rollout.rollout_id.clone(),
        attempt_id: attempt.attempt_id.clone(),
        worker_id: worker_id.into(),
        update_mask: Some(prost_types::FieldMask {
            paths: vec!["worker_id".into()],
        }),
        ..Default::default()
    };
    let hijack = runner
        .update_attempts(proto::UpdateAttemptsRequest {
            updates: vec![update("w-1"), update("w-2")],
        })
        .await
        .unwrap_err();
    assert_eq!(hijack.code(), Code::PermissionDenied);
    assert!(hijack.message().starts_with("updates[1]: "), "{hijack:?}");
    let heartbeat = runner
        .update_worker(proto::UpdateWorkerRequest {
            worker_id: "w-2".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(heartbeat.code(), Code::PermissionDenied);
    runner
        .update_worker(proto::UpdateWorkerRequest {
            worker_id: "w-1".into(),
            ..Default::default()
        })
        .await
        .unwrap();

    // A session under another worker's id is refused at its open message.
    let open = |worker: &str| proto::WorkerSessionRequest {
        message: Some(proto::worker_session_request::Message::Open(
            proto::OpenSession {
                worker_id: worker.into(),
                slots: 1,
            },
        )),
    };
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(open("w-2")).await.unwrap();
    let session = runner
        .worker_session(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await;
    let refused = match session {
        Err(status) => status,
        Ok(response) => response.into_inner().message().await.unwrap_err(),
    };
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");

    // Over HTTP too.
    let http = HttpClient::new(server.addr, Version::Http1);
    let headers = [
        ("content-type", "application/json"),
        ("authorization", "Bearer bound"),
    ];
    let response = http
        .request(
            "POST",
            "/v1/agl/queues/rollouts/dequeue",
            &headers,
            r#"{"worker_id":"w-2"}"#,
        )
        .await;
    assert_eq!(response.status, 403, "{}", response.text());
    let response = http
        .request("POST", "/v1/agl/workers/w-2", &headers, "{}")
        .await;
    assert_eq!(response.status, 403, "{}", response.text());
    assert_eq!(server.engine.statistics().await.unwrap().counts.queued, 1);
    assert_eq!(auth_failures(&metrics, &server, "worker").await, 8);
    server.stop().await;
}

/// A CA made by the test and certificates it signs.
struct Pki {
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        Self {
            ca: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    /// Returns (certificate, key) PEM for `names`.
    fn issue(&self, names: &[&str]) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &self.ca)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn write(&self, dir: &Path, name: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, self.ca.pem()).unwrap();
        path
    }
}

/// Writes the server's certificate for 127.0.0.1 signed by `pki`.
fn write_server_cert(pki: &Pki, dir: &Path) -> TlsFiles {
    let (cert, key) = pki.issue(&["127.0.0.1", "localhost"]);
    // Both through a rename, as a Secret's update lands: never half-written.
    for (name, pem) in [("server.key", key), ("server.pem", cert)] {
        let tmp = dir.join(format!("{name}.tmp"));
        std::fs::write(&tmp, pem).unwrap();
        std::fs::rename(tmp, dir.join(name)).unwrap();
    }
    TlsFiles {
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
        client_ca: None,
    }
}

fn tls_client(ca: &Path) -> ConnectArgs {
    ConnectArgs {
        ca_cert: Some(ca.to_owned()),
        ..ConnectArgs::default()
    }
}

async fn statistics(channel: Channel, token: &str) -> Result<(), tonic::Status> {
    let token: tonic::metadata::MetadataValue<_> = format!("Bearer {token}").parse().unwrap();
    let mut client =
        LightningStoreServiceClient::with_interceptor(channel, move |mut r: tonic::Request<()>| {
            r.metadata_mut().insert("authorization", token.clone());
            Ok(r)
        });
    client
        .get_statistics(proto::GetStatisticsRequest {})
        .await
        .map(drop)
}

/// Returns whether a new connection made with `args` gets an answer.
async fn served(args: &ConnectArgs, url: &str, token: &str) -> bool {
    match args.endpoint(url).unwrap().connect().await {
        Ok(channel) => statistics(channel, token).await.is_ok(),
        Err(_) => false,
    }
}

/// Retries `probe` until it holds, within five seconds (the server
/// re-reads its files on a timer; nothing else announces the reload).
async fn eventually<F, Fut>(what: &str, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(5);
    while !probe().await {
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn tls_with_rotation_of_the_certificate_and_the_tokens_while_clients_are_connected() {
    let dir = tempfile::tempdir().unwrap();
    let first = Pki::new("first ca");
    let files = write_server_cert(&first, dir.path());
    let first_ca = first.write(dir.path(), "first-ca.pem");
    let tokens_path = dir.path().join("tokens");
    std::fs::write(
        &tokens_path,
        file_line("old", &[Role::Read], &LineScope::default()),
    )
    .unwrap();
    let metrics = Metrics::new();
    let server = TestServer::start_with(
        Backend::Memory,
        ServerConfig {
            tokens: Tokens::load(Some(&tokens_path), None).unwrap(),
            tls: Some(TlsAcceptor::load(files).unwrap()),
            reload_interval: Duration::from_millis(20),
            metrics: metrics.clone(),
            ..ServerConfig::default()
        },
    )
    .await;
    let url = format!("https://127.0.0.1:{}", server.addr.port());

    // Plaintext gets nowhere; TLS with the right CA does.
    let plain = Channel::from_shared(server.url.clone())
        .unwrap()
        .connect()
        .await;
    let plain_refused = match plain {
        Err(_) => true,
        Ok(channel) => statistics(channel, "old").await.is_err(),
    };
    assert!(plain_refused, "a plaintext client was served");
    let connected = tls_client(&first_ca)
        .endpoint(&url)
        .unwrap()
        .connect()
        .await
        .unwrap();
    statistics(connected.clone(), "old").await.unwrap();
    let unauthenticated = statistics(connected.clone(), "new").await.unwrap_err();
    assert_eq!(unauthenticated.code(), Code::Unauthenticated);

    // HTTP/1.1 over TLS on the same port (ALPN http/1.1).
    let response = https_get(server.addr, &first_ca, "/v1/agl/statistics", "old").await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");

    // Rotate the tokens: the connected client's next call sees the change.
    std::fs::write(
        &tokens_path,
        file_line("new", &[Role::Read], &LineScope::default()),
    )
    .unwrap();
    eventually("token rotation", || {
        let channel = connected.clone();
        async move { statistics(channel, "new").await.is_ok() }
    })
    .await;
    assert_eq!(
        statistics(connected.clone(), "old")
            .await
            .unwrap_err()
            .code(),
        Code::Unauthenticated
    );

    // Rotate the certificate to another CA: new connections get it, the
    // open one keeps working.
    let second = Pki::new("second ca");
    write_server_cert(&second, dir.path());
    let second_ca = second.write(dir.path(), "second-ca.pem");
    let second_client = tls_client(&second_ca);
    eventually("certificate rotation", || {
        served(&second_client, &url, "new")
    })
    .await;
    assert!(
        !served(&tls_client(&first_ca), &url, "new").await,
        "a client trusting only the old CA was served"
    );
    statistics(connected.clone(), "new").await.unwrap();

    // A broken file keeps the last good configuration.
    std::fs::write(&tokens_path, "not a tokens file").unwrap();
    eventually("the failed reload to be counted", || {
        let (metrics, server) = (&metrics, &server);
        async move {
            metrics
                .render(
                    &[("default".into(), server.engine.clone())],
                    Exposition::PrometheusText,
                )
                .await
                .contains("lightning_store_reloads_total{file=\"tokens\",result=\"error\"} 1")
        }
    })
    .await;
    statistics(connected, "new").await.unwrap();
    server.stop().await;
}

/// Sends `GET path` over HTTP/1.1 and TLS; returns the raw response.
async fn https_get(addr: std::net::SocketAddr, ca: &Path, path: &str, token: &str) -> String {
    use rustls::pki_types::pem::PemObject;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut stream = connector.connect(name, tcp).await.unwrap();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    response
}

/// A connection over the connection limit is refused after the TLS
/// handshake, so a TLS client reads UNAVAILABLE with a retry delay instead
/// of failing its handshake on plaintext bytes.
#[tokio::test]
async fn a_tls_connection_over_the_limit_is_refused_in_tls() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new("server ca");
    let files = write_server_cert(&pki, dir.path());
    let ca = pki.write(dir.path(), "ca.pem");
    let server = TestServer::start_with(
        Backend::Memory,
        ServerConfig {
            tls: Some(TlsAcceptor::load(files).unwrap()),
            transport: TransportLimits {
                max_connections: 1,
                ..TransportLimits::default()
            },
            ..ServerConfig::default()
        },
    )
    .await;
    let url = format!("https://127.0.0.1:{}", server.addr.port());
    let first = tls_client(&ca)
        .endpoint(&url)
        .unwrap()
        .connect()
        .await
        .unwrap();
    statistics(first.clone(), "").await.unwrap();

    let second = tokio::time::timeout(
        Duration::from_secs(10),
        tls_client(&ca).endpoint(&url).unwrap().connect(),
    )
    .await
    .expect("the refused connection is answered, not left hanging")
    .expect("the refused connection completes its TLS handshake");
    let refused = statistics(second, "").await.expect_err("over the limit");
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().contains("too many connections"),
        "{refused:?}"
    );
    assert!(refused.get_details_retry_info().is_some(), "{refused:?}");
    statistics(first, "")
        .await
        .expect("the first connection is untouched");
    server.stop().await;
}

#[tokio::test]
async fn mtls_refuses_a_client_without_a_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let servers = Pki::new("server ca");
    let clients = Pki::new("client ca");
    let mut files = write_server_cert(&servers, dir.path());
    files.client_ca = Some(clients.write(dir.path(), "client-ca.pem"));
    let server_ca = servers.write(dir.path(), "server-ca.pem");
    let metrics = Metrics::new();
    let server = TestServer::start_with(
        Backend::Memory,
        ServerConfig {
            tls: Some(TlsAcceptor::load(files).unwrap()),
            metrics: metrics.clone(),
            ..ServerConfig::default()
        },
    )
    .await;
    let url = format!("https://127.0.0.1:{}", server.addr.port());
    let anonymous = tls_client(&server_ca)
        .endpoint(&url)
        .unwrap()
        .connect()
        .await;
    let served = match anonymous {
        Err(_) => false,
        Ok(channel) => statistics(channel, "").await.is_ok(),
    };
    assert!(!served, "a client without a certificate was served");

    let (cert, key) = clients.issue(&["runner-1"]);
    std::fs::write(dir.path().join("client.pem"), cert).unwrap();
    std::fs::write(dir.path().join("client.key"), key).unwrap();
    let args = ConnectArgs {
        client_cert: Some(dir.path().join("client.pem")),
        client_key: Some(dir.path().join("client.key")),
        ..tls_client(&server_ca)
    };
    let channel = args.endpoint(&url).unwrap().connect().await.unwrap();
    statistics(channel, "").await.unwrap();
    let text = metrics
        .render(
            &[("default".into(), server.engine.clone())],
            Exposition::PrometheusText,
        )
        .await;
    assert!(
        !text.contains("lightning_store_tls_handshake_failures_total 0"),
        "{text}"
    );
    server.stop().await;
}

#[test]
fn a_non_loopback_bind_without_tokens_is_refused_unless_insecure() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_lightning-store"))
        .args(["serve", "--store", "memory", "--listen", "0.0.0.0:0"])
        .env_remove("LIGHTNING_STORE_API_KEY")
        .env_remove("LIGHTNING_STORE_TOKENS_FILE")
        .env_remove("LIGHTNING_STORE_INSECURE")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("refusing to listen on 0.0.0.0:0 without tokens"),
        "{stderr}"
    );

    let server =
        common::ServerProcess::start(&["--store", "memory", "--listen", "0.0.0.0:0", "--insecure"]);
    let log = server.log.lock().unwrap().clone();
    assert!(log.contains("--insecure: no tokens"), "{log}");
    server.kill();

    let (_dir, path) = tokens_file(&role_tokens());
    let path = path.to_str().unwrap();
    let server = common::ServerProcess::start(&[
        "--store",
        "memory",
        "--listen",
        "0.0.0.0:0",
        "--tokens-file",
        path,
    ]);
    // The reader thread appends the start-up line just after reporting it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let log = loop {
        let log = server.log.lock().unwrap().clone();
        if log.contains("serving gRPC and HTTP") || Instant::now() > deadline {
            break log;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(log.contains("\"tokens\":5"), "{log}");
    assert!(!log.contains("admin-token"), "a token reached the log");
    server.kill();
}

#[test]
fn token_new_prints_a_token_and_a_line_that_accepts_it() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_lightning-store"))
        .args([
            "token", "new", "--role", "runner", "--worker", "w-1", "--name", "r1",
        ])
        .output()
        .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    let mut lines = stdout.lines();
    let (token, line) = (lines.next().unwrap(), lines.next().unwrap());
    assert_eq!(token.len(), 64);
    let (_dir, path) = tokens_file(&[line.to_owned()]);
    let tokens = Tokens::load(Some(&path), None).unwrap().unwrap();
    assert!(
        tokens
            .find(token)
            .is_some_and(|entry| entry.may_act_for("w-1") && !entry.may_act_for("w-2"))
    );
}

/// Exports one span with the OpenTelemetry SDK's OTLP/gRPC and OTLP/HTTP
/// exporters, which take their headers from `OTEL_EXPORTER_OTLP_HEADERS`;
/// prints each export's result.
const OTEL_EXPORT: &str = r#"
import sys
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

address, rollout_id, attempt_id = sys.argv[1:4]
memory = InMemorySpanExporter()
resource = Resource.create({"agentlightning.rollout_id": rollout_id, "agentlightning.attempt_id": attempt_id})
provider = TracerProvider(resource=resource)
provider.add_span_processor(SimpleSpanProcessor(memory))
with provider.get_tracer("security-test").start_as_current_span("llm"):
    pass
spans = memory.get_finished_spans()
grpc_result = GrpcExporter(endpoint=address, insecure=True, timeout=5).export(spans)
http_result = HttpExporter(endpoint=f"http://{address}/v1/traces", timeout=5).export(spans)
print(grpc_result.name, http_result.name)
"#;

#[tokio::test(flavor = "multi_thread")]
async fn opentelemetry_exporters_send_their_token_through_the_standard_headers_option() {
    skip_without!(crate::common::Tool::Python);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = tokio::process::Command::new(root.join("tools/pyenv.sh"))
        .arg("agl0")
        .stderr(std::process::Stdio::inherit())
        .output()
        .await
        .unwrap();
    assert!(venv.status.success(), "tools/pyenv.sh agl0 failed");
    let python = Path::new(String::from_utf8(venv.stdout).unwrap().trim()).join("bin/python");

    let (_dir, path) = tokens_file(&role_tokens());
    let server = TestServer::start_with(
        Backend::Memory,
        ServerConfig {
            tokens: Tokens::load(Some(&path), None).unwrap(),
            ..ServerConfig::default()
        },
    )
    .await;
    let channel = server.channel().await;
    let mut admin =
        LightningStoreServiceClient::with_interceptor(channel, |mut r: tonic::Request<()>| {
            r.metadata_mut()
                .insert("authorization", "Bearer admin-token".parse().unwrap());
            Ok(r)
        });
    admin
        .enqueue_rollout(proto::EnqueueRolloutRequest {
            request_id: None,
            rollout: Some(proto::RolloutSpec {
                input_json: "{}".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    let rollout = admin
        .dequeue_rollout(proto::DequeueRolloutRequest::default())
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap();
    let attempt_id = rollout.attempt.unwrap().attempt_id;
    let export = |headers: Option<&str>| {
        let mut command = tokio::process::Command::new(&python);
        command
            .args([
                "-c",
                OTEL_EXPORT,
                &server.addr.to_string(),
                &rollout.rollout_id,
                &attempt_id,
            ])
            .env_remove("OTEL_EXPORTER_OTLP_HEADERS")
            .kill_on_drop(true);
        if let Some(headers) = headers {
            command.env("OTEL_EXPORTER_OTLP_HEADERS", headers);
        }
        async move {
            let output = tokio::time::timeout(Duration::from_secs(120), command.output())
                .await
                .expect("the exporters finish in time")
                .unwrap();
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
            String::from_utf8(output.stdout).unwrap().trim().to_owned()
        }
    };
    assert_eq!(export(None).await, "FAILURE FAILURE");
    assert_eq!(
        export(Some("authorization=Bearer%20read-token")).await,
        "FAILURE FAILURE"
    );
    assert_eq!(server.engine.statistics().await.unwrap().counts.spans, 0);
    assert_eq!(
        export(Some("authorization=Bearer%20ingest-token")).await,
        "SUCCESS SUCCESS"
    );
    assert_eq!(server.engine.statistics().await.unwrap().counts.spans, 1);
    server.stop().await;
}
