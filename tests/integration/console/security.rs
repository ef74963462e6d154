//! The console is guarded as the API is: a browser signs in with a token
//! (which then appears in no URL and no script), sees only what its role
//! may do, and cannot do more (403 in the console's words); an admin's
//! confirmed pause reaches the gateway. Hostile input renders as text.

use lightning_store::auth::policy::Role;
use lightning_store::auth::tokens::{LineScope, file_line};
use lightning_store::server::ServerConfig;

use super::BACKEND;
use crate::common::browser::with_browser;
use crate::common::{Backend, TestOptions, TestServer};
use crate::console::support::{add_spans, dequeue, enqueue, sign_in, span, text};

const ADMIN: &str = "admin-token-for-the-console";
const READER: &str = "reader-token-for-the-console";

/// Starts a server whose tokens file holds an admin and a reader token.
async fn guarded() -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens");
    let lines = [
        file_line(
            ADMIN,
            &[Role::Admin],
            &LineScope {
                name: Some("admin"),
                ..LineScope::default()
            },
        ),
        file_line(
            READER,
            &[Role::Read],
            &LineScope {
                name: Some("dashboard"),
                ..LineScope::default()
            },
        ),
    ];
    std::fs::write(&path, lines.join("\n")).unwrap();
    let tokens = lightning_store::auth::Tokens::load(Some(&path), None).unwrap();
    let server = TestServer::start_opts(
        BACKEND,
        TestOptions {
            config: ServerConfig {
                tokens,
                ..ServerConfig::default()
            },
            ..TestOptions::default()
        },
    )
    .await;
    (server, dir)
}

/// Posts the pause form from the page itself (with its form token, as the
/// confirmation page would); returns the HTTP status.
const POST_PAUSE: &str = r#"
    const done = arguments[arguments.length - 1];
    const token = document.querySelector("input[name=form_token]").value;
    fetch("/console/gateway/pause", {
        method: "POST",
        body: new URLSearchParams({ form_token: token, retry_after: "5" }),
    }).then((response) => done(response.status));
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_cannot_pause_and_an_admin_can() {
    let (server, _tokens) = guarded().await;
    let engine = server.engine.clone();
    let base = server.url.clone();
    with_browser("console-roles", move |browser| async move {
        // Unsigned, a page leads to the sign-in form, which leads back.
        browser.goto(&format!("{base}/console/workers")).await;
        assert!(
            browser
                .url()
                .await
                .contains("/console/login?next=%2Fconsole%2Fworkers")
        );
        browser.type_into("input[name=token]", "not-a-token").await;
        browser.click_to_load("form button[type=submit]").await;
        browser
            .wait_for_text("[role=alert]", "does not know this token")
            .await;
        if BACKEND == Backend::Sqlite {
            browser.document("sign-in").await;
        }

        sign_in(&browser, &base, READER).await;
        let url = browser.url().await;
        assert!(!url.contains(READER), "the token is in no URL: {url}");
        let cookies = browser.eval("return document.cookie").await;
        assert!(
            !cookies.as_str().unwrap().contains("reader"),
            "no script sees it"
        );
        assert!(
            browser.text("form.who").await.contains("dashboard"),
            "signed in as its label"
        );
        // A reader sees no action...
        let buttons = browser.texts("#live .actions a").await;
        assert!(buttons.is_empty(), "{buttons:?}");
        // ...and is refused one, in the console's words.
        browser.goto(&format!("{base}/console/gateway/pause")).await;
        let refusal = browser.text("main").await;
        assert!(
            refusal.contains("does not allow pausing and resuming the LLM gateway"),
            "{refusal}"
        );
        assert!(refusal.contains("admin or algorithm role"), "{refusal}");
        assert!(!refusal.contains(READER));
        browser.goto(&format!("{base}/")).await;
        let status = browser
            .client()
            .execute_async(POST_PAUSE, Vec::new())
            .await
            .unwrap();
        assert_eq!(status, 403);
        assert!(!engine.gateway_pause().await.unwrap().paused);

        // An admin sees the action, confirms it, and the gateway pauses.
        browser.click_to_load("form.who button").await;
        browser.wait_for_text("h1", "Sign in").await;
        sign_in(&browser, &base, ADMIN).await;
        browser
            .click_to_load("#live a[href='/console/gateway/pause']")
            .await;
        browser
            .wait_for_text("h1", "Pause agent-lightning 1.x's LLM gateway?")
            .await;
        browser
            .type_into("input[name=reason]", "updating the weights")
            .await;
        browser.click_to_load("form button.danger").await;
        browser.wait_for_text("#live", "updating the weights").await;
        let pause = engine.gateway_pause().await.unwrap();
        assert!(pause.paused);
        assert_eq!(pause.reason.as_deref(), Some("updating the weights"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_renders_as_text() {
    let server = TestServer::start(BACKEND).await;
    let mut client = server.client().await;
    let hostile =
        r#"<script>window.consolePwned = 1</script><img src=x onerror="window.consolePwned = 2">"#;
    let input = serde_json::json!({"question": hostile}).to_string();
    let rollout_id = enqueue(&mut client, &input).await;
    let (_, attempt) = dequeue(&mut client, "worker-<b>bold</b>").await;
    let base_time = std::time::SystemTime::now();
    add_spans(
        &mut client,
        vec![span(
            &rollout_id,
            &attempt,
            "s1",
            None,
            "<i>name</i>",
            base_time,
            (0, 10),
            vec![text("user.message", hostile)],
        )],
    )
    .await;
    let base = server.url.clone();
    with_browser("console-hostile", move |browser| async move {
        browser.goto(&format!("{base}/console/rollouts/{rollout_id}")).await;
        assert!(browser.text("pre.json").await.contains("<script>window.consolePwned = 1</script>"));
        browser.click("ol.waterfall li.span summary").await;
        browser.wait_for_text("ol.waterfall details[open] pre", "<img src=x onerror=").await;
        assert!(browser.text("ol.waterfall").await.contains("<i>name</i>"));
        assert!(browser.text("#live table").await.contains("worker-<b>bold</b>"));
        let injected = browser
            .eval("return [window.consolePwned === undefined, document.querySelectorAll('#live script, #live img, #live i, #live b').length]")
            .await;
        assert_eq!(injected, serde_json::json!([true, 0]));
        browser.goto(&format!("{base}/console/workers")).await;
        assert!(browser.text("#live table").await.contains("worker-<b>bold</b>"));
    })
    .await;
}
