//! The server's logs: one JSON object per line when asked for JSON, and one
//! line per finished call carrying the call's request id.

mod common;

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
    client.enqueue_rollout(request).await.unwrap();

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
