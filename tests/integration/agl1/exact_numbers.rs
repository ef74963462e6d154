//! Exact numbers through agent-lightning 1.x's API: the client JSON it
//! stores (a rollout's input, an event's data) keeps every number's value,
//! however many digits it has.

use lightning_store::proto as pb;
use serde_json::Value;

use super::BACKEND;
use crate::agl1::support::{Api, grpc, start};

/// Numbers no double holds, as a client writes them.
const NUMBERS: &str = r#"{"n": 12345678901234567890123, "m": 9007199254740993, "u": 18446744073709551615, "i": -9223372036854775808, "d": 0.1000000000000000055511151231257827, "e": 1e400, "x": -2.50E-7}"#;
/// [`NUMBERS`] as stored and written back verbatim (gRPC, 1.x event data):
/// without the spaces, exponents as `e` and their sign.
const STORED: &str = r#"{"n":12345678901234567890123,"m":9007199254740993,"u":18446744073709551615,"i":-9223372036854775808,"d":0.1000000000000000055511151231257827,"e":1e+400,"x":-2.50e-7}"#;
/// [`NUMBERS`] as the HTTP APIs write a model's fields: a float's shortest digits as
/// Python writes them, every other number as given.
const HTTP_EXACT: &str = r#"{"n":12345678901234567890123,"m":9007199254740993,"u":18446744073709551615,"i":-9223372036854775808,"d":0.1000000000000000055511151231257827,"e":1e+400,"x":-2.5e-7}"#;

#[tokio::test]
async fn stored_client_json_keeps_every_number_exactly() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    let numbers: Value = serde_json::from_str(NUMBERS).unwrap();
    let exact: Value = serde_json::from_str(HTTP_EXACT).unwrap();
    let stored: Value = serde_json::from_str(STORED).unwrap();

    let created = api.create_one("x", numbers.clone()).await;
    assert_eq!(created["input"], exact, "{created}");
    let posted = api.post_event("x", "0", "note", numbers.clone()).await;
    assert_eq!(posted.status, 200, "{}", posted.text());
    // An event's data is written as stored.
    assert_eq!(posted.json()["data"], stored);

    assert_eq!(api.rollout("x").await["rollout"]["input"], exact);
    // Byte for byte, on every route that writes the rollout (the GET copies
    // the stored text without parsing it).
    let input = format!(r#""input":{HTTP_EXACT}"#);
    for path in ["/api/rollouts/x", "/api/rollouts?state_in=queuing"] {
        let text = api.get(path).await.text();
        assert!(text.contains(&input), "{path}: {text}");
    }
    let events = api.events("x", "").await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["data"], stored);
    let text = api.get("/api/rollouts/x/events").await.text();
    assert!(text.contains(&format!(r#""data":{STORED}"#)), "{text}");

    // The same rollout over gRPC: the numbers as the client wrote them
    // (values compare by their text).
    let seen = grpc(&server)
        .await
        .get_rollout(pb::GetRolloutRequest {
            rollout_id: "x".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap();
    assert_eq!(seen.input_json, STORED);
    server.stop().await;
}
