//! The Namespaces page: an admin creates a namespace with a quota through
//! its form, sees it listed, opens its console from the list and deletes
//! it through the confirmation page, after which it is NOT_FOUND over
//! gRPC; a malformed name, a name taken or one namespace past
//! `--max-namespaces` is shown with the store's message; a reader, a runner and an admin token limited to a namespace
//! get no link to the page and are refused it (403), and so are their
//! forms.

use lightning_store::auth::policy::Role;
use lightning_store::auth::tokens::{LineScope, file_line};
use lightning_store::proto as pb;
use lightning_store::server::ServerConfig;

use super::BACKEND;
use crate::common::browser::{Browser, with_browser};
use crate::common::http::{HttpClient, Version};
use crate::common::{TestOptions, TestServer};
use crate::console::support::sign_in;

const ADMIN: &str = "admin-token-for-namespace-admin";
const READER: &str = "reader-token-for-namespace-admin";
const RUNNER: &str = "runner-token-for-namespace-admin";
const ADMIN_OF_A: &str = "admin-token-limited-to-run-a";

/// Starts a server whose tokens file holds an admin, a reader, a runner
/// and an admin limited to `run-a`, which exists.
async fn guarded() -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens");
    let named = |name| LineScope {
        name: Some(name),
        ..LineScope::default()
    };
    let lines = [
        file_line(ADMIN, &[Role::Admin], &named("operator")),
        file_line(READER, &[Role::Read], &named("dashboard")),
        file_line(RUNNER, &[Role::Runner], &named("runner")),
        file_line(
            ADMIN_OF_A,
            &[Role::Admin],
            &LineScope {
                namespaces: &["run-a".into()],
                name: Some("admin-of-a"),
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
    let mut request = tonic::Request::new(pb::CreateNamespaceRequest {
        name: "run-a".to_owned(),
        ..Default::default()
    });
    authorize(&mut request, ADMIN);
    server
        .client()
        .await
        .create_namespace(request)
        .await
        .unwrap();
    (server, dir)
}

fn authorize<T>(request: &mut tonic::Request<T>, token: &str) {
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
}

/// Returns the namespaces the page lists, in order.
async fn listed(browser: &Browser) -> Vec<String> {
    browser.texts("#namespaces tbody td:first-child a").await
}

/// Returns the labels of the navigation's links.
async fn navigation(browser: &Browser) -> Vec<String> {
    browser.texts("nav[aria-label=Pages] a").await
}

/// Posts the create form as a script would (bearer token); returns the
/// status and the page.
async fn post_create(http: &HttpClient, token: &str, body: &str) -> (u16, String) {
    let bearer = format!("Bearer {token}");
    let answer = http
        .request(
            "POST",
            "/console/namespaces",
            &[
                ("authorization", &bearer),
                ("content-type", "application/x-www-form-urlencoded"),
            ],
            body.as_bytes().to_vec(),
        )
        .await;
    (answer.status, answer.text())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_creates_and_deletes_a_namespace() {
    let (server, _tokens) = guarded().await;
    let http = HttpClient::new(server.addr, Version::Http1);

    // The store's refusals reach the page, with their status.
    let (status, page) = post_create(&http, ADMIN, "name=run-a").await;
    assert_eq!(status, 409, "{page}");
    assert!(page.contains("already exists"), "{page}");
    assert!(page.contains("Not created: namespace"), "{page}");
    let (status, page) = post_create(&http, ADMIN, "name=run-b&max_spans=lots").await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("max spans must be a whole number"), "{page}");

    let mut client = server.client().await;
    let base = server.url.clone();
    with_browser("console-namespace-admin", move |browser| async move {
        sign_in(&browser, &base, ADMIN).await;
        assert!(navigation(&browser).await.contains(&"Namespaces".to_owned()));
        browser
            .click_to_load("nav[aria-label=Pages] a[href='/console/namespaces']")
            .await;
        browser.wait_for_text("h1", "Namespaces").await;
        assert_eq!(listed(&browser).await, ["default", "run-a"]);

        // A malformed name is refused in the store's words.
        browser.type_into("input[name=name]", "Run_A").await;
        browser
            .click_to_load("#create-namespace button[type=submit]")
            .await;
        browser
            .wait_for_text("[role=alert]", "namespace name \"Run_A\" holds a character outside the rule")
            .await;
        assert_eq!(listed(&browser).await, ["default", "run-a"]);

        // A namespace with a quota, created through the form.
        browser.goto(&format!("{base}/console/namespaces")).await;
        browser.type_into("input[name=name]", "run-q").await;
        browser
            .type_into("input[name=max_queued_rollouts]", "2")
            .await;
        browser
            .click_to_load("#create-namespace button[type=submit]")
            .await;
        browser.wait_for_text("#namespaces", "run-q").await;
        assert_eq!(listed(&browser).await, ["default", "run-a", "run-q"]);
        assert_eq!(
            browser
                .text("#namespaces tr[data-namespace=run-q] td.quotas")
                .await,
            "queued rollouts ≤ 2"
        );
        assert!(browser.url().await.ends_with("/console/namespaces"));
        let mut list = tonic::Request::new(pb::ListNamespacesRequest {});
        authorize(&mut list, ADMIN);
        let summaries = client.list_namespaces(list).await.unwrap().into_inner();
        let run_q = summaries
            .namespaces
            .iter()
            .filter_map(|summary| summary.namespace.as_ref())
            .find(|namespace| namespace.name == "run-q")
            .expect("run-q is listed over gRPC");
        assert_eq!(
            run_q.quotas.as_ref().map(|quotas| quotas.max_queued_rollouts),
            Some(2)
        );

        // Its console, from the list.
        browser.click_to_load("#namespaces a[href='/ns/run-q/']").await;
        browser.wait_for_text("h1", "Overview").await;
        assert!(browser.url().await.ends_with("/ns/run-q/"));
        assert!(browser.text("nav.namespaces summary").await.contains("run-q"));

        // Deleted through the confirmation, from its own console.
        browser
            .click_to_load("nav[aria-label=Pages] a[href='/ns/run-q/console/namespaces']")
            .await;
        browser
            .click_to_load(
                "#namespaces tr[data-namespace=run-q] a[href='/ns/run-q/console/namespaces/run-q/delete']",
            )
            .await;
        browser.wait_for_text("h1", "Delete namespace run-q?").await;
        assert!(browser.text("main").await.contains("All its data is deleted"));
        browser.click_to_load("form button.danger").await;
        browser.wait_for_text("h1", "Namespaces").await;
        assert!(browser.url().await.ends_with("/console/namespaces"));
        assert!(!browser.url().await.contains("/ns/"));
        assert_eq!(listed(&browser).await, ["default", "run-a"]);

        let mut statistics = tonic::Request::new(pb::GetStatisticsRequest {});
        authorize(&mut statistics, ADMIN);
        statistics
            .metadata_mut()
            .insert("lightning-store-namespace", "run-q".parse().unwrap());
        let error = client.get_statistics(statistics).await.unwrap_err();
        assert_eq!(error.code(), tonic::Code::NotFound, "{error:?}");

        // The default namespace has no delete button.
        assert!(
            browser
                .texts("#namespaces tr[data-namespace=default] a.delete")
                .await
                .is_empty()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_admin_of_every_namespace_manages_them() {
    let (server, _tokens) = guarded().await;
    let http = HttpClient::new(server.addr, Version::Http1);
    for token in [READER, RUNNER, ADMIN_OF_A] {
        let bearer = format!("Bearer {token}");
        for path in ["/console/namespaces", "/console/namespaces/run-a/delete"] {
            let answer = http
                .request("GET", path, &[("authorization", &bearer)], Vec::new())
                .await;
            assert_eq!(answer.status, 403, "{token} on {path}: {}", answer.text());
        }
        let (status, page) = post_create(&http, token, "name=run-x").await;
        assert_eq!(status, 403, "{token}: {page}");
        let answer = http
            .request(
                "POST",
                "/console/namespaces/run-a/delete",
                &[
                    ("authorization", &bearer),
                    ("content-type", "application/x-www-form-urlencoded"),
                ],
                Vec::new(),
            )
            .await;
        assert_eq!(answer.status, 403, "{token}: {}", answer.text());
    }
    // Nothing was created or deleted.
    let mut list = tonic::Request::new(pb::ListNamespacesRequest {});
    authorize(&mut list, ADMIN);
    let names: Vec<String> = server
        .client()
        .await
        .list_namespaces(list)
        .await
        .unwrap()
        .into_inner()
        .namespaces
        .into_iter()
        .filter_map(|summary| summary.namespace.map(|namespace| namespace.name))
        .collect();
    assert_eq!(names, ["default", "run-a"]);

    let base = server.url.clone();
    with_browser(
        "console-namespace-admin-refused",
        move |browser| async move {
            for token in [READER, RUNNER, ADMIN_OF_A] {
                sign_in(&browser, &base, token).await;
                let labels = navigation(&browser).await;
                assert!(labels.contains(&"Overview".to_owned()), "{labels:?}");
                assert!(
                    !labels.contains(&"Namespaces".to_owned()),
                    "{token}: {labels:?}"
                );
                browser.goto(&format!("{base}/console/namespaces")).await;
                let refusal = browser.text("main").await;
                let reason = if token == ADMIN_OF_A {
                    "managing namespaces takes an admin token of every namespace"
                } else {
                    "does not allow managing namespaces"
                };
                assert!(refusal.contains(reason), "{token}: {refusal}");
                assert!(browser.texts("#namespaces").await.is_empty());
                browser.goto(&format!("{base}/")).await;
                browser.click_to_load("form.who button").await;
                browser.wait_for_text("h1", "Sign in").await;
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_namespaces_the_page_says_so() {
    let mut config = ServerConfig::default();
    config.namespaces.max_namespaces = 2;
    let server = TestServer::start_opts(
        BACKEND,
        TestOptions {
            config,
            ..TestOptions::default()
        },
    )
    .await;
    let http = HttpClient::new(server.addr, Version::Http1);
    let post = |body: &'static str| {
        let http = &http;
        async move {
            let answer = http
                .request(
                    "POST",
                    "/console/namespaces",
                    &[("content-type", "application/x-www-form-urlencoded")],
                    body.as_bytes().to_vec(),
                )
                .await;
            (answer.status, answer.text())
        }
    };
    // Created: the page again, with it.
    let (status, page) = post("name=run-a&max_spans=100").await;
    assert_eq!(status, 303, "{page}");
    let listing = http.get("/console/namespaces").await;
    assert_eq!(listing.status, 200);
    assert!(listing.text().contains("spans ≤ 100"), "{}", listing.text());
    let (status, page) = post("name=run-b").await;
    assert_eq!(status, 409, "{page}");
    assert!(
        page.contains("this deployment holds at most 2 namespaces"),
        "{page}"
    );
    assert!(!page.contains("/ns/run-b/"), "run-b is not listed: {page}");
}
