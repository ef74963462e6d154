//! Bad input: malformed JSON, bodies that are not what a route reads,
//! unknown states, extra fields, huge bodies and unknown rollouts get the
//! status and body upstream's server gives, and nothing is half written.

use serde_json::json;

use super::BACKEND;
use crate::agl1::support::{Api, detail, start, start_with};

#[tokio::test]
async fn malformed_and_mistyped_bodies_are_422s_that_write_nothing() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    api.create_one("x", json!({})).await;
    let json_type = [("content-type", "application/json")];
    for (method, path) in [
        ("POST", "/api/rollouts"),
        ("PATCH", "/api/rollouts/x"),
        ("POST", "/api/rollouts/x/attempt/0/events"),
        ("POST", "/api/models"),
        ("POST", "/proxy/pause"),
    ] {
        let broken = api.send(method, path, &json_type, "{bad").await;
        assert_eq!(broken.status, 422, "{method} {path}");
        let issue = &detail(&broken)[0];
        assert_eq!(
            (issue["type"].clone(), issue["loc"].clone()),
            (json!("json_invalid"), json!(["body", 1]))
        );
        let empty = api.send(method, path, &json_type, "").await;
        assert_eq!(
            detail(&empty),
            json!([{"type": "missing", "loc": ["body"], "msg": "Field required", "input": null}]),
            "{method} {path}"
        );
    }
    // A body without a JSON content type is read as text, as FastAPI does.
    let text = api
        .send("POST", "/api/rollouts", &[], r#"[{"input": 1}]"#)
        .await;
    assert_eq!(
        detail(&text),
        json!([{"type": "list_type", "loc": ["body"], "msg": "Input should be a valid list", "input": "[{\"input\": 1}]"}])
    );
    let not_a_list = api
        .json("POST", "/api/rollouts", &json!({"input": 1}))
        .await;
    assert_eq!(detail(&not_a_list)[0]["type"], "list_type");
    let event_list = api
        .json("POST", "/api/rollouts/x/attempt/0/events", &json!([]))
        .await;
    assert_eq!(
        detail(&event_list),
        json!([{"type": "model_attributes_type", "loc": ["body"], "msg": "Input should be a valid dictionary or object to extract fields from", "input": []}])
    );
    let no_type = api
        .json(
            "POST",
            "/api/rollouts/x/attempt/0/events",
            &json!({"data": {}}),
        )
        .await;
    assert_eq!(detail(&no_type)[0]["type"], "missing");

    // One bad item fails the whole batch before anything is written.
    let batch = api
        .json("POST", "/api/rollouts", &json!([{"rollout_id": "ok", "input": 1}, {"rollout_id": "bad", "input": 1, "config": {"timeout_seconds": 1.5}}]))
        .await;
    assert_eq!(
        detail(&batch),
        json!([{"type": "int_from_float", "loc": ["body", 1, "config", "timeout_seconds"],
                "msg": "Input should be a valid integer, got a number with a fractional part", "input": 1.5}])
    );
    assert_eq!(api.get("/api/rollouts/ok").await.status, 404);
    let spaced = api
        .json(
            "POST",
            "/api/rollouts",
            &json!([{"rollout_id": "has\u{1}control", "input": 1}]),
        )
        .await;
    assert_eq!(
        spaced.status, 400,
        "ids the store cannot address are refused"
    );

    // Unknown states and extra fields.
    let unknown = api.get("/api/rollouts?state_in=done").await;
    assert_eq!(detail(&unknown)[0]["type"], "enum");
    let patch = api.patch("x", json!({"state": "done", "version": 9})).await;
    let types: Vec<_> = detail(&patch)
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].clone())
        .collect();
    assert_eq!(types, [json!("enum"), json!("extra_forbidden")]);
    let rollout = api.rollout("x").await;
    assert_eq!(
        rollout["rollout"]["status"]["version"], 1,
        "refused patches change nothing"
    );
    let terminal = api
        .get("/api/rollouts/terminal?after=x&limit=1.5&wait=soon")
        .await;
    let locs: Vec<_> = detail(&terminal)
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["loc"].clone())
        .collect();
    assert_eq!(
        locs,
        [
            json!(["query", "after"]),
            json!(["query", "limit"]),
            json!(["query", "wait"])
        ]
    );
    server.stop().await;
}

#[tokio::test]
async fn unknown_rollouts_are_404_everywhere_but_delete() {
    skip_without!(super::BACKEND);
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    let not_found = json!("Rollout not found: ghost");
    for (method, path, body) in [
        ("GET", "/api/rollouts/ghost", None),
        (
            "PATCH",
            "/api/rollouts/ghost",
            Some(json!({"status": {"state": "running"}})),
        ),
        ("GET", "/api/rollouts/ghost/events", None),
        (
            "POST",
            "/api/rollouts/ghost/attempt/0/events",
            Some(json!({"event_type": "reward"})),
        ),
        (
            "POST",
            "/proxy/rollout/ghost/attempt/0/mode/train/openai/v1/chat/completions",
            Some(json!({})),
        ),
    ] {
        let response = match body {
            Some(body) => api.json(method, path, &body).await,
            None => api.get(path).await,
        };
        assert_eq!(
            (response.status, detail(&response)),
            (404, not_found.clone()),
            "{method} {path}"
        );
    }
    assert_eq!(
        api.send("DELETE", "/api/rollouts/ghost", &[], "")
            .await
            .status,
        204
    );
    server.stop().await;
}

#[tokio::test]
async fn huge_bodies_are_413() {
    skip_without!(super::BACKEND);
    let server = start_with(BACKEND, |options| options.limits.max_message_bytes = 4096).await;
    let api = Api::new(&server);
    api.create_one("x", json!({})).await;
    let huge = json!({"event_type": "reward", "data": {"blob": "x".repeat(8192)}});
    let refused = api
        .json("POST", "/api/rollouts/x/attempt/0/events", &huge)
        .await;
    assert_eq!(refused.status, 413);
    assert_eq!(api.events("x", "").await.len(), 0);
    server.stop().await;
}
