//! The span routes: add, query and sequence ids.

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};

use super::super::HttpContext;
use super::super::error::HttpResult;
use super::super::json::PyJson;
use super::super::validate::{Loc, Validator};
use super::models::PageJson;
use super::requests::{SPAN_FIELDS, Source, SpanQuery};
use super::span_json::{SpanJson, read_span};
use super::{query_pairs, required_body_json, search_body};
use crate::core::error::StoreError;
use crate::core::ids;
use crate::core::model::Json;
use crate::core::query::{AttemptSelector, SpanFilter, TextMatch};

/// `POST /spans`: 201 and the stored span, or `null` for a duplicate.
pub async fn add(
    State(context): State<HttpContext>,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let json = required_body_json(&context, &headers, body).await?;
    let mut v = Validator::new();
    let read = read_span(&mut v, &Loc::body(), &json);
    let span = v.finish(read)?;
    let added = context.engine.add_spans(vec![span], None).await?;
    let body = added.spans.first().map(|span| SpanJson(span));
    Ok(PyJson(StatusCode::CREATED, body).into_response())
}

/// Runs a span query; an unknown rollout has an empty page, as upstream.
async fn run_query(
    context: &HttpContext,
    source: Source<'_>,
    whole: &Json,
) -> HttpResult<Response> {
    let mut v = Validator::new();
    let read = SpanQuery::read(&mut v, &source, whole);
    let query = v.finish(read)?;
    let page = query.page.to_page(SPAN_FIELDS)?;
    let [trace_id, span_id, parent_id, name] = query
        .text
        .map(|(exact, contains)| TextMatch { exact, contains });
    let filter = SpanFilter {
        rollout_id: query.rollout_id,
        attempt: match query.attempt_id.as_deref() {
            None => AttemptSelector::All,
            Some(ids::LATEST) => AttemptSelector::Latest,
            Some(attempt_id) => AttemptSelector::Id(attempt_id.to_owned()),
        },
        trace_id,
        span_id,
        parent_id,
        name,
        logic: query.logic,
    };
    match context.engine.query_spans(filter, &page).await {
        Ok(result) => {
            let json = PageJson::new(&result, |span| SpanJson(span));
            Ok(PyJson(StatusCode::OK, json).into_response())
        }
        Err(StoreError::NotFound(_)) => {
            let json = PageJson::<SpanJson>::empty(page.limit, page.offset);
            Ok(PyJson(StatusCode::OK, json).into_response())
        }
        Err(error) => Err(error.into()),
    }
}

/// `GET /spans`: the dashboard's span list.
pub async fn query(
    State(context): State<HttpContext>,
    RawQuery(query): RawQuery,
) -> HttpResult<Response> {
    let pairs = query_pairs(query.as_deref());
    let whole = Json::Object(
        pairs
            .iter()
            .map(|(k, v)| (k.clone(), Json::String(v.clone())))
            .collect(),
    );
    run_query(&context, Source::Query(&pairs), &whole).await
}

/// `POST /spans/search`: what `LightningStoreClient.query_spans` calls.
pub async fn search(
    State(context): State<HttpContext>,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let object = search_body(&context, &headers, body).await?;
    let whole = Json::Object(object.clone());
    run_query(&context, Source::Body(&object), &whole).await
}

/// `POST /spans/next`: `{"sequence_id": n}`, the rollout's next sequence id.
/// As upstream, the pair is not looked up: an unknown rollout just gets a
/// counter.
pub async fn next_sequence_id(
    State(context): State<HttpContext>,
    headers: HeaderMap,
    body: Body,
) -> HttpResult<Response> {
    let json = required_body_json(&context, &headers, body).await?;
    let mut v = Validator::new();
    let loc = Loc::body();
    let read = v.model(&loc, &json).and_then(|object| {
        let rollout_id = v
            .required(object, &loc, "rollout_id")
            .and_then(|x| v.string(&loc.key("rollout_id"), x));
        let attempt_id = v
            .required(object, &loc, "attempt_id")
            .and_then(|x| v.string(&loc.key("attempt_id"), x));
        Some((rollout_id?, attempt_id?))
    });
    let pair = v.finish(read)?;
    let ids = context.engine.next_sequence_ids_unchecked(&[pair]).await?;
    Ok(PyJson(StatusCode::OK, serde_json::json!({"sequence_id": ids[0]})).into_response())
}
