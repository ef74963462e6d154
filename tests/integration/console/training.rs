//! The Training page: a run with rewards under two resources versions, in
//! train and val, shows each version's count and mean reward in its table
//! and a band per version and mode in its chart, and per minute in the
//! chart over time; a row's count links to the
//! Rollouts page listing its rollouts, best rewarded first; that page
//! shows each rollout's reward, sorts by it and filters a reward range; the
//! comparison of the last two versions (val by default, train when asked)
//! shows their distributions and the task whose reward changed; a rollout
//! that ends changes the Training page live; how long each version's
//! rollouts took, from their creation to their end, their tokens and their
//! model calls' latency. Writes the
//! documentation's screenshots of the page.

use std::time::Duration;

use super::BACKEND;
use crate::common::browser::with_browser;
use crate::common::{Backend, Client, TestServer, integer, number, text};
use crate::console::support::{add_resources, add_spans, dequeue, finish};
use lightning_store::proto as pb;

/// Runs a rollout of `mode` under `resources_id` to `status` with one
/// reward span; returns its id.
async fn rewarded(
    client: &mut Client,
    mode: pb::RolloutMode,
    resources_id: &str,
    reward: f64,
    status: pb::AttemptStatus,
) -> String {
    let (rollout_id, attempt_id) = claimed(client, mode, resources_id).await;
    let span = pb::Span {
        rollout_id: rollout_id.clone(),
        attempt_id: attempt_id.clone(),
        trace_id: uuid::Uuid::new_v4().simple().to_string(),
        span_id: uuid::Uuid::new_v4().simple().to_string()[..16].to_owned(),
        name: "agentlightning.annotation".into(),
        attributes: vec![
            text("agentlightning.reward.0.name", "primary"),
            number("agentlightning.reward.0.value", reward),
        ],
        ..Default::default()
    };
    add_spans(client, vec![span]).await;
    finish(client, &rollout_id, &attempt_id, status).await;
    rollout_id
}

/// A model call span of the attempt lasting `millis`, with the prompt and
/// response tokens its tracer reported, if any.
fn call_span(
    rollout_id: &str,
    attempt_id: &str,
    millis: i64,
    tokens: Option<(i64, i64)>,
) -> pb::Span {
    let at = |millis: i64| prost_types::Timestamp {
        seconds: 1_700_000_000 + millis / 1000,
        nanos: (millis % 1000) as i32 * 1_000_000,
    };
    let attributes = tokens.map_or_else(Vec::new, |(prompt, response)| {
        vec![
            integer("gen_ai.usage.prompt_tokens", prompt),
            integer("gen_ai.usage.completion_tokens", response),
        ]
    });
    pb::Span {
        rollout_id: rollout_id.to_owned(),
        attempt_id: attempt_id.to_owned(),
        trace_id: uuid::Uuid::new_v4().simple().to_string(),
        span_id: uuid::Uuid::new_v4().simple().to_string()[..16].to_owned(),
        name: "openai.chat.completion".into(),
        attributes,
        start_time: Some(at(0)),
        end_time: Some(at(millis)),
        ..Default::default()
    }
}

/// Enqueues a rollout of `mode` under `resources_id` and claims it.
async fn claimed(
    client: &mut Client,
    mode: pb::RolloutMode,
    resources_id: &str,
) -> (String, String) {
    let spec = pb::RolloutSpec {
        input_json: r#"{"question": "What is 2 + 2?"}"#.into(),
        mode: mode as i32,
        resources_id: Some(resources_id.to_owned()),
        ..Default::default()
    };
    let rollout_id = crate::common::enqueue_spec(client, spec).await.rollout_id;
    let (claimed, attempt_id) = dequeue(client, "worker-1").await;
    assert_eq!(claimed, rollout_id, "the rollout just enqueued");
    (rollout_id, attempt_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_training_page_shows_reward_by_version_and_mode() {
    let server = TestServer::start(BACKEND).await;
    let mut client = server.client().await;
    let (train, val) = (pb::RolloutMode::Train, pb::RolloutMode::Val);
    let (ok, failed) = (pb::AttemptStatus::Succeeded, pb::AttemptStatus::Failed);
    let v1 = add_resources(&mut client, r#"{"policy": "policy-v1"}"#).await;
    let v2 = add_resources(&mut client, r#"{"policy": "policy-v2"}"#).await;
    // Version 1: train rewards 0, 0.5, 1 (mean 0.5), val 0.25; version 2:
    // train rewards 0.5, 1, 1 (one failed), val 0.75.
    let mut v1_train = Vec::new();
    for reward in [0.0, 0.5, 1.0] {
        v1_train.push(rewarded(&mut client, train, &v1, reward, ok).await);
    }
    rewarded(&mut client, val, &v1, 0.25, ok).await;
    for (reward, status) in [(0.5, failed), (1.0, ok), (1.0, ok)] {
        rewarded(&mut client, train, &v2, reward, status).await;
    }
    rewarded(&mut client, val, &v2, 0.75, ok).await;
    let (pending, pending_attempt) = claimed(&mut client, val, &v2).await;
    let base = server.url.clone();
    with_browser("console-training", move |browser| async move {
        browser.goto(&format!("{base}/console/training")).await;
        assert_eq!(browser.eval("return document.title").await, "Training · lightning-store");
        let rows = browser
            .eval(
                "return Array.from(document.querySelectorAll('#training-versions tbody tr'), \
                 (tr) => Array.from(tr.cells, (td) => td.textContent).join('|'))",
            )
            .await;
        let rows: Vec<String> = serde_json::from_value(rows).unwrap();
        assert_eq!(
            rows,
            [
                format!("1|{v1}|train|3|100.0%|3|0.500|0.000|0.500|1.000"),
                format!("1|{v1}|val|1|100.0%|1|0.250|0.250|0.250|0.250"),
                format!("2|{v2}|train|3|66.7%|3|0.833|0.500|1.000|1.000"),
                format!("2|{v2}|val|1|100.0%|1|0.750|0.750|0.750|0.750"),
            ]
        );
        // A band and a mean mark per version and mode.
        let bands = browser
            .eval("return [document.querySelectorAll('[aria-labelledby=chart-heading] svg.chart rect.ok').length, document.querySelectorAll('[aria-labelledby=chart-heading] svg.chart rect.run').length, document.querySelectorAll('[aria-labelledby=chart-heading] svg.chart rect.beat').length]")
            .await;
        assert_eq!(bands, serde_json::json!([2, 2, 4]));
        let legend = browser
            .texts("[aria-labelledby=chart-heading] ul.legend li")
            .await;
        assert_eq!(legend, ["train", "val", "mean"]);
        // Over time: the bands of the minutes the rollouts ended in count
        // every train and val rollout once, whichever minutes they fell in.
        let over_time = browser
            .eval(
                "const counted = (cls) => Array.from(document.querySelectorAll(\
                 `[aria-labelledby=timeline-heading] svg.chart rect.${cls} title`), \
                 (t) => Number(t.textContent.match(/of (\\d+) rollouts$/)[1])) \
                 .reduce((a, b) => a + b, 0); return [counted('ok'), counted('run')]",
            )
            .await;
        assert_eq!(over_time, serde_json::json!([6, 2]));
        assert_eq!(
            browser
                .texts("[aria-labelledby=timeline-heading] ul.legend li")
                .await,
            ["train", "val", "mean"]
        );
        // The later version's train band starts higher than the earlier's
        // (its 10th percentile, 0.5 against 0).
        let higher = browser
            .eval(
                "const [a, b] = document.querySelectorAll('[aria-labelledby=chart-heading] svg.chart rect.ok'); \
                 return b.y.baseVal.value + b.height.baseVal.value < a.y.baseVal.value + a.height.baseVal.value",
            )
            .await;
        assert_eq!(higher, true);
        // The last two versions compared in val: the one task (every
        // rollout asks the same question) went from 0.25 to 0.75.
        let task = r#"{"question":"What is 2 + 2?"}"#;
        assert_eq!(
            browser.text("#compare-summary").await,
            "Version 1 (before): 1 of 1 val rollouts rewarded, mean 0.250. \
             Version 2 (after): 1 of 1 rewarded, mean 0.750."
        );
        let task_rows = "return Array.from(document.querySelectorAll('#compare-tasks tbody tr'), \
             (tr) => Array.from(tr.cells, (td) => td.textContent).join('|'))";
        assert_eq!(
            browser.eval(task_rows).await,
            serde_json::json!([format!("{task}|0.250 (1)|0.750 (1)|+0.500")])
        );
        let compared_bars = browser
            .eval("return document.querySelectorAll('#compare svg.chart rect.wait, #compare svg.chart rect.ok').length")
            .await;
        assert_eq!(compared_bars, 2, "a bar for each version's one reward");
        assert_eq!(
            browser.texts("#compare ul.legend li").await,
            ["before: 1", "after: 1"]
        );
        if BACKEND == Backend::Sqlite {
            browser
                .eval("document.getElementById('chart-heading').scrollIntoView(); return true")
                .await;
            browser.document("training").await;
        }
        // The train rollouts compared instead, through the form.
        browser
            .eval("document.querySelector(\"select[name='compare_mode']\").value = 'train'; return true")
            .await;
        browser.click_to_load("#compare button[type='submit']").await;
        assert_eq!(
            browser.eval(task_rows).await,
            serde_json::json!([format!("{task}|0.500 (3)|0.833 (3)|+0.333")])
        );
        if BACKEND == Backend::Sqlite {
            browser
                .eval("document.getElementById('compare-summary').scrollIntoView(); return true")
                .await;
            browser.document("training-compare").await;
        }

        // A row's count lists its rollouts, the best rewarded first.
        browser.click_to_load("#training-versions tbody tr:first-child td:nth-child(4) a").await;
        browser.wait_for_text("p.count", "3 rollouts match").await;
        let best_first: Vec<String> = v1_train.iter().rev().cloned().collect();
        assert_eq!(browser.texts("table.rollouts td a.id").await, best_first);
        assert_eq!(
            browser.texts("table.rollouts td.reward").await,
            ["1.000", "0.500", "0.000"]
        );
        // A click on the sorted column reverses it.
        browser.click_to_load("table.rollouts th[aria-sort='descending'] a").await;
        assert_eq!(browser.texts("table.rollouts td a.id").await, v1_train);
        // The filters' reward range keeps the rollouts in it, both ends in.
        browser.type_into("input[name='reward_min']", "0.5").await;
        browser.type_into("input[name='reward_max']", "1").await;
        browser.click_to_load("form.filters button[type='submit']").await;
        browser.wait_for_text("p.count", "2 rollouts match").await;
        assert_eq!(browser.texts("table.rollouts td a.id").await, &v1_train[1..]);
        assert_eq!(
            browser.eval("return document.querySelector(\"input[name='reward_min']\").value").await,
            "0.5",
            "the form keeps the range"
        );

        // A late reward and a rollout that ends change the page live.
        browser.goto(&format!("{base}/console/training")).await;
        let late = pb::Span {
            rollout_id: pending.clone(),
            attempt_id: pending_attempt.clone(),
            trace_id: uuid::Uuid::new_v4().simple().to_string(),
            span_id: uuid::Uuid::new_v4().simple().to_string()[..16].to_owned(),
            name: "agentlightning.annotation".into(),
            attributes: vec![
                text("agentlightning.reward.0.name", "primary"),
                number("agentlightning.reward.0.value", 0.25),
            ],
            ..Default::default()
        };
        add_spans(&mut client, vec![late]).await;
        finish(&mut client, &pending, &pending_attempt, ok).await;
        browser
            .wait_for_text(
                "#training-versions tbody tr:last-child",
                &format!("2{v2}val2100.0%20.500"),
            )
            .await;
        // The comparison follows: version 2's val mean is now 0.5.
        browser.wait_for_text("#compare-tasks", "+0.250").await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_training_page_shows_each_versions_durations_tokens_and_call_latency() {
    let (server, clock) =
        TestServer::start_on_manual_clock(BACKEND, Duration::from_secs(3600)).await;
    let mut client = server.client().await;
    let (train, val) = (pb::RolloutMode::Train, pb::RolloutMode::Val);
    let ok = pb::AttemptStatus::Succeeded;
    let v1 = add_resources(&mut client, r#"{"policy": "policy-v1"}"#).await;
    let v2 = add_resources(&mut client, r#"{"policy": "policy-v2"}"#).await;
    // Each rollout waits 5 s in the queue, then runs for its time: version
    // 1's train rollouts 40 s, 1 min 10 s and 1 min 55 s; version 2's train
    // 20 s and 25 s, its val rollout 400 ms. Version 1's train rollouts
    // each make a model call that reports its tokens; version 2's val
    // rollout one that does not.
    for (mode, version, running, call) in [
        (train, &v1, 40_000, Some((1_400, Some((1_000, 200))))),
        (train, &v1, 70_000, Some((2_400, Some((2_000, 400))))),
        (train, &v1, 115_000, Some((3_300, Some((3_000, 600))))),
        (train, &v2, 20_000, None),
        (train, &v2, 25_000, None),
        (val, &v2, 400, Some((250, None))),
    ] {
        let spec = pb::RolloutSpec {
            input_json: "{}".into(),
            mode: mode as i32,
            resources_id: Some(version.clone()),
            ..Default::default()
        };
        crate::common::enqueue_spec(&mut client, spec).await;
        clock.advance(Duration::from_secs(5));
        let (rollout_id, attempt_id) = dequeue(&mut client, "worker-1").await;
        if let Some((millis, tokens)) = call {
            add_spans(
                &mut client,
                vec![call_span(&rollout_id, &attempt_id, millis, tokens)],
            )
            .await;
        }
        clock.advance(Duration::from_millis(running));
        finish(&mut client, &rollout_id, &attempt_id, ok).await;
    }
    let base = server.url.clone();
    with_browser("console-training-durations", move |browser| async move {
        browser.goto(&format!("{base}/console/training")).await;
        let rows = |table: &str| {
            format!(
                "return Array.from(document.querySelectorAll('#{table} tbody tr'), \
                 (tr) => Array.from(tr.cells, (td) => td.textContent).join('|'))"
            )
        };
        assert_eq!(
            browser.eval(&rows("training-durations")).await,
            serde_json::json!([
                "1|train|3|1 min 20 s|44.7 s|1 min 19 s|2 min 6 s",
                "2|train|2|27.5 s|25.1 s|25.1 s|31.6 s",
                "2|val|1|5.4 s|5.6 s|5.6 s|5.6 s",
            ])
        );
        // Tokens: 1,000, 2,000 and 3,000 prompt tokens, read from their
        // bins' centres (3,000 in the bin of 3,160).
        assert_eq!(
            browser.eval(&rows("training-prompt-tokens")).await,
            serde_json::json!(["1|train|3|2,000|1,000|2,000|3,160"])
        );
        assert_eq!(
            browser.eval(&rows("training-response-tokens")).await,
            serde_json::json!(["1|train|3|400|200|398|631"])
        );
        // Latency: 1.4 s, 2.4 s and 3.3 s calls; the call that reported no
        // tokens is timed all the same.
        assert_eq!(
            browser.eval(&rows("training-call-latency")).await,
            serde_json::json!([
                "1|train|3|2.4 s|1.4 s|2.5 s|3.2 s",
                "2|val|1|250 ms|251 ms|251 ms|251 ms",
            ])
        );
        if BACKEND == Backend::Sqlite {
            browser
                .eval(
                    "document.getElementById('training-durations-heading').scrollIntoView(); \
                     return true",
                )
                .await;
            browser.document("training-durations").await;
            browser
                .eval(
                    "document.getElementById('training-prompt-tokens-heading').scrollIntoView(); \
                     return true",
                )
                .await;
            browser.document("training-tokens").await;
        }
    })
    .await;
}
