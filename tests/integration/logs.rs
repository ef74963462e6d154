//! The server's logs: one JSON object per line when asked for JSON, and one
//! line per finished call carrying the call's request id.

use crate::common;

use common::ServerProcess;
use lightning_store::proto as pb;
use serde_json::Value;

#[tokio::test]
async fn json_logs_carry_request_ids_one_line_per_call() {
    let server =
        ServerProcess::start(&["--store", "memory", "--log", "info,lightning_store=debug"]);
    let mut client = server.client().await;
    let mut request = tonic::Request::new(pb::GetRolloutRequest {
        rollout_id: "ro-missing".to_owned(),
    });
    request
        .metadata_mut()
        .insert("x-request-id", "log-test-1".parse().unwrap());
    let error = client.get_rollout(request).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::NotFound);
    let mut request = tonic::Request::new(pb::EnqueueRolloutRequest::default());
    request
        .metadata_mut()
        .insert("x-request-id", "log-test-2".parse().unwrap());
    let response = client.enqueue_rollout(request).await.unwrap();
    // The server's time on the call, in milliseconds.
    let timing = response.metadata().get("server-timing").unwrap();
    let millis: f64 = timing.to_str().unwrap()["app;dur=".len()..]
        .parse()
        .unwrap();
    assert!((0.0..10_000.0).contains(&millis), "{timing:?}");

    drop(client);
    let (status, log) = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    assert!(status.success(), "exit {status:?}\n{log}");
    let records: Vec<Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let calls_of = |request_id: &str| -> Vec<&Value> {
        records
            .iter()
            .filter(|r| r["span"]["request_id"] == request_id)
            .filter(|r| {
                r["fields"]["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("call ")
            })
            .collect()
    };

    let failed = calls_of("log-test-1");
    assert_eq!(failed.len(), 1, "{log}");
    assert_eq!(failed[0]["level"], "INFO");
    assert_eq!(failed[0]["fields"]["message"], "call failed");
    assert_eq!(failed[0]["fields"]["code"], "NOT_FOUND");
    assert_eq!(failed[0]["fields"]["error"], "Rollout ro-missing not found");
    assert_eq!(
        failed[0]["span"]["method"],
        "lightningstore.v1.LightningStoreService/GetRollout"
    );
    assert!(failed[0]["fields"]["duration_ms"].as_f64().unwrap() >= 0.0);

    let finished = calls_of("log-test-2");
    assert_eq!(finished.len(), 1, "{log}");
    assert_eq!(finished[0]["level"], "DEBUG");
    assert_eq!(finished[0]["fields"]["code"], "OK");
    assert!(log.contains("shutting down"), "{log}");
    assert!(!log.contains("drain deadline passed"), "{log}");
}

/// Issue 17 case 14: a request id that could forge log fields or lines
/// (spaces, quotes, `=`, bytes outside ASCII) is replaced by a generated
/// id before anything logs or echoes it; a plain one is kept.
#[tokio::test]
async fn unsafe_request_ids_are_replaced_in_text_logs() {
    let server = ServerProcess::start_with_env(
        &[
            "--store",
            "memory",
            "--log-format",
            "text",
            "--log",
            "info,lightning_store=debug",
        ],
        &[("NO_COLOR", "1")],
    );
    let mut client = server.client().await;
    let mut echoed = Vec::new();
    for sent in [
        "forged code=OK error=\"none\"",
        "tab\tseparated",
        "quote\"d",
        "kept-id_1.2:3",
    ] {
        let mut request = tonic::Request::new(pb::GetRolloutRequest {
            rollout_id: "ro-missing".to_owned(),
        });
        request
            .metadata_mut()
            .insert("x-request-id", sent.parse().unwrap());
        let status = client.get_rollout(request).await.unwrap_err();
        let id = status
            .metadata()
            .get("x-request-id")
            .unwrap()
            .to_str()
            .unwrap();
        echoed.push((sent, id.to_owned()));
    }
    let http = common::http::HttpClient::new(server.addr, common::http::Version::Http1);
    let latin = http
        .request(
            "GET",
            "/v1/agl/health",
            &[("x-request-id", "caf\u{e9}")],
            "",
        )
        .await;
    drop(client);
    let (status, log) = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    assert!(status.success(), "exit {status:?}\n{log}");

    for (sent, id) in &echoed[..3] {
        assert_eq!(id.len(), 32, "{sent:?} was echoed as {id:?}");
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id:?}");
        assert!(log.contains(&format!("request_id={id}")), "{log}");
    }
    assert_eq!(echoed[3].1, "kept-id_1.2:3");
    assert!(log.contains("request_id=kept-id_1.2:3"), "{log}");
    assert_eq!(latin.headers["x-request-id"].len(), 32);
    for forged in ["forged", "tab", "quote", "caf"] {
        assert!(!log.contains(forged), "{forged} reached the log:\n{log}");
    }
}
