//! Pages change as the store changes, without a reload: a rollout enqueued
//! and then completed through gRPC appears on an open Rollouts page and
//! changes status there and on its own open page.

use lightning_store::proto as pb;

use super::BACKEND;
use crate::common::TestServer;
use crate::common::browser::with_browser;
use crate::console::support::{dequeue, enqueue, finish};

/// Marks the page, so that a reload (which forgets the mark) is noticed.
const MARK: &str = "window.consoleTestMark = 42; return true";
const MARKED: &str = "return window.consoleTestMark === 42";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_enqueued_and_completed_through_grpc_changes_on_open_pages() {
    let server = TestServer::start(BACKEND).await;
    let mut client = server.client().await;
    let base = server.url.clone();
    with_browser("console-live", move |browser| async move {
        browser.goto(&format!("{base}/console/rollouts")).await;
        assert!(browser.text("#live").await.contains("No rollout matches"));
        browser.eval(MARK).await;

        let rollout_id = enqueue(&mut client, r#"{"task": "live"}"#).await;
        let row = format!("tr[data-rollout-id=\"{rollout_id}\"]");
        browser.wait_for_text(&row, "queuing").await;

        let (dequeued, attempt) = dequeue(&mut client, "worker-live").await;
        assert_eq!(dequeued, rollout_id);
        browser.wait_for_text(&row, "preparing").await;
        finish(
            &mut client,
            &rollout_id,
            &attempt,
            pb::AttemptStatus::Succeeded,
        )
        .await;
        browser.wait_for_text(&row, "succeeded").await;
        assert_eq!(
            browser.eval(MARKED).await,
            true,
            "the page was not reloaded"
        );

        // A rollout's own page follows it too, its attempt included.
        let second = enqueue(&mut client, r#"{"task": "followed"}"#).await;
        browser
            .goto(&format!("{base}/console/rollouts/{second}"))
            .await;
        browser.wait_for_text("section.summary", "queuing").await;
        browser.eval(MARK).await;
        let (_, attempt) = dequeue(&mut client, "worker-live").await;
        browser.wait_for_text("#live table", &attempt).await;
        finish(&mut client, &second, &attempt, pb::AttemptStatus::Failed).await;
        browser.wait_for_text("section.summary", "failed").await;
        browser
            .wait_for_text("#live table", "the runner reported a failure")
            .await;
        assert_eq!(
            browser.eval(MARKED).await,
            true,
            "the page was not reloaded"
        );
        assert!(
            browser.text("#live-status").await.starts_with("Live"),
            "the page says it is live"
        );
    })
    .await;
}
