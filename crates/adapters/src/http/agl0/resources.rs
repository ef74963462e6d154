//! The resources routes. A posted `NamedResources` is validated as
//! upstream's discriminated union (`llm`, `proxy_llm`, `prompt_template`)
//! and stored as pydantic dumps it: defaults filled in, unknown fields
//! dropped, fields in model order.

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use super::super::context::HttpContext;
use super::super::error::HttpResult;
use super::super::extract::{JsonBody, QueryParams};
use super::super::validate::{Loc, Validator};
use super::models::{PageJson, ResourcesJson};
use super::requests::{RESOURCES_FIELDS, ResourcesQuery, Source};
use crate::pyjson::PyJson;
use lightning_store_core::error::StoreError;
use lightning_store_core::ids::ResourcesId;
use lightning_store_core::model::{Json, JsonObject};
use lightning_store_core::query::ResourcesFilter;

const RESOURCE_TYPES: &[&str] = &["llm", "proxy_llm", "prompt_template"];
const ENGINES: &[&str] = &["jinja", "f-string", "poml"];

/// Reads one resource of the union, returning its normalised JSON.
fn read_resource(v: &mut Validator, loc: &Loc, value: &Json) -> Option<Json> {
    let object = v.model(loc, value)?;
    let Some(tag) = object.get("resource_type") else {
        v.issue(
            "union_tag_not_found",
            loc,
            "Unable to extract tag using discriminator 'resource_type'",
            value,
            Some(serde_json::json!({"discriminator": "'resource_type'"})),
        );
        return None;
    };
    let tag = match tag.as_str() {
        Some(tag) if RESOURCE_TYPES.contains(&tag) => tag,
        _ => {
            let shown = tag.as_str().map_or_else(|| tag.to_string(), str::to_owned);
            v.issue(
                "union_tag_invalid",
                loc,
                format!(
                    "Input tag '{shown}' found using 'resource_type' does not match any of the expected tags: 'llm', 'proxy_llm', 'prompt_template'"
                ),
                value,
                Some(serde_json::json!({
                    "discriminator": "'resource_type'",
                    "tag": shown,
                    "expected_tags": "'llm', 'proxy_llm', 'prompt_template'",
                })),
            );
            return None;
        }
    };
    let loc = loc.key(tag);
    let string = |v: &mut Validator, field: &str| {
        v.required(object, &loc, field)
            .and_then(|x| v.string(&loc.key(field), x))
            .map(Json::String)
    };
    let mut out = JsonObject::new();
    out.insert("resource_type".to_owned(), Json::String(tag.to_owned()));
    if tag == "prompt_template" {
        let template = string(v, "template");
        let engine = v
            .required(object, &loc, "engine")
            .and_then(|x| v.literal(&loc.key("engine"), x, ENGINES))
            .map(|engine| Json::String(engine.to_owned()));
        out.insert("template".to_owned(), template?);
        out.insert("engine".to_owned(), engine?);
    } else {
        let endpoint = string(v, "endpoint");
        let model = string(v, "model");
        let api_key = match object.get("api_key") {
            None => Some(None),
            Some(x) => v.opt_string(&loc.key("api_key"), x),
        };
        let sampling = match object.get("sampling_parameters") {
            None => Some(Json::Object(JsonObject::new())),
            Some(x) => v
                .dict(&loc.key("sampling_parameters"), x)
                .map(|p| Json::Object(p.clone())),
        };
        out.insert("endpoint".to_owned(), endpoint?);
        out.insert("model".to_owned(), model?);
        out.insert(
            "api_key".to_owned(),
            api_key?.map_or(Json::Null, Json::String),
        );
        out.insert("sampling_parameters".to_owned(), sampling?);
    }
    Some(Json::Object(out))
}

/// Reads a `NamedResources` body.
fn read_named_resources(json: &Json) -> HttpResult<Json> {
    let mut v = Validator::new();
    let loc = Loc::body();
    let read = v.dict(&loc, json).and_then(|named| {
        let mut out = JsonObject::new();
        let mut ok = true;
        for (name, resource) in named {
            match read_resource(&mut v, &loc.key(name), resource) {
                Some(resource) => {
                    out.insert(name.clone(), resource);
                }
                None => ok = false,
            }
        }
        ok.then_some(Json::Object(out))
    });
    Ok(v.finish(read)?)
}

/// `POST /resources`: 201 and the new snapshot (version 1), now the latest.
pub async fn add(context: HttpContext, body: JsonBody) -> HttpResult<Response> {
    let resources = read_named_resources(&body.required()?)?;
    let update = context.engine.add_resources(resources).await?;
    Ok(PyJson(StatusCode::CREATED, ResourcesJson::from(&update)).into_response())
}

/// `POST /resources/{resources_id}`: replaces (or creates) the snapshot.
pub async fn update(
    context: HttpContext,
    Path(resources_id): Path<String>,
    body: JsonBody,
) -> HttpResult<Response> {
    let resources = read_named_resources(&body.required()?)?;
    let resources_id = ResourcesId::parse("resources_id", resources_id)?;
    let update = context
        .engine
        .update_resources(&resources_id, resources)
        .await?;
    Ok(PyJson(StatusCode::OK, ResourcesJson::from(&update)).into_response())
}

/// `POST /resources/latest`: upstream's router reads it as an update of
/// the snapshot whose id is `latest`.
pub async fn update_latest_named(context: HttpContext, body: JsonBody) -> HttpResult<Response> {
    update(context, Path("latest".to_owned()), body).await
}

/// `GET /resources/{resources_id}`: the snapshot, or `null`.
pub async fn get(context: HttpContext, Path(resources_id): Path<String>) -> HttpResult<Response> {
    let resources_id = ResourcesId::parse("resources_id", resources_id)?;
    match context.engine.get_resources(&resources_id).await {
        Ok(update) => Ok(PyJson(StatusCode::OK, ResourcesJson::from(&update)).into_response()),
        Err(StoreError::NotFound(_)) => Ok(PyJson(StatusCode::OK, Json::Null).into_response()),
        Err(error) => Err(error.into()),
    }
}

/// `GET /resources/latest`: the latest snapshot, or `null`.
pub async fn latest(context: HttpContext) -> HttpResult<Response> {
    let latest = context.engine.latest_resources().await?;
    Ok(PyJson(StatusCode::OK, latest.as_ref().map(ResourcesJson::from)).into_response())
}

/// `GET /resources`: the dashboard's resources list.
pub async fn query(context: HttpContext, params: QueryParams) -> HttpResult<Response> {
    let mut v = Validator::new();
    let read = ResourcesQuery::read(&mut v, &Source::Query(&params));
    let query = v.finish(read)?;
    let page = query.page.to_page(RESOURCES_FIELDS)?;
    let filter = ResourcesFilter {
        resources_id: query.resources_id,
        resources_id_contains: query.resources_id_contains,
    };
    let result = context.engine.query_resources(&filter, &page).await?;
    Ok(PyJson(StatusCode::OK, PageJson::new(&result, ResourcesJson::from)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::error::HttpError;
    use serde_json::json;

    #[test]
    fn named_resources_are_stored_as_pydantic_dumps_them() {
        let posted = json!({
            "main": {"model": "m", "endpoint": "e", "resource_type": "llm", "extra": 1},
            "proxy": {"resource_type": "proxy_llm", "endpoint": "e", "model": "m",
                      "api_key": "k", "sampling_parameters": {"t": 0.5}},
            "prompt": {"resource_type": "prompt_template", "template": "t", "engine": "jinja"},
        });
        let stored = read_named_resources(&posted).unwrap();
        assert_eq!(
            serde_json::to_string(&stored).unwrap(),
            concat!(
                r#"{"main":{"resource_type":"llm","endpoint":"e","model":"m","api_key":null,"sampling_parameters":{}},"#,
                r#""proxy":{"resource_type":"proxy_llm","endpoint":"e","model":"m","api_key":"k","sampling_parameters":{"t":0.5}},"#,
                r#""prompt":{"resource_type":"prompt_template","template":"t","engine":"jinja"}}"#
            )
        );
    }

    #[test]
    fn bad_resources_get_pydantic_union_errors() {
        let posted = json!({"a": {"resource_type": "llm"}, "b": {"endpoint": "x"}, "c": 1});
        let Err(HttpError::Invalid(issues)) = read_named_resources(&posted) else {
            panic!("expected a 422");
        };
        let kinds: Vec<_> = issues.iter().map(|i| i.kind).collect();
        assert_eq!(
            kinds,
            [
                "missing",
                "missing",
                "union_tag_not_found",
                "model_attributes_type"
            ]
        );
        assert_eq!(
            serde_json::to_value(&issues[0].loc).unwrap(),
            json!(["body", "a", "llm", "endpoint"])
        );
    }
}
