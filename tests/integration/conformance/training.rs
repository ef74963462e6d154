//! GetTrainingSummary: reward by policy version and mode, kept in the
//! commit of every change, against a direct computation over the same
//! rollouts read back through the API (their statuses, modes, versions and
//! reward spans, their creation and end), including a retried rollout, a
//! cancelled one, one still running and a reward that arrives after its
//! rollout ended.

use std::time::Duration;

use lightning_store::proto as pb;
use tonic::Code;

use super::BACKEND;
use super::TestServer;
use crate::common::{add_resources, integer, number, text};
use crate::conformance::support::*;

/// A reward span of rollout `rollout_id`'s attempt.
fn reward_span(
    rollout_id: &str,
    attempt_id: &str,
    value: f64,
    sequence_id: Option<i64>,
) -> pb::Span {
    pb::Span {
        attributes: vec![
            text("agentlightning.reward.0.name", "primary"),
            number("agentlightning.reward.0.value", value),
        ],
        ..span(
            rollout_id,
            attempt_id,
            "agentlightning.annotation",
            sequence_id,
        )
    }
}

/// The resources every version publishes.
const PROMPT: &str = r#"{"prompt": {"resource_type": "prompt_template", "template": "hi {x}", "engine": "f-string"}}"#;

/// Enqueues a rollout of `mode` under `resources_id` and claims it;
/// returns its id and its attempt's.
async fn claimed(
    client: &mut Client,
    mode: pb::RolloutMode,
    resources_id: &str,
    spec: pb::RolloutSpec,
) -> (String, String) {
    let rollout = enqueue_spec(
        client,
        pb::RolloutSpec {
            mode: mode as i32,
            resources_id: Some(resources_id.to_owned()),
            ..spec
        },
    )
    .await;
    let claimed = dequeue(client, None)
        .await
        .expect("the rollout just enqueued");
    assert_eq!(claimed.rollout_id, rollout.rollout_id);
    let attempt_id = attempt_of(&claimed).attempt_id.clone();
    (rollout.rollout_id, attempt_id)
}

/// Runs a rollout whose one attempt records `rewards` in order and ends as
/// `status`; returns its id and its attempt's.
async fn ran(
    client: &mut Client,
    mode: pb::RolloutMode,
    resources_id: &str,
    rewards: &[f64],
    status: A,
) -> (String, String) {
    let (rollout_id, attempt_id) = claimed(client, mode, resources_id, spec("{}")).await;
    for &reward in rewards {
        add_span(client, reward_span(&rollout_id, &attempt_id, reward, None)).await;
    }
    set_attempt_status(client, &rollout_id, &attempt_id, status)
        .await
        .unwrap();
    (rollout_id, attempt_id)
}

/// Runs a rollout whose first attempt fails with reward 0.25 and whose
/// retry succeeds with reward 0.875, its final reward.
async fn retried(client: &mut Client, mode: pb::RolloutMode, resources_id: &str) {
    let (rollout_id, first) =
        claimed(client, mode, resources_id, retry_spec(2, &[A::Failed])).await;
    add_span(client, reward_span(&rollout_id, &first, 0.25, None)).await;
    set_attempt_status(client, &rollout_id, &first, A::Failed)
        .await
        .unwrap();
    let again = dequeue(client, None).await.expect("the retry");
    assert_eq!(again.rollout_id, rollout_id);
    let second = attempt_of(&again).attempt_id.clone();
    add_span(client, reward_span(&rollout_id, &second, 0.875, None)).await;
    set_attempt_status(client, &rollout_id, &second, A::Succeeded)
        .await
        .unwrap();
}

async fn summary(
    client: &mut Client,
    mode: pb::RolloutMode,
    version_from: Option<i64>,
    version_to: Option<i64>,
) -> Result<Vec<pb::VersionSummary>, tonic::Status> {
    client
        .get_training_summary(pb::GetTrainingSummaryRequest {
            mode: mode as i32,
            version_from,
            version_to,
        })
        .await
        .map(|response| response.into_inner().versions)
}

/// The reward a span carries, read from its attributes.
fn span_reward(span: &pb::Span) -> Option<f64> {
    span.attributes
        .iter()
        .find_map(|kv| match kv.value.as_ref()?.value.as_ref()? {
            pb::attribute_value::Value::DoubleValue(v)
                if kv.key == "agentlightning.reward.0.value" =>
            {
                Some(*v)
            }
            _ => None,
        })
}

/// The reward rounded to two significant digits.
fn two_digits(value: f64) -> f64 {
    format!("{value:.1e}").parse().unwrap()
}

/// The rollouts the store holds that ended as succeeded or failed (of
/// `mode` only, when given), each with its final reward read directly from
/// its spans.
async fn counted_rollouts(
    client: &mut Client,
    mode: Option<pb::RolloutMode>,
) -> Vec<(pb::Rollout, Option<f64>)> {
    let rollouts = client
        .query_rollouts(pb::QueryRolloutsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .rollouts;
    let mut counted = Vec::new();
    for rollout in rollouts {
        let status = status(&rollout);
        if status != R::Succeeded && status != R::Failed {
            continue;
        }
        if mode.is_some_and(|mode| rollout.mode != mode as i32) {
            continue;
        }
        let mut spans = rollout_spans(client, &rollout.rollout_id).await.spans;
        spans.sort_by_key(|span| span.sequence_id.unwrap());
        let reward = spans.iter().rev().find_map(span_reward);
        counted.push((rollout, reward));
    }
    counted
}

/// A group's numbers computed directly: rollouts, succeeded, their
/// rewards and their durations (in whole milliseconds).
#[derive(Default)]
struct Direct {
    rollouts: i64,
    succeeded: i64,
    rewards: Vec<f64>,
    durations: Vec<f64>,
}

/// A duration in milliseconds as the store bins it: the centre of its
/// twentieth of a decade, to three significant digits.
fn twentieth_of_a_decade(millis: f64) -> f64 {
    if millis < 1.0 {
        return 0.0;
    }
    let centre = 10f64.powf((20.0 * millis.log10()).round() / 20.0);
    format!("{centre:.2e}").parse().unwrap()
}

/// Returns (values, mean, p10, p50, p90) of `values`, percentiles by
/// nearest rank over the values binned by `binned`.
fn distribution(
    values: &[f64],
    binned: fn(f64) -> f64,
) -> (i64, Option<f64>, Option<f64>, Option<f64>, Option<f64>) {
    let n = values.len();
    let mean = (n > 0).then(|| values.iter().sum::<f64>() / n as f64);
    let mut binned: Vec<f64> = values.iter().copied().map(binned).collect();
    binned.sort_by(f64::total_cmp);
    let percentile = |p: f64| (n > 0).then(|| binned[((p * n as f64).ceil() as usize).max(1) - 1]);
    (
        n as i64,
        mean,
        percentile(0.1),
        percentile(0.5),
        percentile(0.9),
    )
}

/// Returns nanoseconds since the epoch.
fn nanos(time: &prost_types::Timestamp) -> i64 {
    time.seconds * 1_000_000_000 + i64::from(time.nanos)
}

impl Direct {
    fn add(&mut self, rollout: &pb::Rollout, reward: Option<f64>) {
        self.rollouts += 1;
        self.succeeded += i64::from(status(rollout) == R::Succeeded);
        self.rewards.extend(reward);
        let start = nanos(rollout.start_time.as_ref().expect("a start"));
        let end = nanos(
            rollout
                .end_time
                .as_ref()
                .expect("an ended rollout has an end"),
        );
        self.durations.push(((end - start) / 1_000_000) as f64);
    }

    /// Returns (rewarded, mean, p10, p50, p90) of the rewards.
    fn rewards(&self) -> (i64, Option<f64>, Option<f64>, Option<f64>, Option<f64>) {
        distribution(&self.rewards, two_digits)
    }

    /// Returns the durations' distribution, in seconds.
    fn durations(&self) -> pb::Distribution {
        let (count, mean, p10, p50, p90) = distribution(&self.durations, twentieth_of_a_decade);
        let seconds = |millis: Option<f64>| millis.map(|millis| millis / 1000.0);
        pb::Distribution {
            count,
            mean: seconds(mean),
            p10: seconds(p10),
            p50: seconds(p50),
            p90: seconds(p90),
        }
    }
}

/// The summary computed directly from every rollout the store holds and
/// its spans, with `versions` giving each resources id its number.
async fn direct_summary(
    client: &mut Client,
    versions: &[(String, i64)],
    mode: Option<pb::RolloutMode>,
) -> Vec<pb::VersionSummary> {
    let mut groups: std::collections::BTreeMap<(i64, i32), Direct> = Default::default();
    for (rollout, reward) in counted_rollouts(client, mode).await {
        let resources_id = rollout.resources_id.clone().unwrap_or_default();
        let number = versions
            .iter()
            .find(|(id, _)| *id == resources_id)
            .map(|&(_, n)| n)
            .unwrap();
        groups
            .entry((number, rollout.mode))
            .or_default()
            .add(&rollout, reward);
    }
    groups
        .into_iter()
        .map(|((number, mode), direct)| {
            let (rewarded, reward_mean, reward_p10, reward_p50, reward_p90) = direct.rewards();
            pb::VersionSummary {
                resources_id: versions[(number - 1) as usize].0.clone(),
                version: Some(number),
                model_version: None,
                mode,
                rollouts: direct.rollouts,
                succeeded: direct.succeeded,
                rewarded,
                reward_mean,
                reward_p10,
                reward_p50,
                reward_p90,
                duration_seconds: Some(direct.durations()),
                // The runs compared here make no model call (the tokens'
                // own test counts calls).
                prompt_tokens: Some(pb::Distribution::default()),
                response_tokens: Some(pb::Distribution::default()),
                model_call_latency_seconds: Some(pb::Distribution::default()),
                ..Default::default()
            }
        })
        .collect()
}

/// The timeline computed directly: every counted rollout under the period
/// of `seconds` its `end_time` falls in.
async fn direct_timeline(client: &mut Client, seconds: i64) -> Vec<pb::PeriodSummary> {
    let mut groups: std::collections::BTreeMap<(i64, i32), Direct> = Default::default();
    for (rollout, reward) in counted_rollouts(client, None).await {
        let ended = rollout.end_time.expect("an ended rollout has an end");
        groups
            .entry((ended.seconds.div_euclid(seconds) * seconds, rollout.mode))
            .or_default()
            .add(&rollout, reward);
    }
    groups
        .into_iter()
        .map(|((start, mode), direct)| {
            let (rewarded, reward_mean, reward_p10, reward_p50, reward_p90) = direct.rewards();
            pb::PeriodSummary {
                start: Some(prost_types::Timestamp {
                    seconds: start,
                    nanos: 0,
                }),
                mode,
                rollouts: direct.rollouts,
                succeeded: direct.succeeded,
                rewarded,
                reward_mean: reward_mean.map(|m| (m * 1e6).round() / 1e6),
                reward_p10,
                reward_p50,
                reward_p90,
            }
        })
        .collect()
}

async fn timeline(
    client: &mut Client,
    request: pb::GetRewardTimelineRequest,
) -> Result<pb::GetRewardTimelineResponse, tonic::Status> {
    let mut response = client.get_reward_timeline(request).await?.into_inner();
    for period in &mut response.periods {
        period.reward_mean = period.reward_mean.map(|m| (m * 1e6).round() / 1e6);
    }
    Ok(response)
}

/// Compares summaries, means to a millionth (the store keeps sums in
/// millionths).
fn assert_summaries(actual: &[pb::VersionSummary], expected: &[pb::VersionSummary]) {
    let millionth = |mean: Option<f64>| mean.map(|m| (m * 1e6).round() / 1e6);
    let rounded = |summaries: &[pb::VersionSummary]| -> Vec<pb::VersionSummary> {
        summaries
            .iter()
            .map(|s| pb::VersionSummary {
                reward_mean: millionth(s.reward_mean),
                duration_seconds: s.duration_seconds.map(|d| pb::Distribution {
                    mean: millionth(d.mean),
                    ..d
                }),
                ..s.clone()
            })
            .collect()
    };
    assert_eq!(rounded(actual), rounded(expected));
}

#[tokio::test]
async fn the_summary_counts_each_versions_ended_rollouts_and_their_final_rewards() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let (train, val) = (pb::RolloutMode::Train, pb::RolloutMode::Val);
    let v1 = add_resources(&mut c, PROMPT).await;
    let v2 = add_resources(&mut c, PROMPT).await;
    let versions = [(v1.clone(), 1), (v2.clone(), 2)];
    assert_eq!(
        summary(&mut c, pb::RolloutMode::Unspecified, None, None)
            .await
            .unwrap(),
        []
    );

    // Version 1: a success, a failure, a success without a reward, in
    // train; the last reward of several wins; one val rollout.
    ran(&mut c, train, &v1, &[0.2, 1.0], A::Succeeded).await;
    ran(&mut c, train, &v1, &[0.0], A::Failed).await;
    ran(&mut c, train, &v1, &[], A::Succeeded).await;
    ran(&mut c, val, &v1, &[0.5], A::Succeeded).await;

    // Version 2: a rollout retried after a failed attempt, whose second
    // attempt's reward is final.
    retried(&mut c, train, &v2).await;
    // A cancelled rollout with a reward, and a running one: neither counts.
    let (cancelled, attempt) = claimed(&mut c, train, &v2, spec("{}")).await;
    add_span(&mut c, reward_span(&cancelled, &attempt, 1.0, None)).await;
    set_rollout_status(&mut c, &cancelled, R::Cancelled).await;
    let (running, running_attempt) = claimed(&mut c, train, &v2, spec("{}")).await;
    add_span(&mut c, reward_span(&running, &running_attempt, 1.0, None)).await;
    // A val rollout whose reward arrives after it ended, then an earlier
    // span (by sequence id) that does not replace it.
    let (late, attempt) = ran(&mut c, val, &v2, &[0.1], A::Succeeded).await;
    let expected = direct_summary(&mut c, &versions, None).await;
    assert_summaries(
        &summary(&mut c, pb::RolloutMode::Unspecified, None, None)
            .await
            .unwrap(),
        &expected,
    );
    add_span(&mut c, reward_span(&late, &attempt, 0.7, None)).await;
    add_span(&mut c, reward_span(&late, &attempt, 0.0, Some(0))).await;

    let all = summary(&mut c, pb::RolloutMode::Unspecified, None, None)
        .await
        .unwrap();
    let expected = direct_summary(&mut c, &versions, None).await;
    assert_summaries(&all, &expected);
    // What the direct computation found, spelled out: the rows and the
    // late reward's effect.
    let rows: Vec<(i64, i32, i64, i64, i64)> = all
        .iter()
        .map(|s| {
            (
                s.version.unwrap(),
                s.mode,
                s.rollouts,
                s.succeeded,
                s.rewarded,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (1, train as i32, 3, 2, 2),
            (1, val as i32, 1, 1, 1),
            (2, train as i32, 1, 1, 1),
            (2, val as i32, 1, 1, 1),
        ]
    );
    assert_eq!(all[0].reward_mean, Some(0.5));
    assert_eq!(all[2].reward_mean, Some(0.875));
    assert_eq!(all[3].reward_p50, Some(0.7));

    // The running rollout ends: it counts from then on.
    set_attempt_status(&mut c, &running, &running_attempt, A::Failed)
        .await
        .unwrap();
    let vals = summary(&mut c, val, None, None).await.unwrap();
    assert_summaries(&vals, &direct_summary(&mut c, &versions, Some(val)).await);
    assert!(vals.iter().all(|s| s.mode == val as i32) && vals.len() == 2);
    let second_only = summary(&mut c, pb::RolloutMode::Unspecified, Some(2), Some(2))
        .await
        .unwrap();
    let expected: Vec<_> = direct_summary(&mut c, &versions, None)
        .await
        .into_iter()
        .filter(|s| s.version == Some(2))
        .collect();
    assert_summaries(&second_only, &expected);
    assert_eq!(second_only[0].rollouts, 2);
}

#[tokio::test]
async fn a_version_range_that_ends_before_it_starts_is_invalid() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let refused = summary(&mut c, pb::RolloutMode::Unspecified, Some(3), Some(2)).await;
    assert_code(
        refused,
        Code::InvalidArgument,
        "version_from (3) is after version_to (2)",
    );
    let refused = summary(&mut c, pb::RolloutMode::Unspecified, None, None);
    assert!(refused.await.is_ok());
    let unknown_mode = c
        .get_training_summary(pb::GetTrainingSummaryRequest {
            mode: 42,
            ..Default::default()
        })
        .await;
    assert_code(unknown_mode, Code::InvalidArgument, "mode");
}

#[tokio::test]
async fn the_timeline_counts_ended_rollouts_by_the_minute_and_the_hour_they_ended_in() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let (train, val) = (pb::RolloutMode::Train, pb::RolloutMode::Val);
    let v1 = add_resources(&mut c, PROMPT).await;
    let v2 = add_resources(&mut c, PROMPT).await;
    let empty = timeline(&mut c, pb::GetRewardTimelineRequest::default()).await;
    assert_eq!(empty.unwrap().periods, []);

    ran(&mut c, train, &v1, &[0.2, 1.0], A::Succeeded).await;
    ran(&mut c, train, &v2, &[0.0], A::Failed).await;
    ran(&mut c, val, &v1, &[], A::Succeeded).await;
    // Retried: it counts once, when its second attempt ends.
    retried(&mut c, train, &v2).await;
    // Cancelled: it does not count.
    let (cancelled, attempt) = claimed(&mut c, val, &v2, spec("{}")).await;
    add_span(&mut c, reward_span(&cancelled, &attempt, 1.0, None)).await;
    set_rollout_status(&mut c, &cancelled, R::Cancelled).await;
    // A reward arriving after the end moves the rollout's reward in the
    // period it ended in.
    let (late, attempt) = ran(&mut c, val, &v2, &[0.1], A::Succeeded).await;
    add_span(&mut c, reward_span(&late, &attempt, 0.7, None)).await;

    for (resolution, seconds) in [
        (pb::TimelineResolution::Minute, 60),
        (pb::TimelineResolution::Hour, 3600),
    ] {
        let read = timeline(
            &mut c,
            pb::GetRewardTimelineRequest {
                resolution: resolution as i32,
                ..Default::default()
            },
        )
        .await
        .unwrap();
        assert_eq!(read.resolution, resolution as i32);
        assert_eq!(read.periods, direct_timeline(&mut c, seconds).await);
        let counted: i64 = read.periods.iter().map(|p| p.rollouts).sum();
        assert_eq!(counted, 5, "{resolution:?}");
    }
    // Left to choose, a run shorter than three hours reads by the minute.
    let chosen = timeline(&mut c, pb::GetRewardTimelineRequest::default())
        .await
        .unwrap();
    assert_eq!(chosen.resolution, pb::TimelineResolution::Minute as i32);
    let vals = timeline(
        &mut c,
        pb::GetRewardTimelineRequest {
            mode: val as i32,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(vals.periods.iter().map(|p| p.rollouts).sum::<i64>(), 2);
    assert!(vals.periods.iter().all(|p| p.mode == val as i32));
    assert!(vals.periods.iter().any(|p| p.reward_p90 == Some(0.7)));

    // A window: the periods starting in it.
    let last = chosen.periods.last().unwrap().start.unwrap();
    let after_last = prost_types::Timestamp {
        seconds: last.seconds + 60,
        nanos: 0,
    };
    let from_last = timeline(
        &mut c,
        pb::GetRewardTimelineRequest {
            resolution: pb::TimelineResolution::Minute as i32,
            start_time: Some(last),
            end_time: Some(after_last),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(!from_last.periods.is_empty());
    assert!(from_last.periods.iter().all(|p| p.start == Some(last)));
    let after = timeline(
        &mut c,
        pb::GetRewardTimelineRequest {
            start_time: Some(after_last),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(after.periods, []);

    let backwards = timeline(
        &mut c,
        pb::GetRewardTimelineRequest {
            start_time: Some(after_last),
            end_time: Some(last),
            ..Default::default()
        },
    )
    .await;
    assert_code(
        backwards,
        Code::InvalidArgument,
        "start_time is after end_time",
    );
    let unknown = timeline(
        &mut c,
        pb::GetRewardTimelineRequest {
            resolution: 42,
            ..Default::default()
        },
    )
    .await;
    assert_code(
        unknown,
        Code::InvalidArgument,
        "invalid timeline resolution: 42",
    );
}

/// The ids of a page of rollouts, in order.
fn ids(response: &pb::QueryRolloutsResponse) -> Vec<&str> {
    response
        .rollouts
        .iter()
        .map(|r| r.rollout_id.as_str())
        .collect()
}

async fn rewarded_query(
    client: &mut Client,
    reward_min: Option<f64>,
    reward_max: Option<f64>,
    sort_by: &str,
    descending: bool,
) -> Result<pb::QueryRolloutsResponse, tonic::Status> {
    client
        .query_rollouts(pb::QueryRolloutsRequest {
            reward_min,
            reward_max,
            page: page(sort_by, descending, None, 0),
            ..Default::default()
        })
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn rollouts_filter_and_sort_by_their_final_reward() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let train = pb::RolloutMode::Train;
    let v1 = add_resources(&mut c, PROMPT).await;
    // Negative, fractional and whole rewards; a rollout without one; a
    // running rollout whose reward counts here too (a query reads the
    // final reward of any rollout, ended or not).
    let (low, _) = ran(&mut c, train, &v1, &[-1.5], A::Failed).await;
    let (mid, _) = ran(&mut c, train, &v1, &[2.0, 0.25], A::Succeeded).await;
    let (high, _) = ran(&mut c, train, &v1, &[1.0], A::Succeeded).await;
    let (none, _) = ran(&mut c, train, &v1, &[], A::Succeeded).await;
    let (running, attempt) = claimed(&mut c, train, &v1, spec("{}")).await;
    add_span(&mut c, reward_span(&running, &attempt, 0.5, None)).await;

    let all = rewarded_query(&mut c, None, None, "reward", false)
        .await
        .unwrap();
    assert_eq!(ids(&all), [&none, &low, &mid, &running, &high]);
    // The answer's rewards are the final ones, as the spans say.
    for rollout in &all.rollouts {
        let mut spans = rollout_spans(&mut c, &rollout.rollout_id).await.spans;
        spans.sort_by_key(|span| span.sequence_id.unwrap());
        let expected = spans.iter().rev().find_map(span_reward);
        assert_eq!(
            all.rewards.get(&rollout.rollout_id).copied(),
            expected,
            "{}",
            rollout.rollout_id
        );
    }
    let best_first = rewarded_query(&mut c, None, None, "reward", true)
        .await
        .unwrap();
    assert_eq!(ids(&best_first), [&high, &running, &mid, &low, &none]);

    // Both ends are inclusive; the unrewarded are outside every range.
    let between = rewarded_query(&mut c, Some(0.25), Some(1.0), "reward", false)
        .await
        .unwrap();
    assert_eq!(ids(&between), [&mid, &running, &high]);
    assert_eq!(between.total, 3);
    let below_zero = rewarded_query(&mut c, None, Some(-0.5), "", false)
        .await
        .unwrap();
    assert_eq!(ids(&below_zero), [&low]);
    let above = rewarded_query(&mut c, Some(0.75), None, "", false)
        .await
        .unwrap();
    assert_eq!(ids(&above), [&high]);

    // A later reward moves the rollout in the order and out of a range.
    add_span(&mut c, reward_span(&running, &attempt, -3.0, None)).await;
    let again = rewarded_query(&mut c, None, None, "reward", false)
        .await
        .unwrap();
    assert_eq!(ids(&again), [&none, &running, &low, &mid, &high]);
    let between = rewarded_query(&mut c, Some(0.25), Some(1.0), "", false)
        .await
        .unwrap();
    assert_eq!(ids(&between), [&mid, &high]);

    for (min, max, message) in [
        (Some(1.0), Some(0.0), "reward_min 1 is above reward_max 0"),
        (Some(f64::NAN), None, "reward_min must be a finite number"),
        (
            None,
            Some(f64::INFINITY),
            "reward_max must be a finite number",
        ),
    ] {
        let refused = rewarded_query(&mut c, min, max, "", false).await;
        assert_code(refused, Code::InvalidArgument, message);
    }
}

async fn compare(
    client: &mut Client,
    mode: pb::RolloutMode,
    before: i64,
    after: i64,
    max_tasks: Option<i32>,
) -> Result<pb::CompareVersionsResponse, tonic::Status> {
    client
        .compare_versions(pb::CompareVersionsRequest {
            mode: mode as i32,
            version_before: before,
            version_after: after,
            max_tasks,
            ..Default::default()
        })
        .await
        .map(tonic::Response::into_inner)
}

/// Runs a rollout of `input` with one reward (none for `None`).
async fn task(
    client: &mut Client,
    mode: pb::RolloutMode,
    resources_id: &str,
    input: &str,
    reward: Option<f64>,
) -> String {
    let (rollout_id, attempt_id) = claimed(client, mode, resources_id, spec(input)).await;
    if let Some(reward) = reward {
        add_span(client, reward_span(&rollout_id, &attempt_id, reward, None)).await;
    }
    set_attempt_status(client, &rollout_id, &attempt_id, A::Succeeded)
        .await
        .unwrap();
    rollout_id
}

#[tokio::test]
async fn two_versions_compare_their_distributions_and_the_tasks_that_changed_most() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let (train, val) = (pb::RolloutMode::Train, pb::RolloutMode::Val);
    let v1 = add_resources(&mut c, PROMPT).await;
    let v2 = add_resources(&mut c, PROMPT).await;
    let v3 = add_resources(&mut c, PROMPT).await;
    let (q1, q2, q3) = (r#"{"q": 1}"#, r#"{"q": 2}"#, r#"{"q": 3}"#);
    // Version 1: q1 fails (0 and 0.5: mean 0.25), q2 succeeds (1), q3 0.5.
    task(&mut c, val, &v1, q1, Some(0.0)).await;
    task(&mut c, val, &v1, q1, Some(0.5)).await;
    task(&mut c, val, &v1, q2, Some(1.0)).await;
    task(&mut c, val, &v1, q3, Some(0.5)).await;
    // Version 2: q1 learnt (1), q2 regressed (0; a second run without a
    // reward), q3 unchanged; a train rollout that val does not see.
    let learnt = task(&mut c, val, &v2, q1, Some(1.0)).await;
    task(&mut c, val, &v2, q2, Some(0.0)).await;
    let regressed = task(&mut c, val, &v2, q2, None).await;
    task(&mut c, val, &v2, q3, Some(0.5)).await;
    task(&mut c, train, &v2, q1, Some(0.0)).await;

    let answer = compare(&mut c, val, 1, 2, None).await.unwrap();
    let summaries = summary(&mut c, val, None, None).await.unwrap();
    let before = answer.before.clone().unwrap();
    let after = answer.after.clone().unwrap();
    assert_eq!(before.summary.as_ref(), Some(&summaries[0]));
    assert_eq!(after.summary.as_ref(), Some(&summaries[1]));
    let bins = |d: &pb::VersionDistribution| -> Vec<(f64, i64)> {
        d.bins.iter().map(|b| (b.reward, b.rollouts)).collect()
    };
    assert_eq!(bins(&before), [(0.0, 1), (0.5, 2), (1.0, 1)]);
    assert_eq!(bins(&after), [(0.0, 1), (0.5, 1), (1.0, 1)]);
    let tasks: Vec<(&str, f64)> = answer
        .tasks
        .iter()
        .map(|t| (t.input_json.as_str(), t.change))
        .collect();
    assert_eq!(
        tasks,
        [
            (q2.replace(' ', "").as_str(), -1.0),
            (&q1.replace(' ', ""), 0.75),
            (&q3.replace(' ', ""), 0.0)
        ]
    );
    let q2_after = answer.tasks[0].after.clone().unwrap();
    assert_eq!(
        (q2_after.rollouts, q2_after.rewarded, q2_after.reward_mean),
        (2, 1, 0.0)
    );
    assert_eq!(q2_after.latest_rollout_id, regressed);
    assert_eq!(
        answer.tasks[1].after.as_ref().unwrap().latest_rollout_id,
        learnt
    );
    assert!(!answer.tasks_cut);

    // The limit, a version without rollouts in the mode, unknown versions
    // and a missing mode.
    let first = compare(&mut c, val, 1, 2, Some(1)).await.unwrap();
    assert_eq!(first.tasks.len(), 1);
    let empty = compare(&mut c, val, 1, 3, None).await.unwrap();
    let third = empty.after.unwrap().summary.unwrap();
    assert_eq!(
        (third.resources_id.as_str(), third.version, third.rollouts),
        (v3.as_str(), Some(3), 0)
    );
    assert!(empty.tasks.is_empty());
    assert_code(
        compare(&mut c, val, 1, 4, None).await,
        Code::NotFound,
        "no resources version 4",
    );
    assert_code(
        compare(&mut c, val, 0, 1, None).await,
        Code::NotFound,
        "no resources version 0",
    );
    assert_code(
        compare(&mut c, pb::RolloutMode::Unspecified, 1, 2, None).await,
        Code::InvalidArgument,
        "mode",
    );
    assert_code(
        compare(&mut c, val, 1, 2, Some(-1)).await,
        Code::InvalidArgument,
        "max_tasks",
    );
    assert_code(
        compare(&mut c, val, 1, 2, Some(1001)).await,
        Code::InvalidArgument,
        "max_tasks",
    );
}

#[tokio::test]
async fn durations_count_from_creation_to_end_the_queue_and_retries_included() {
    skip_without!(super::BACKEND);
    // A watchdog that never ticks on its own: no attempt has a timeout.
    let (server, clock) =
        TestServer::start_on_manual_clock(BACKEND, Duration::from_secs(3600)).await;
    let mut c = server.client().await;
    let train = pb::RolloutMode::Train;
    let v1 = add_resources(&mut c, PROMPT).await;
    // 2 s in the queue, 1.5 s running.
    let rollout = enqueue_spec(
        &mut c,
        pb::RolloutSpec {
            mode: train as i32,
            resources_id: Some(v1.clone()),
            ..spec("{}")
        },
    )
    .await;
    clock.advance(Duration::from_secs(2));
    let running = dequeue(&mut c, None).await.unwrap();
    clock.advance(Duration::from_millis(1_500));
    let attempt_id = attempt_of(&running).attempt_id.clone();
    set_attempt_status(&mut c, &rollout.rollout_id, &attempt_id, A::Succeeded)
        .await
        .unwrap();
    // 10 s of a failed attempt, 1 s in the queue again, 4 s of its retry.
    let (retried, first) = claimed(&mut c, train, &v1, retry_spec(2, &[A::Failed])).await;
    clock.advance(Duration::from_secs(10));
    set_attempt_status(&mut c, &retried, &first, A::Failed)
        .await
        .unwrap();
    clock.advance(Duration::from_secs(1));
    let again = dequeue(&mut c, None).await.unwrap();
    clock.advance(Duration::from_secs(4));
    let second = attempt_of(&again).attempt_id.clone();
    set_attempt_status(&mut c, &retried, &second, A::Succeeded)
        .await
        .unwrap();
    // A cancelled rollout is not measured.
    let (cancelled, _) = claimed(&mut c, train, &v1, spec("{}")).await;
    clock.advance(Duration::from_secs(60));
    set_rollout_status(&mut c, &cancelled, R::Cancelled).await;

    let versions = summary(&mut c, pb::RolloutMode::Unspecified, None, None)
        .await
        .unwrap();
    assert_eq!(
        versions[0].duration_seconds,
        Some(pb::Distribution {
            count: 2,
            mean: Some(9.25),
            p10: Some(3.55),
            p50: Some(3.55),
            p90: Some(15.8),
        })
    );
    assert_summaries(&versions, &direct_summary(&mut c, &[(v1, 1)], None).await);
}

/// A model call span of the rollout's attempt lasting `millis`, with the
/// token counts its tracer recorded under `keys` (prompt, response).
fn call_span(
    rollout_id: &str,
    attempt_id: &str,
    millis: i64,
    tokens: Option<(i64, i64)>,
    keys: (&str, &str),
) -> pb::Span {
    let start = prost_types::Timestamp {
        seconds: 1_700_000_000,
        nanos: 0,
    };
    let end = prost_types::Timestamp {
        seconds: start.seconds + millis / 1000,
        nanos: (millis % 1000) as i32 * 1_000_000,
    };
    let attributes = match tokens {
        Some((prompt, response)) => vec![integer(keys.0, prompt), integer(keys.1, response)],
        None => Vec::new(),
    };
    pb::Span {
        attributes,
        start_time: Some(start),
        end_time: Some(end),
        ..span(rollout_id, attempt_id, "openai.chat.completion", None)
    }
}

#[tokio::test]
async fn tokens_and_model_call_latency_count_the_call_spans_of_counted_rollouts() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let train = pb::RolloutMode::Train;
    let v1 = add_resources(&mut c, PROMPT).await;
    let agentops = (
        "gen_ai.usage.prompt_tokens",
        "gen_ai.usage.completion_tokens",
    );
    let semconv = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens");
    // Three calls, one without token counts: 400 prompt and 80 response
    // tokens, 3 s of calls.
    let (busy, attempt) = claimed(&mut c, train, &v1, spec("{}")).await;
    for (millis, tokens) in [
        (1_500, Some((100, 20))),
        (500, Some((300, 60))),
        (1_000, None),
    ] {
        add_span(&mut c, call_span(&busy, &attempt, millis, tokens, agentops)).await;
    }
    // Usage attributes on a span not named like a call are not a call.
    let step = pb::Span {
        attributes: vec![integer(agentops.0, 9_999)],
        ..span(&busy, &attempt, "agent.step", None)
    };
    add_span(&mut c, step).await;
    set_attempt_status(&mut c, &busy, &attempt, A::Succeeded)
        .await
        .unwrap();
    // A call whose span arrives after its rollout ended still counts.
    let (late, attempt) = ran(&mut c, train, &v1, &[], A::Succeeded).await;
    add_span(
        &mut c,
        call_span(&late, &attempt, 200, Some((50, 10)), semconv),
    )
    .await;
    // A cancelled rollout's calls, and a running one's, do not count.
    let (cancelled, attempt) = claimed(&mut c, train, &v1, spec("{}")).await;
    add_span(
        &mut c,
        call_span(&cancelled, &attempt, 9_000, Some((7, 7)), agentops),
    )
    .await;
    set_rollout_status(&mut c, &cancelled, R::Cancelled).await;
    let (running, attempt) = claimed(&mut c, train, &v1, spec("{}")).await;
    add_span(
        &mut c,
        call_span(&running, &attempt, 9_000, Some((7, 7)), agentops),
    )
    .await;

    let versions = summary(&mut c, train, None, None).await.unwrap();
    assert_eq!(versions.len(), 1);
    let v = &versions[0];
    assert_eq!(v.rollouts, 2);
    assert_eq!(
        v.prompt_tokens,
        Some(pb::Distribution {
            count: 2,
            mean: Some(225.0),
            p10: Some(twentieth_of_a_decade(50.0)),
            p50: Some(twentieth_of_a_decade(50.0)),
            p90: Some(twentieth_of_a_decade(400.0)),
        })
    );
    assert_eq!(
        v.response_tokens,
        Some(pb::Distribution {
            count: 2,
            mean: Some(45.0),
            p10: Some(10.0),
            p50: Some(10.0),
            p90: Some(twentieth_of_a_decade(80.0)),
        })
    );
    // Four calls: three at their rollout's mean of 1 s, one of 0.2 s.
    assert_eq!(
        v.model_call_latency_seconds,
        Some(pb::Distribution {
            count: 4,
            mean: Some(0.8),
            p10: Some(0.2),
            p50: Some(1.0),
            p90: Some(1.0),
        })
    );
}
