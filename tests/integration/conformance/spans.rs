//! Spans: sequence ids (`docs/semantics.md#sequence-ids`), duplicates, atomic batches,
//! lossless attributes and span queries.

use lightning_store::proto as pb;
use pb::attribute_value::Value;
use tonic::Code;

use super::BACKEND;
use super::TestServer;
use crate::conformance::support::*;

async fn running_rollout(c: &mut Client) -> (String, String) {
    let rollout = enqueue(c, "{}").await;
    let claimed = dequeue(c, None).await.unwrap();
    assert_eq!(claimed.rollout_id, rollout.rollout_id);
    (rollout.rollout_id, attempt_of(&claimed).attempt_id.clone())
}

async fn next_id(c: &mut Client, rollout_id: &str, attempt_id: &str) -> Result<i64, tonic::Status> {
    c.get_next_span_sequence_id(pb::GetNextSpanSequenceIdRequest {
        rollout_id: rollout_id.into(),
        attempt_id: attempt_id.into(),
        ..Default::default()
    })
    .await
    .map(|r| r.into_inner().sequence_id)
}

#[tokio::test]
async fn sequence_ids_are_per_rollout_and_raised_by_explicit_ids() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let (a, a1) = running_rollout(&mut c).await;
    let (b, b1) = running_rollout(&mut c).await;
    assert_eq!(next_id(&mut c, &a, &a1).await.unwrap(), 1);
    assert_eq!(next_id(&mut c, &a, &a1).await.unwrap(), 2);
    assert_eq!(next_id(&mut c, &b, &b1).await.unwrap(), 1, "per rollout");

    let stored = add_span(&mut c, span(&a, &a1, "explicit", Some(100)))
        .await
        .unwrap();
    assert_eq!(stored.sequence_id, Some(100));
    assert_eq!(next_id(&mut c, &a, &a1).await.unwrap(), 101, "chmax");
    add_span(&mut c, span(&a, &a1, "lower", Some(5)))
        .await
        .unwrap();
    assert_eq!(
        next_id(&mut c, &a, &a1).await.unwrap(),
        102,
        "never lowered"
    );

    assert_code(
        next_id(&mut c, "ro-000000000000", "at-00000000").await,
        Code::NotFound,
        "not found",
    );
    assert_code(
        next_id(&mut c, &a, "at-00000000").await,
        Code::NotFound,
        "Attempt at-00000000 not found",
    );
}

#[tokio::test]
async fn sequence_ids_for_unknown_ids_when_allowed() {
    skip_without!(super::BACKEND);
    // agent-lightning's stores never look the pair up: the counter belongs to
    // the rollout id, so `latest`, an unknown attempt and an unknown rollout
    // all get a value.
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let (a, a1) = running_rollout(&mut c).await;
    let mut unchecked = async |rollout_id: &str, attempt_id: &str| {
        c.get_next_span_sequence_id(pb::GetNextSpanSequenceIdRequest {
            rollout_id: rollout_id.into(),
            attempt_id: attempt_id.into(),
            allow_unknown: true,
        })
        .await
        .map(|r| r.into_inner().sequence_id)
        .unwrap()
    };
    assert_eq!(unchecked(&a, &a1).await, 1);
    assert_eq!(unchecked(&a, "latest").await, 2);
    assert_eq!(unchecked(&a, "at-00000000").await, 3);
    assert_eq!(unchecked("ro-000000000000", "at-00000000").await, 1);

    let pair = |r: &str, at: &str| pb::RolloutAttemptRef {
        rollout_id: r.into(),
        attempt_id: at.into(),
    };
    let ids = c
        .get_span_sequence_ids(pb::GetSpanSequenceIdsRequest {
            attempts: vec![
                pair(&a, "latest"),
                pair("ro-000000000000", "x"),
                pair(&a, &a1),
            ],
            allow_unknown: true,
        })
        .await
        .unwrap()
        .into_inner()
        .sequence_ids;
    assert_eq!(ids, [4, 2, 5]);

    // Without it, the pairs are still looked up.
    let refused = c
        .get_span_sequence_ids(pb::GetSpanSequenceIdsRequest {
            attempts: vec![pair(&a, "latest")],
            allow_unknown: false,
        })
        .await;
    assert_code(refused, Code::NotFound, "Attempt latest not found");
    assert_eq!(
        next_id(&mut c, &a, &a1).await.unwrap(),
        6,
        "a refused call allocates nothing"
    );
}

#[tokio::test]
async fn batch_sequence_ids_are_consecutive_per_rollout_in_request_order() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let (a, a1) = running_rollout(&mut c).await;
    let a2 = start_attempt(&mut c, &a).await;
    let (b, b1) = running_rollout(&mut c).await;
    let pair = |r: &str, at: &str| pb::RolloutAttemptRef {
        rollout_id: r.into(),
        attempt_id: at.into(),
    };
    let ids = c
        .get_span_sequence_ids(pb::GetSpanSequenceIdsRequest {
            attempts: vec![pair(&a, &a1), pair(&b, &b1), pair(&a, &a2), pair(&a, &a1)],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .sequence_ids;
    assert_eq!(ids, [1, 1, 2, 3]);
}

#[tokio::test]
async fn add_spans_allocates_missing_ids_in_order_then_applies_explicit_ones() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let (r, at) = running_rollout(&mut c).await;
    let response = c
        .add_spans(pb::AddSpansRequest {
            spans: vec![
                span(&r, &at, "s1", None),
                span(&r, &at, "s2", Some(50)),
                span(&r, &at, "s3", None),
            ],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let ids: Vec<_> = response
        .spans
        .iter()
        .map(|s| s.sequence_id.unwrap())
        .collect();
    assert_eq!(ids, [1, 50, 2]);
    assert_eq!(response.duplicates, 0);
    assert_eq!(next_id(&mut c, &r, &at).await.unwrap(), 51);
}

#[tokio::test]
async fn duplicates_are_ignored_and_batches_are_atomic() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let (r, at) = running_rollout(&mut c).await;
    let original = span(&r, &at, "once", None);
    assert!(add_span(&mut c, original.clone()).await.is_some());
    assert!(
        add_span(&mut c, original.clone()).await.is_none(),
        "duplicate"
    );
    let batch = c
        .add_spans(pb::AddSpansRequest {
            spans: vec![original.clone(), span(&r, &at, "new", None)],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(batch.duplicates, 1);
    assert_eq!(batch.spans.len(), 1);
    assert_eq!(stats(&mut c).await.total_spans, 2);

    // One bad span rejects the whole batch.
    let result = c
        .add_spans(pb::AddSpansRequest {
            spans: vec![
                span(&r, &at, "good", None),
                span(&r, "at-00000000", "bad", None),
            ],
            ..Default::default()
        })
        .await;
    assert_code(
        result,
        Code::NotFound,
        &format!("Attempt at-00000000 not found for rollout {r}"),
    );
    assert_eq!(stats(&mut c).await.total_spans, 2, "nothing stored");
}

#[tokio::test]
async fn a_key_repeated_in_one_batch_is_stored_by_its_first_occurrence() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let (r, at) = running_rollout(&mut c).await;
    let first = span(&r, &at, "first", None);
    let mut repeat = first.clone();
    repeat.name = "repeat".into();
    let batch = c
        .add_spans(pb::AddSpansRequest {
            spans: vec![first, span(&r, &at, "other", None), repeat],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(batch.duplicates, 1);
    let names: Vec<&str> = batch.spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["first", "other"]);
    assert_eq!(batch.sequence_ids, [1, 2]);
    assert_eq!(stats(&mut c).await.total_spans, 2);
}

#[tokio::test]
async fn stored_and_repeated_keys_in_one_batch_are_skipped_and_the_rest_kept_in_order() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let (r, at) = running_rollout(&mut c).await;
    let stored = span(&r, &at, "stored", None);
    assert!(add_span(&mut c, stored.clone()).await.is_some());
    let again = |of: &pb::Span, name: &str| pb::Span {
        name: name.into(),
        ..of.clone()
    };
    let b = span(&r, &at, "b", None);
    let batch = vec![
        again(&stored, "stored again"),
        b.clone(),
        again(&stored, "stored a third time"),
        span(&r, &at, "c", None),
        again(&b, "b again"),
        span(&r, &at, "d", None),
    ];
    let added = c
        .add_spans(pb::AddSpansRequest {
            spans: batch,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(added.duplicates, 3);
    let names: Vec<&str> = added.spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["b", "c", "d"]);
    // A batch of stored keys only stores nothing.
    let none = c
        .add_spans(pb::AddSpansRequest {
            spans: vec![again(&b, "b once more"), again(&stored, "stored once more")],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((none.spans.len(), none.duplicates), (0, 2));
    let read = rollout_spans(&mut c, r).await;
    let names: Vec<&str> = read.spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["stored", "b", "c", "d"]);
    assert_eq!(stats(&mut c).await.total_spans, 4);
}

#[tokio::test]
async fn concurrent_batches_of_the_same_keys_store_each_key_once() {
    skip_without!(super::BACKEND);
    const CLIENTS: usize = 8;
    const SHARED: usize = 64;
    const OWN: usize = 8;
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let (r, at) = running_rollout(&mut c).await;
    let shared: Vec<pb::Span> = (0..SHARED)
        .map(|i| span(&r, &at, &format!("shared {i}"), None))
        .collect();
    let mut calls = Vec::new();
    for client in 0..CLIENTS {
        // Each client sends the shared keys from its own starting point, and
        // keys of its own.
        let mut spans = shared.clone();
        spans.rotate_left(client * SHARED / CLIENTS);
        spans.extend((0..OWN).map(|i| span(&r, &at, &format!("own {client} {i}"), None)));
        let mut c = server.client().await;
        calls.push(tokio::spawn(async move {
            c.add_spans(pb::AddSpansRequest {
                spans,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
        }));
    }
    let (mut stored, mut duplicates) = (Vec::new(), 0);
    for call in calls {
        let added = call.await.unwrap();
        duplicates += added.duplicates;
        stored.extend(added.spans.into_iter().map(|s| s.name));
    }
    stored.sort_unstable();
    let mut expected: Vec<String> = (0..SHARED).map(|i| format!("shared {i}")).collect();
    for client in 0..CLIENTS {
        expected.extend((0..OWN).map(|i| format!("own {client} {i}")));
    }
    expected.sort_unstable();
    assert_eq!(stored, expected, "each key stored by exactly one call");
    assert_eq!(duplicates as usize, (CLIENTS - 1) * SHARED);
    let read = rollout_spans(&mut c, r).await;
    let mut names: Vec<String> = read.spans.into_iter().map(|s| s.name).collect();
    names.sort_unstable();
    assert_eq!(names, expected);
    assert_eq!(
        stats(&mut c).await.total_spans as usize,
        SHARED + CLIENTS * OWN
    );
}

fn v(value: Value) -> Option<pb::AttributeValue> {
    Some(pb::AttributeValue { value: Some(value) })
}

fn kv(key: &str, value: Value) -> pb::KeyValue {
    pb::KeyValue {
        key: key.into(),
        value: v(value),
    }
}

#[tokio::test]
async fn every_span_field_round_trips_losslessly() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let (r, at) = running_rollout(&mut c).await;
    // Ids are opaque text (upstream accepts any string); the trace state
    // keeps entries a W3C header could not carry.
    let entry = |key: &str, value: &str| pb::TraceStateEntry {
        key: key.into(),
        value: value.into(),
    };
    let context = pb::SpanContext {
        trace_id: "Trace 0AF7651916CD43DD".into(),
        span_id: "b7ad6b7169203331".into(),
        is_remote: true,
        trace_state: "vendor=value,a,b=c=d".into(),
        trace_state_entries: vec![entry("vendor", "value"), entry("a,b", "c=d")],
        extra_json: r#"{"ctx":{"n":1}}"#.into(),
    };
    let attributes = vec![
        kv("s", Value::StringValue("text".into())),
        kv("i", Value::IntValue(9_007_199_254_740_993)),
        kv("d", Value::DoubleValue(0.1)),
        kv("b", Value::BoolValue(true)),
        kv("bytes", Value::BytesValue(vec![0, 255, 7])),
        kv(
            "arr",
            Value::ArrayValue(pb::ArrayValue {
                values: vec![
                    v(Value::IntValue(1)).unwrap(),
                    v(Value::StringValue("x".into())).unwrap(),
                ],
            }),
        ),
        kv(
            "map",
            Value::KvlistValue(pb::KeyValueList {
                values: vec![kv("nested", Value::BoolValue(false))],
            }),
        ),
        pb::KeyValue {
            key: "empty".into(),
            value: Some(pb::AttributeValue { value: None }),
        },
    ];
    let time = |seconds| {
        Some(prost_types::Timestamp {
            seconds,
            nanos: 123_456_789,
        })
    };
    let sent = pb::Span {
        rollout_id: r.clone(),
        attempt_id: at.clone(),
        sequence_id: Some(7),
        trace_id: context.trace_id.clone(),
        span_id: context.span_id.clone(),
        parent_id: Some("00f067aa0ba902b7".into()),
        name: "openai.chat.completion".into(),
        status: Some(pb::SpanStatus {
            code: pb::SpanStatusCode::Error as i32,
            description: Some("boom".into()),
            extra_json: r#"{"zz":1}"#.into(),
        }),
        attributes: attributes.clone(),
        events: vec![pb::SpanEvent {
            name: "ev".into(),
            attributes: attributes.clone(),
            time: time(5),
            extra_json: r#"{"ev":null}"#.into(),
        }],
        links: vec![
            pb::SpanLink {
                context: Some(context.clone()),
                attributes: attributes.clone(),
                has_attributes: true,
                extra_json: String::new(),
            },
            // An empty attribute map differs from none at all.
            pb::SpanLink {
                context: Some(context.clone()),
                attributes: vec![],
                has_attributes: true,
                extra_json: r#"{"l":[1,2.5]}"#.into(),
            },
            pb::SpanLink {
                context: Some(context.clone()),
                attributes: vec![],
                has_attributes: false,
                extra_json: String::new(),
            },
        ],
        start_time: time(1),
        end_time: time(2),
        context: Some(context.clone()),
        parent: Some(pb::SpanContext {
            span_id: "00f067aa0ba902b7".into(),
            ..context.clone()
        }),
        resource: Some(pb::SpanResource {
            attributes: attributes.clone(),
            schema_url: "https://schema".into(),
        }),
        kind: pb::SpanKind::Client as i32,
        scope: Some(pb::InstrumentationScope {
            name: "lib".into(),
            version: "1.2".into(),
            attributes,
        }),
        extra_json: r#"{"top":{"b":[1],"a":true},"second":"x"}"#.into(),
    };
    let stored = add_span(&mut c, sent.clone()).await.unwrap();
    assert_eq!(stored, sent);
    let read = rollout_spans(&mut c, r).await;
    assert_eq!(read.spans, vec![sent]);
}

#[tokio::test]
async fn span_queries_filter_select_attempts_sort_and_paginate() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let (r, first) = running_rollout(&mut c).await;
    let mut on_first = span(&r, &first, "agent.step", None);
    on_first.trace_id = "11111111111111111111111111111111".into();
    add_span(&mut c, on_first.clone()).await.unwrap();
    let second = start_attempt(&mut c, &r).await;
    for name in ["llm.call", "agent.reward", "llm.call"] {
        add_span(&mut c, span(&r, &second, name, None))
            .await
            .unwrap();
    }
    let q = |f: fn(&mut pb::QuerySpansRequest)| {
        let mut request = pb::QuerySpansRequest {
            rollout_id: r.clone(),
            ..Default::default()
        };
        f(&mut request);
        request
    };
    let names = |resp: &pb::QuerySpansResponse| {
        resp.spans
            .iter()
            .map(|s| s.name.clone())
            .collect::<Vec<_>>()
    };

    let all = query_spans(&mut c, q(|_| {})).await;
    assert_eq!(all.total, 4);
    assert_eq!(
        all.spans
            .iter()
            .map(|s| s.sequence_id.unwrap())
            .collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );

    let mut latest = q(|_| {});
    latest.attempt_id = Some("latest".into());
    assert_eq!(
        names(&query_spans(&mut c, latest).await),
        ["llm.call", "agent.reward", "llm.call"]
    );
    let mut by_id = q(|_| {});
    by_id.attempt_id = Some(first.clone());
    assert_eq!(names(&query_spans(&mut c, by_id).await), ["agent.step"]);

    let contains = q(|q| q.name_contains = Some("llm".into()));
    assert_eq!(query_spans(&mut c, contains).await.total, 2);
    let or = q(|q| {
        q.name = Some("agent.reward".into());
        q.trace_id = Some("11111111111111111111111111111111".into());
        q.filter_logic = pb::FilterLogic::Or as i32;
    });
    assert_eq!(
        names(&query_spans(&mut c, or).await),
        ["agent.step", "agent.reward"]
    );
    let and = q(|q| {
        q.name = Some("agent.reward".into());
        q.trace_id = Some("11111111111111111111111111111111".into());
    });
    assert_eq!(query_spans(&mut c, and).await.total, 0);
    let empty_or = q(|q| q.filter_logic = pb::FilterLogic::Or as i32);
    assert_eq!(
        query_spans(&mut c, empty_or).await.total,
        0,
        "an OR of nothing matches nothing"
    );

    let sorted = q(|q| q.page = page("name", true, Some(2), 1));
    let result = query_spans(&mut c, sorted).await;
    assert_eq!(names(&result), ["llm.call", "agent.step"]);
    assert_eq!((result.limit, result.offset, result.total), (2, 1, 4));

    assert_code(
        c.query_spans(q(|q| q.page = page("nope", false, None, 0)))
            .await,
        Code::InvalidArgument,
        "Invalid sort_by: nope, allowed fields are: rollout_id, attempt_id, sequence_id",
    );
    assert_code(
        c.query_spans(pb::QuerySpansRequest {
            rollout_id: "ro-000000000000".into(),
            ..Default::default()
        })
        .await,
        Code::NotFound,
        "Rollout ro-000000000000 not found",
    );
}

#[tokio::test]
async fn latest_attempt_of_a_rollout_without_attempts_has_no_spans() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let rollout = enqueue(&mut c, "1").await;
    let result = query_spans(
        &mut c,
        pb::QuerySpansRequest {
            rollout_id: rollout.rollout_id,
            attempt_id: Some("latest".into()),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(result.total, 0);
}
