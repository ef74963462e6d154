//! The event routes (append with an optional `Idempotency-Key`, query as
//! raw or triplets) and the model registry.

use std::borrow::Cow;

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde_json::value::RawValue;

use super::answer::raw_answer;
use super::{render, schema};
use crate::http::context::HttpContext;
use crate::http::error::HttpResult;
use crate::http::extract::{self, JsonBody, QueryParams, RawBody, is_json, json_body};
use crate::http::validate::{Loc, Validator};
use crate::pyjson::PyJson;
use lightning_store_core::agl1::events::{EventFormat, EventQuery, MODEL_REQUEST, ROUTED_EXPERTS};
use lightning_store_core::agl1::{IdempotencyKey, NewAgl1Event};
use lightning_store_core::ids::{AttemptId, RolloutId};
use lightning_store_core::model::Json;

/// Reads an `EventCreate` keeping `data` as the text the client sent (an
/// event is large and passed through): `event_type` must be a string and
/// `data`, when given, an object.
fn event_create(headers: &HeaderMap, bytes: &[u8]) -> HttpResult<(String, String)> {
    // One pass: the top-level fields, their values left as raw JSON text.
    type Fields<'a> = std::collections::HashMap<Cow<'a, str>, &'a RawValue>;
    let parsed = std::str::from_utf8(bytes)
        .ok()
        .filter(|_| is_json(headers))
        .and_then(|text| serde_json::from_str::<Fields>(text).ok());
    let Some(fields) = parsed else {
        // Anything else is read like any body, for its 422.
        let body = JsonBody(json_body(headers, bytes)?).required()?;
        let mut v = Validator::new();
        v.model(&Loc::body(), &body);
        // Not an object (or not JSON): `finish` reports why.
        return Ok(v.finish(None)?);
    };
    let mut v = Validator::new();
    let event_type = match fields.get("event_type") {
        Some(raw) => {
            let value: Json = serde_json::from_str(raw.get()).expect("raw JSON parses");
            v.string(&Loc::body().key("event_type"), &value)
        }
        None => {
            let object: Json = serde_json::from_slice(bytes).expect("the body parsed above");
            v.issue(
                "missing",
                &Loc::body().key("event_type"),
                "Field required",
                &object,
                None,
            );
            None
        }
    };
    let data = match fields.get("data") {
        None => Some("{}".to_owned()),
        Some(raw) if raw.get().trim_start().starts_with('{') => Some(raw.get().to_owned()),
        Some(raw) => {
            let value: Json = serde_json::from_str(raw.get()).expect("raw JSON parses");
            v.issue(
                "dict_type",
                &Loc::body().key("data"),
                "Input should be a valid dictionary",
                &value,
                None,
            );
            None
        }
    };
    Ok(v.finish(event_type.zip(data))?)
}

/// Returns whether an event's data (a JSON object's text) may hold a
/// non-null `routed_experts`, without parsing it: some occurrence of the
/// key is followed by a value other than `null`. A nested occurrence may
/// answer yes (the rule then reads the data); a top-level one is never missed.
fn may_have_routed_experts(data: &str) -> bool {
    let key = format!("\"{ROUTED_EXPERTS}\"");
    data.match_indices(&key).any(|(at, _)| {
        let rest = data[at + key.len()..].trim_start();
        rest.strip_prefix(':')
            .is_some_and(|value| !value.trim_start().starts_with("null"))
    })
}

pub(super) async fn post(
    context: HttpContext,
    Path((rollout_id, attempt_id)): Path<(String, String)>,
    extract::IdempotencyKey(key): extract::IdempotencyKey,
    headers: HeaderMap,
    RawBody(bytes): RawBody,
) -> HttpResult<Response> {
    let (event_type, data) = event_create(&headers, &bytes)?;
    let idempotency =
        key.map(|key| IdempotencyKey::of(&key, &[event_type.as_bytes(), data.as_bytes()]));
    let has_routed_experts = event_type == MODEL_REQUEST && may_have_routed_experts(&data);
    let new = NewAgl1Event {
        event_type,
        data,
        has_routed_experts,
        model_version: None,
        call: None,
        idempotency,
    };
    let rollout_id = RolloutId::parse("rollout_id", rollout_id)?;
    let attempt_id = AttemptId::parse("attempt_id", attempt_id)?;
    let event = context
        .engine
        .append_agl1_event(&rollout_id, &attempt_id, new)
        .await?;
    Ok(raw_answer(StatusCode::OK, render::event(&event)))
}

pub(super) async fn query(
    context: HttpContext,
    Path(rollout_id): Path<String>,
    params: QueryParams,
) -> HttpResult<Response> {
    let mut v = Validator::new();
    let include = params.read(&mut v, "include_routed_experts", true, |v, loc, value| {
        v.boolean(loc, value)
    });
    let include_routed_experts = v.finish(include)?;
    let query = EventQuery {
        event_type: params.value("event_type").map(str::to_owned),
        format: match params.value("format") {
            Some("triplet") => EventFormat::Triplet,
            _ => EventFormat::Raw,
        },
        include_routed_experts,
    };
    let rollout_id = RolloutId::parse("rollout_id", rollout_id)?;
    let events = context.engine.agl1_events(&rollout_id, &query).await?;
    Ok(raw_answer(StatusCode::OK, render::events(&events)))
}

pub(super) async fn register_models(context: HttpContext, body: JsonBody) -> HttpResult<Response> {
    let body = body.required()?;
    context.check_batch("models", Some(&body))?;
    let mut v = Validator::new();
    let models = v.each(&Loc::body(), &body, schema::model);
    let models = v.finish(models)?;
    let registered = context.engine.register_models(models).await?;
    context.gateway.models_changed();
    #[derive(serde::Serialize)]
    struct ModelBody<'a> {
        model: &'a str,
        endpoint: &'a str,
        version: i64,
    }
    let bodies: Vec<ModelBody> = registered
        .iter()
        .map(|m| ModelBody {
            model: &m.model,
            endpoint: &m.endpoint,
            version: m.version,
        })
        .collect();
    Ok(PyJson(StatusCode::CREATED, bodies).into_response())
}

pub(super) async fn delete_models(context: HttpContext) -> HttpResult<Response> {
    context.engine.delete_models().await?;
    context.gateway.models_changed();
    Ok(PyJson(StatusCode::OK, serde_json::json!({"status": "ok"})).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::error::HttpError;
    use http::{HeaderValue, header};

    fn json_headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers
    }

    #[test]
    fn event_data_passes_through_as_sent() {
        let body = br#"{"data": {"value": 1.0e0, "x": [1,2]}, "event_type": "reward"}"#;
        let (event_type, data) = event_create(&json_headers(), body).unwrap();
        assert_eq!(event_type, "reward");
        assert_eq!(data, r#"{"value": 1.0e0, "x": [1,2]}"#);
        let (_, data) = event_create(&json_headers(), br#"{"event_type": "x"}"#).unwrap();
        assert_eq!(data, "{}");
    }

    #[test]
    fn bad_events_get_pydantic_reports() {
        let error =
            event_create(&json_headers(), br#"{"event_type": 5, "data": [1]}"#).unwrap_err();
        let HttpError::Invalid(issues) = error else {
            panic!("expected a 422")
        };
        assert_eq!(
            serde_json::to_value(issues).unwrap(),
            serde_json::json!([
                {"type": "string_type", "loc": ["body", "event_type"], "msg": "Input should be a valid string", "input": 5},
                {"type": "dict_type", "loc": ["body", "data"], "msg": "Input should be a valid dictionary", "input": [1]},
            ])
        );
        let error = event_create(&json_headers(), b"[]").unwrap_err();
        let HttpError::Invalid(issues) = error else {
            panic!("expected a 422")
        };
        assert_eq!(issues[0].kind, "model_attributes_type");
    }

    #[test]
    fn routing_tensors_are_never_missed() {
        assert!(may_have_routed_experts(
            r#"{"routed_experts" : [[1]], "x": 1}"#
        ));
        assert!(!may_have_routed_experts(
            r#"{"routed_experts": null, "x": 1}"#
        ));
        assert!(!may_have_routed_experts(r#"{"x": 1}"#));
        let nested = r#"{"response": {"routed_experts": null}, "routed_experts": [2]}"#;
        assert!(
            may_have_routed_experts(nested),
            "every occurrence is looked at"
        );
    }
}
