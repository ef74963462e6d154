//! The console of each namespace: under `/ns/{name}/` a page shows that
//! namespace's rollouts alone, live, and every link it renders stays under
//! the prefix; the switcher lists the namespaces the browser's token may
//! read and leads to the same page in another; an unknown namespace is a
//! 404 page naming it, a malformed name 400, and a token limited to one
//! namespace sees only it and is refused (403) on the others.

use lightning_store::auth::policy::Role;
use lightning_store::auth::tokens::{LineScope, file_line};
use lightning_store::server::ServerConfig;

use super::BACKEND;
use crate::common::browser::{Browser, with_browser};
use crate::common::http::{HttpClient, Version};
use crate::common::{TestOptions, TestServer};
use crate::console::support::sign_in;

const ADMIN: &str = "admin-token-for-namespaces";
const RUNNER_A: &str = "runner-token-limited-to-run-a";

/// Enqueues a rollout in `namespace` through agent-lightning 0.x's HTTP
/// API (named by the path prefix alone); returns its id.
async fn enqueue_in(http: &HttpClient, namespace: &str, token: Option<&str>, task: &str) -> String {
    let authorization = token.map(|token| format!("Bearer {token}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(authorization) = &authorization {
        headers.push(("authorization", authorization));
    }
    let body = serde_json::json!({"rollouts": [{"input": {"task": task}}]});
    let answer = http
        .request(
            "POST",
            &format!("/ns/{namespace}/v1/agl/queues/rollouts/enqueue"),
            &headers,
            serde_json::to_vec(&body).unwrap(),
        )
        .await;
    assert_eq!(answer.status, 201, "{}", answer.text());
    answer.json()[0]["rollout_id"].as_str().unwrap().to_owned()
}

/// Returns every link and form target of the page but the switcher's (which
/// leads to the other namespaces), the skip link and the assets.
async fn page_targets(browser: &Browser) -> Vec<String> {
    let targets = browser
        .eval(
            "return Array.from(document.querySelectorAll('a[href], form[action]'))\
             .filter((e) => !e.closest('nav.namespaces') && !e.classList.contains('skip'))\
             .map((e) => e.getAttribute(e.tagName === 'FORM' ? 'action' : 'href'))",
        )
        .await;
    serde_json::from_value(targets).unwrap()
}

/// Returns the switcher's namespaces and the one it marks current (read
/// while its list is folded).
async fn switcher(browser: &Browser) -> (Vec<String>, String) {
    let read = browser
        .eval(
            "return [Array.from(document.querySelectorAll('nav.namespaces li a'), (a) => a.textContent), \
             document.querySelector('nav.namespaces a[aria-current]').textContent]",
        )
        .await;
    serde_json::from_value(read).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_namespace_shows_its_own_rollouts() {
    let server = TestServer::start(BACKEND).await;
    server.create_namespace("run-a", None).await;
    server.create_namespace("run-b", None).await;
    let http = HttpClient::new(server.addr, Version::Http1);
    let in_a = enqueue_in(&http, "run-a", None, "a").await;
    let in_b = enqueue_in(&http, "run-b", None, "b").await;

    // An unknown namespace is a page naming it; a malformed name is 400.
    let unknown = http.get("/ns/no-such-run/console/rollouts").await;
    assert_eq!(unknown.status, 404);
    assert!(unknown.text().contains("no-such-run"), "{}", unknown.text());
    assert_eq!(
        http.get("/ns/Not_A_Name/console/rollouts").await.status,
        400
    );

    let base = server.url.clone();
    with_browser("console-namespaces", move |browser| async move {
        browser
            .goto(&format!("{base}/ns/run-a/console/rollouts"))
            .await;
        assert_eq!(
            browser.texts("table.rollouts td a.id").await,
            std::slice::from_ref(&in_a)
        );
        let targets = page_targets(&browser).await;
        assert!(!targets.is_empty());
        for target in &targets {
            assert!(
                target.starts_with("/ns/run-a/"),
                "{target} leaves run-a: {targets:?}"
            );
        }
        assert_eq!(
            switcher(&browser).await,
            (
                vec!["default".to_owned(), "run-a".to_owned(), "run-b".to_owned()],
                "run-a".to_owned()
            )
        );

        // The page is live over its own namespace: a rollout of run-b
        // never shows, one of run-a does.
        let other_b = enqueue_in(&http, "run-b", None, "b again").await;
        let more_a = enqueue_in(&http, "run-a", None, "a again").await;
        browser.wait_for_text("table.rollouts", &more_a).await;
        let shown = browser.texts("table.rollouts td a.id").await;
        assert_eq!(shown, [more_a.clone(), in_a.clone()]);
        assert!(!shown.contains(&other_b));

        // A rollout's page and its links stay in the namespace.
        browser
            .click_to_load(&format!(
                "table.rollouts a[href='/ns/run-a/console/rollouts/{in_a}']"
            ))
            .await;
        browser.wait_for_text("pre.json", "\"a\"").await;
        for target in page_targets(&browser).await {
            assert!(target.starts_with("/ns/run-a/"), "{target} leaves run-a");
        }
        // The Overview of run-a counts its rollouts alone.
        browser.goto(&format!("{base}/ns/run-a/")).await;
        assert_eq!(
            browser.text("#queue-heading + p").await,
            "2 rollouts waiting for a worker"
        );

        // The switcher leads to the same page of run-b.
        browser
            .goto(&format!("{base}/ns/run-a/console/rollouts"))
            .await;
        browser.click("nav.namespaces summary").await;
        browser
            .click_to_load("nav.namespaces a[href='/ns/run-b/console/rollouts']")
            .await;
        browser
            .wait_for_text("nav.namespaces summary", "run-b")
            .await;
        assert!(browser.url().await.ends_with("/ns/run-b/console/rollouts"));
        assert_eq!(
            browser.texts("table.rollouts td a.id").await,
            [other_b, in_b]
        );

        // The default namespace's console holds neither.
        browser.goto(&format!("{base}/console/rollouts")).await;
        assert!(browser.texts("table.rollouts td a.id").await.is_empty());
        assert_eq!(switcher(&browser).await.1, "default");

        browser
            .goto(&format!("{base}/ns/no-such-run/console/rollouts"))
            .await;
        assert!(browser.text("main").await.contains("no-such-run"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_limited_to_a_namespace_sees_only_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens");
    let lines = [
        file_line(ADMIN, &[Role::Admin], &LineScope::default()),
        file_line(
            RUNNER_A,
            &[Role::Runner],
            &LineScope {
                namespaces: &["run-a".into()],
                name: Some("runner-a"),
                ..LineScope::default()
            },
        ),
    ];
    std::fs::write(&path, lines.join("\n")).unwrap();
    let server = TestServer::start_opts(
        BACKEND,
        TestOptions {
            config: ServerConfig {
                tokens: lightning_store::auth::Tokens::load(Some(&path), None).unwrap(),
                ..ServerConfig::default()
            },
            ..TestOptions::default()
        },
    )
    .await;
    server.create_namespace("run-a", Some(ADMIN)).await;
    server.create_namespace("run-b", Some(ADMIN)).await;
    let http = HttpClient::new(server.addr, Version::Http1);
    let in_a = enqueue_in(&http, "run-a", Some(ADMIN), "a").await;
    enqueue_in(&http, "run-b", Some(ADMIN), "b").await;

    // The access layer refuses the other namespace before any page runs.
    let bearer = format!("Bearer {RUNNER_A}");
    let refused = http
        .request(
            "GET",
            "/ns/run-b/console/rollouts",
            &[("authorization", &bearer)],
            Vec::new(),
        )
        .await;
    assert_eq!(refused.status, 403);
    assert!(
        refused.text().contains("may not use this namespace"),
        "{}",
        refused.text()
    );

    let base = server.url.clone();
    with_browser("console-namespace-token", move |browser| async move {
        // Unsigned, a namespace's page leads to the sign-in form, which
        // leads back to it.
        browser
            .goto(&format!("{base}/ns/run-a/console/workers"))
            .await;
        let login = browser.url().await;
        assert!(
            login.contains("/console/login?next=%2Fns%2Frun-a%2Fconsole%2Fworkers"),
            "{login}"
        );
        browser.type_into("input[name=token]", RUNNER_A).await;
        browser.click_to_load("form button[type=submit]").await;
        browser.wait_for_text("h1", "Workers").await;
        assert!(browser.url().await.ends_with("/ns/run-a/console/workers"));

        // Signed in, the runner's token opens its own namespace.
        sign_in(&browser, &base, RUNNER_A).await;
        assert_eq!(
            switcher(&browser).await,
            (vec!["run-a".to_owned()], "run-a".to_owned())
        );
        browser
            .goto(&format!("{base}/ns/run-a/console/rollouts"))
            .await;
        assert_eq!(
            browser.texts("table.rollouts td a.id").await,
            std::slice::from_ref(&in_a)
        );
        browser
            .goto(&format!("{base}/ns/run-b/console/rollouts"))
            .await;
        let refusal = browser.text("main").await;
        assert!(refusal.contains("may not use this namespace"), "{refusal}");
        browser
            .goto(&format!("{base}/console/rollouts?status=queuing"))
            .await;
        assert_eq!(
            browser.texts("table.rollouts td a.id").await,
            std::slice::from_ref(&in_a)
        );

        // An admin's switcher lists every namespace.
        browser.click_to_load("form.who button").await;
        browser.wait_for_text("h1", "Sign in").await;
        sign_in(&browser, &base, ADMIN).await;
        let names = switcher(&browser).await.0;
        assert_eq!(names, ["default", "run-a", "run-b"]);
    })
    .await;
}
