//! Each page of the console shows what the store holds, readable at a
//! desktop's and a phone's width and reachable from the keyboard; these
//! tests write the README's screenshots (see `common::browser`).

use super::BACKEND;
use crate::common::browser::{DESKTOP, PHONE, with_browser};
use crate::common::{Backend, TestServer};
use crate::console::support::{TRACE_ID, WORKER, seed};

/// Only one backend writes the documentation's screenshots.
fn documents() -> bool {
    BACKEND == Backend::Sqlite
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_shows_what_the_store_holds() {
    let server = TestServer::start(BACKEND).await;
    let seeded = seed(&mut server.client().await).await;
    let base = server.url.clone();
    with_browser("console-every-page", move |browser| async move {
        // Overview: the counts of the store.
        browser.goto(&format!("{base}/")).await;
        assert_eq!(browser.eval("return document.title").await, "Overview · lightning-store");
        let statuses = browser
            .eval(
                "return Array.from(document.querySelectorAll('ul.statuses li'), \
                 (li) => li.querySelector('.badge').textContent + '=' + li.querySelector('.num').textContent)",
            )
            .await;
        let statuses: Vec<String> = serde_json::from_value(statuses).unwrap();
        assert!(statuses.contains(&"succeeded=1".to_owned()), "{statuses:?}");
        assert!(statuses.contains(&"queuing=1".to_owned()), "{statuses:?}");
        assert_eq!(browser.text("#queue-heading + p").await, "1 rollouts waiting for a worker");
        let bars = browser.eval("return document.querySelectorAll('svg.chart rect.ok').length").await;
        assert_eq!(bars, 1, "one minute with a finished rollout");
        let legend = browser.texts("ul.legend li").await;
        assert!(legend.contains(&"succeeded: 1".to_owned()), "{legend:?}");
        // Finished rollouts stand on the axis beside the created ones, not
        // stacked on them.
        let standing = browser
            .eval(
                "const chart = document.querySelector('#finished-heading ~ svg.chart'); \
                 const ok = chart.querySelector('rect.ok'); \
                 const base = chart.querySelector('line.base'); \
                 return Math.abs(ok.y.baseVal.value + ok.height.baseVal.value - base.y1.baseVal.value) < 0.2",
            )
            .await;
        assert_eq!(standing, true, "the finished bar starts at the axis");
        let rate = browser.text("#spans-heading + p").await;
        assert!(rate.ends_with("spans recorded per second over the last 10.0 s"), "{rate}");
        // A server that just started draws the minutes it sampled, not an hour.
        let depth = browser.text("#depth-heading").await;
        assert!(
            depth == "Queue depth" || depth == "Queue depth, last 1 minute" || depth == "Queue depth, last 2 minutes",
            "{depth}"
        );
        if documents() {
            browser.document("overview").await;
        }

        // Rollouts: both, newest first, each linking to its page.
        browser.goto(&format!("{base}/console/rollouts")).await;
        browser.wait_for_text("p.count", "2 rollouts match").await;
        let ids = browser.texts("table.rollouts td a.id").await;
        assert_eq!(ids, [seeded.queued.clone(), seeded.done.clone()]);
        // The filter is in the URL: succeeded ones only.
        browser.click("input[name=status][value=succeeded]").await;
        browser.click_to_load("form.filters button[type=submit]").await;
        browser.wait_for_text("p.count", "1 rollouts match").await;
        assert!(browser.url().await.contains("status=succeeded"));
        assert_eq!(browser.texts("table.rollouts td a.id").await, std::slice::from_ref(&seeded.done));
        if documents() {
            browser.goto(&format!("{base}/console/rollouts")).await;
            browser.document("rollouts").await;
        }

        // The finished rollout: its reward, attempt, spans and input.
        browser.goto(&format!("{base}/console/rollouts/{}", seeded.done)).await;
        let summary = browser.text("section.summary").await;
        assert!(summary.contains("succeeded") && summary.contains("0.75"), "{summary}");
        assert!(browser.text("#live table").await.contains(WORKER));
        assert!(browser.text("pre.json").await.contains("What is 2 + 2?"));
        let errors = browser.texts("ol.waterfall li.error .name").await;
        assert_eq!(errors, ["error tool.search"]);
        // Attributes on demand: closed until the span is opened.
        let llm = "ol.waterfall li.span:nth-of-type(3) summary";
        assert!(!browser.text("ol.waterfall").await.contains("gen_ai.request.model"));
        browser.click(llm).await;
        browser.wait_for_text("ol.waterfall details[open]", "gen_ai.request.model").await;
        if documents() {
            browser
                .eval("document.getElementById('attempts-heading').scrollIntoView(); return true")
                .await;
            browser.document("rollout").await;
        }

        // The waiting rollout says why it waits.
        browser.goto(&format!("{base}/console/rollouts/{}", seeded.queued)).await;
        let waiting = browser.text("#waiting-heading + p").await;
        assert_eq!(waiting, "Place in the queue: 1 of 1.");
        assert!(browser.text("section.notice").await.contains("next in the queue"));

        // Workers, resources and their difference, models.
        browser.goto(&format!("{base}/console/workers")).await;
        assert!(browser.text("#live table").await.contains(WORKER));
        if documents() {
            browser.document("workers").await;
        }
        let (older, newer) = &seeded.resources;
        browser.goto(&format!("{base}/console/resources?a={newer}&b={older}")).await;
        let added = browser.texts("pre.diff .add").await;
        let removed = browser.texts("pre.diff .del").await;
        assert!(added.iter().any(|line| line.contains("policy-v2")), "{added:?}");
        assert!(removed.iter().any(|line| line.contains("policy-v1")), "{removed:?}");
        // Each published resources set has its place in the order of
        // publication, newest first, beside its revision.
        let order = browser.texts("table tbody tr td:first-child").await;
        assert_eq!(order, ["2", "1"]);
        if documents() {
            browser.document("resources").await;
        }
        browser.goto(&format!("{base}/console/models")).await;
        assert!(browser.text("#live").await.contains("No model server is registered"));

        // The search box takes a rollout id.
        browser.goto(&format!("{base}/")).await;
        browser.type_into("#search-box", &seeded.done).await;
        browser.click_to_load("form.search button").await;
        browser.wait_for_text("h1", &seeded.done).await;
        // And a trace id: the attempt with its spans.
        browser.type_into("#search-box", TRACE_ID).await;
        browser.click_to_load("form.search button").await;
        assert!(browser.url().await.contains("#spans-"));
        assert!(browser.text("h1").await.contains(&seeded.done));

        // A phone's width: nothing but tables scrolls sideways.
        browser.resize(PHONE).await;
        for path in ["/", "/console/rollouts", &format!("/console/rollouts/{}", seeded.done)] {
            browser.goto(&format!("{base}{path}")).await;
            let fits = browser
                .eval("return document.documentElement.scrollWidth <= window.innerWidth")
                .await;
            assert_eq!(fits, true, "{path} overflows a phone's width");
        }
        browser.goto(&format!("{base}/")).await;
        if documents() {
            browser.document("overview-phone").await;
        }
        browser.resize(DESKTOP).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waterfall_shows_spans_in_parent_order() {
    let server = TestServer::start(BACKEND).await;
    let seeded = seed(&mut server.client().await).await;
    let url = format!("{}/console/rollouts/{}", server.url, seeded.done);
    with_browser("console-waterfall", move |browser| async move {
        browser.goto(&url).await;
        let names = browser.texts("ol.waterfall li.span summary .name").await;
        let names: Vec<&str> = names
            .iter()
            .map(|name| name.trim_start_matches("error "))
            .collect();
        assert_eq!(names, seeded.span_order);
        // Each child is indented one level under its parent.
        let depths = browser
            .eval(
                "return Array.from(document.querySelectorAll('ol.waterfall li.span'), \
                 (li) => Number((li.className.match(/\\bd(\\d+)\\b/) || [0, 0])[1]))",
            )
            .await;
        assert_eq!(depths, serde_json::json!([0, 1, 1, 2, 1]));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keyboard_reaches_everything() {
    let server = TestServer::start(BACKEND).await;
    let url = format!("{}/", server.url);
    with_browser("console-keyboard", move |browser| async move {
        browser.goto(&url).await;
        let tab = "\u{e004}";
        let active = "return document.activeElement.textContent.trim()";
        browser
            .client()
            .active_element()
            .await
            .unwrap()
            .send_keys(tab)
            .await
            .unwrap();
        assert_eq!(browser.eval(active).await, "Skip to content");
        browser
            .client()
            .active_element()
            .await
            .unwrap()
            .send_keys(tab)
            .await
            .unwrap();
        assert_eq!(browser.eval(active).await, "lightning-store");
        browser
            .client()
            .active_element()
            .await
            .unwrap()
            .send_keys(tab)
            .await
            .unwrap();
        assert_eq!(browser.eval(active).await, "Overview");
        // Enter follows the focused link.
        browser
            .client()
            .active_element()
            .await
            .unwrap()
            .send_keys(tab)
            .await
            .unwrap();
        let mark = browser.mark_document().await;
        browser
            .client()
            .active_element()
            .await
            .unwrap()
            .send_keys("\u{e007}")
            .await
            .unwrap();
        browser.wait_for_new_document(mark).await;
        assert_eq!(browser.text("h1").await, "Rollouts");
    })
    .await;
}
