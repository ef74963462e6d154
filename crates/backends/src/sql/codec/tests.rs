//! Decoding rows without a database, and the stored layout of spans and
//! events pinned.

use super::*;
use lightning_store_core::model::{
    AttributeValue, ExtraFields, InstrumentationScope, KeyValue, Span, SpanContext, SpanEvent,
    SpanKind, SpanLink, SpanResource, SpanStatus, SpanStatusCode, TraceState,
};

/// A row of text and integer cells, for decoding without a database.
struct Cells(Vec<Option<String>>);

impl Row for Cells {
    fn opt_int(&self, i: usize) -> StoreResult<Option<i64>> {
        Ok(self.0[i].as_ref().map(|v| v.parse().unwrap()))
    }
    fn opt_text(&self, i: usize) -> StoreResult<Option<String>> {
        Ok(self.0[i].clone())
    }
}

fn extra(pairs: &[(&str, Json)]) -> ExtraFields {
    ExtraFields::new(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
    )
}

fn sample_span() -> Span {
    let context = SpanContext {
        trace_id: "Opaque Trace 1".into(),
        span_id: "b7ad6b7169203331".into(),
        is_remote: true,
        trace_state: TraceState(vec![("k".into(), "v".into()), ("a,b".into(), "c=d".into())]),
        extra: extra(&[("ctx", Json::from(1))]),
    };
    let kv = |key: &str, value| KeyValue {
        key: key.into(),
        value,
    };
    Span {
        rollout_id: "ro-1".into(),
        attempt_id: "at-1".into(),
        sequence_id: 7,
        trace_id: context.trace_id.clone(),
        span_id: context.span_id.clone(),
        parent_id: None,
        name: "llm".into(),
        status: SpanStatus {
            code: SpanStatusCode::Error,
            description: Some("boom".into()),
            extra: extra(&[("zz", Json::from("s"))]),
        },
        attributes: vec![
            kv("empty", AttributeValue::Empty),
            kv("s", AttributeValue::String("x".into())),
            kv("b", AttributeValue::Bool(true)),
            kv("i", AttributeValue::Int(i64::MIN)),
            kv("d", AttributeValue::Double(0.1 + 0.2)),
            kv("nan", AttributeValue::Double(f64::NAN)),
            kv("inf", AttributeValue::Double(f64::NEG_INFINITY)),
            kv("bytes", AttributeValue::Bytes(vec![0, 255, 16])),
            kv(
                "array",
                AttributeValue::Array(vec![AttributeValue::Int(1), AttributeValue::Empty]),
            ),
            kv(
                "map",
                AttributeValue::Map(vec![kv("inner", AttributeValue::Double(-0.0))]),
            ),
        ],
        events: vec![SpanEvent {
            name: "e".into(),
            attributes: vec![],
            time: Some(Timestamp(5)),
            extra: extra(&[("ev", Json::Null)]),
        }],
        links: vec![
            SpanLink {
                context: context.clone(),
                attributes: Some(vec![kv("l", AttributeValue::Int(2))]),
                extra: ExtraFields::default(),
            },
            SpanLink {
                context: context.clone(),
                attributes: Some(vec![]),
                extra: extra(&[("lk", serde_json::json!([1, {"x": 2.5}]))]),
            },
            SpanLink {
                context: context.clone(),
                attributes: None,
                extra: ExtraFields::default(),
            },
        ],
        start_time: Some(Timestamp(1)),
        end_time: None,
        context: Some(context),
        parent: None,
        resource: Some(SpanResource {
            attributes: vec![kv("service.name", AttributeValue::String("svc".into()))],
            schema_url: "https://schema".into(),
        }),
        kind: SpanKind::Client,
        scope: Some(InstrumentationScope {
            name: "scope".into(),
            version: "1".into(),
            attributes: vec![],
        }),
        extra: extra(&[("top", serde_json::json!({"b": [1], "a": true}))]),
    }
}

#[test]
fn spans_round_trip_losslessly() {
    let span = sample_span();
    let row = Cells(vec![
        Some(span.rollout_id.clone()),
        Some(span.attempt_id.clone()),
        Some(span.sequence_id.to_string()),
        Some(span.trace_id.clone()),
        Some(span.span_id.clone()),
        None,
        Some(span.name.clone()),
        Some("1".into()),
        None,
        Some(span_body(&span, 0)),
    ]);
    let decoded = super::span(&row).unwrap();
    // NaN never equals itself: compare its bits, then the rest.
    let nan = |s: &Span| match &s.attributes[5].value {
        AttributeValue::Double(d) => d.to_bits(),
        _ => 0,
    };
    assert_eq!(nan(&decoded), nan(&span));
    let mut expected = span.clone();
    let mut actual = decoded;
    expected.attributes.remove(5);
    actual.attributes.remove(5);
    assert_eq!(actual, expected);
    match &actual.attributes[8].value {
        AttributeValue::Map(entries) => match entries[0].value {
            AttributeValue::Double(d) => assert!(d == 0.0 && d.is_sign_negative()),
            _ => panic!("not a double"),
        },
        _ => panic!("not a map"),
    }
}

#[test]
fn only_error_bodies_begin_with_the_error_prefix() {
    let mut span = sample_span();
    for (code, error) in [
        (SpanStatusCode::Error, true),
        (SpanStatusCode::Ok, false),
        (SpanStatusCode::Unset, false),
    ] {
        span.status.code = code;
        let body = span_body(&span, 0);
        assert_eq!(body.starts_with(ERROR_BODY_PREFIX), error, "{body}");
    }
}

#[test]
fn legacy_span_bodies_still_decode() {
    // Written before trace states kept entries and links kept the
    // absence of attributes.
    let body = r#"{"status":{"code":"ok"},"attributes":[],"links":[{"context":{"trace_id":"t","span_id":"s","is_remote":false,"trace_state":"a=1,b=2"},"attributes":[]}],"kind":"internal"}"#;
    let row = Cells(vec![
        Some("ro".into()),
        Some("at".into()),
        Some("1".into()),
        Some("t".into()),
        Some("s".into()),
        None,
        Some("n".into()),
        None,
        None,
        Some(body.into()),
    ]);
    let span = super::span(&row).unwrap();
    assert_eq!(span.links[0].context.trace_state.to_header(), "a=1,b=2");
    assert_eq!(span.links[0].attributes, Some(vec![]));
    assert!(span.extra.is_empty());
}

#[test]
fn every_change_round_trips() {
    let changes = [
        Change::RolloutCreated {
            rollout_id: "r".into(),
            status: RolloutStatus::Queuing,
        },
        Change::AttemptCreated {
            rollout_id: "r".into(),
            attempt_id: "a".into(),
            sequence_id: 2,
            worker_id: None,
        },
        Change::WorkerChanged {
            worker_id: "w".into(),
            status: WorkerStatus::Busy,
        },
        Change::RolloutDeleted {
            rollout_id: "r".into(),
        },
        Change::GatewayChanged {
            paused: true,
            generation: 4,
        },
        Change::ModelsChanged,
    ];
    for change in changes {
        let row = Cells(vec![
            Some("3".into()),
            Some("9".into()),
            Some(change_text(&change)),
        ]);
        let event = event(&row).unwrap();
        assert_eq!(
            (event.seq, event.time, event.change),
            (3, Timestamp(9), change)
        );
    }
}
