//! An agent-lightning 1.x rollout's page: its `model_request` events from
//! a real call through the gateway (to a fake model server) render as a
//! conversation, live, with the trainer's view of it (triplets, training
//! rows) and a diagnosis while it gives none.

use serde_json::json;

use super::BACKEND;
use crate::agl1::support::{Api, KEY, start};
use crate::common::Backend;
use crate::common::browser::with_browser;
use crate::common::model_server::ModelServer;
use crate::console::support::sign_in;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_renders_from_a_gateway_call() {
    let server = start(BACKEND).await;
    let model = ModelServer::start().await;
    let api = Api::new(&server);
    api.register(&[model.endpoint()]).await;
    api.create_one("conversation-1", json!({"question": "capital of France?"}))
        .await;
    api.set_state("conversation-1", "running").await;
    let base = server.url.clone();
    with_browser("console-agl1", move |browser| async move {
        sign_in(&browser, &base, KEY).await;
        browser
            .goto(&format!("{base}/console/rollouts/conversation-1"))
            .await;
        // Before any call: no training row, and the page says why.
        assert_eq!(browser.text("#training-heading").await, "Training rows: 0");
        // A 1.x attempt's id is "0": its label says which figure is which.
        let attempts = browser.texts(".timeline-row .label").await;
        assert_eq!(attempts, ["#1 (id 0)"]);
        let findings = browser.text("ul.findings").await;
        assert!(
            findings.contains("No model call went through the gateway"),
            "{findings}"
        );

        let body = json!({"model": "any", "messages": [
            {"role": "system", "content": "Answer with one word."},
            {"role": "user", "content": "What is the capital of France?"},
        ]});
        let answer = api.chat("conversation-1", "train", &body).await;
        assert_eq!(answer.status, 200, "{}", answer.text());
        let reply = answer.json()["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_owned();
        // The call appears on the open page: the messages it sent, the answer.
        browser
            .wait_for_text("ol.conversation", "What is the capital of France?")
            .await;
        browser
            .wait_for_text("ol.conversation .answer", &reply)
            .await;
        let meta = browser.text("ol.conversation .call-meta").await;
        assert!(meta.contains("test-model"), "{meta}");
        assert!(meta.contains("token ids recorded"), "{meta}");
        browser
            .wait_for_text("#training-heading", "Training rows: 1")
            .await;
        assert!(browser.text("#live").await.contains("No reward event"));

        let reward = api
            .post_event(
                "conversation-1",
                "0",
                "reward",
                json!({"value": 1.0, "reason": "Paris"}),
            )
            .await;
        assert_eq!(reward.status, 200, "{}", reward.text());
        api.set_state("conversation-1", "succeeded").await;
        browser.wait_for_text("section.summary", "succeeded").await;
        browser.wait_for_text("p.reward", "Paris").await;
        assert!(!browser.text("#live").await.contains("No reward event"));
        let triplets = browser.texts("#triplets-heading ~ .scroll td").await;
        assert!(triplets.contains(&"yes".to_owned()), "{triplets:?}");
        if BACKEND == Backend::Sqlite {
            browser
                .eval("document.getElementById('training-heading').scrollIntoView(); return true")
                .await;
            browser.document("rollout-agl1").await;
        }
        // The Training page counts the rollout under the model version of its
        // call, and that count lists it.
        let events = api.events("conversation-1", "").await;
        let version = events[0]["data"]["server"]["version"].as_i64().unwrap();
        browser.goto(&format!("{base}/console/training")).await;
        let row = browser
            .texts("#training-versions tbody tr:first-child td")
            .await;
        assert_eq!(
            row[..4],
            [
                format!("model {version}"),
                String::new(),
                "train".into(),
                "1".into()
            ],
            "{row:?}"
        );
        assert_eq!(row[6], "1.000", "{row:?}");
        browser
            .click_to_load("#training-versions tbody tr:first-child a")
            .await;
        assert!(
            browser
                .url()
                .await
                .contains(&format!("model_version={version}")),
            "{}",
            browser.url().await
        );
        let listed = browser.texts("tbody tr a.id").await;
        assert_eq!(listed, ["conversation-1"]);
        // The Models page: the model server, and this server's calls to it.
        browser.goto(&format!("{base}/console/models")).await;
        let servers = browser.text("#servers-heading + .scroll table").await;
        assert!(servers.contains("test-model"), "{servers}");
        let calls = browser
            .text("#servers-heading + .scroll tbody td:nth-child(4)")
            .await;
        assert_ne!(calls, "0", "one call in the last minutes");
        if BACKEND == Backend::Sqlite {
            browser.document("models").await;
        }
    })
    .await;
}

/// A model request of model version 1 whose answer has `response` token
/// ids (none when empty).
fn call(prompt: i64, response: &[i64]) -> serde_json::Value {
    json!({
        "model_version": 1, "http_status": 200, "status": "ok",
        "response": {"prompt_token_ids": [prompt], "choices": [{"token_ids": response}]},
    })
}

/// The Training page counts each version's training rows and the 1.x
/// rollouts that gave none by reason; a reason's count lists its rollouts
/// on the Rollouts page, whose filter then shows the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollouts_without_training_rows_are_counted_by_reason_and_listed() {
    let server = start(BACKEND).await;
    let api = Api::new(&server);
    api.create(json!([
        {"rollout_id": "with-rows", "input": {}, "is_train": true},
        {"rollout_id": "without-ids", "input": {}, "is_train": true},
    ]))
    .await;
    for (id, response) in [("with-rows", &[7][..]), ("without-ids", &[])] {
        api.set_state(id, "running").await;
        api.record(id, "model_request", call(1, response)).await;
        api.record(id, "model_request", call(2, response)).await;
        api.record(id, "reward", json!({"value": 0.5})).await;
        api.set_state(id, "succeeded").await;
    }
    let base = server.url.clone();
    with_browser("console-training-rows", move |browser| async move {
        sign_in(&browser, &base, KEY).await;
        browser.goto(&format!("{base}/console/training")).await;
        let row = browser.texts("#training-rows tbody tr td").await;
        assert_eq!(
            row,
            [
                "model 1",
                "train",
                "2",
                "2",
                "1",
                "calls without token ids: 1"
            ],
            "two rows from one rollout, none from the other"
        );
        if BACKEND == Backend::Sqlite {
            browser
                .eval("document.getElementById('rows-heading').scrollIntoView(); return true")
                .await;
            browser.document("training-rows").await;
        }
        browser.click_to_load("#training-rows td.reasons a").await;
        let url = browser.url().await;
        assert!(url.contains("without_rows=no_token_ids"), "{url}");
        assert_eq!(browser.texts("tbody tr a.id").await, ["without-ids"]);
        let chosen = browser
            .text("select[name=without_rows] option:checked")
            .await;
        assert_eq!(chosen, "gave none: calls without token ids");
    })
    .await;
}
