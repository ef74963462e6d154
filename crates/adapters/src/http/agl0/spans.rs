//! The span routes: add, query and sequence ids.

use axum::response::{IntoResponse, Response};
use http::StatusCode;

use super::super::context::HttpContext;
use super::super::error::HttpResult;
use super::super::extract::{JsonBody, QueryParams};
use super::super::validate::{Loc, Validator};
use super::models::PageJson;
use super::requests::{SPAN_FIELDS, Source, SpanQuery};
use super::span_json::{SpanJson, read_span};
use crate::pyjson::PyJson;
use lightning_store_core::error::StoreError;
use lightning_store_core::ids::{self, AttemptId, RolloutId};
use lightning_store_core::model::Json;
use lightning_store_core::query::{AttemptSelector, SpanFilter, TextMatch};

/// `POST /spans`: 201 and the stored span, or `null` for a duplicate.
pub async fn add(context: HttpContext, body: JsonBody) -> HttpResult<Response> {
    let json = body.required()?;
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
pub async fn query(context: HttpContext, params: QueryParams) -> HttpResult<Response> {
    run_query(&context, Source::Query(&params), &params.to_object()).await
}

/// `POST /spans/search`: what `LightningStoreClient.query_spans` calls.
pub async fn search(context: HttpContext, body: JsonBody) -> HttpResult<Response> {
    let object = body.object()?;
    let whole = Json::Object(object.clone());
    run_query(&context, Source::Body(&object), &whole).await
}

/// `POST /spans/next`: `{"sequence_id": n}`, the rollout's next sequence id.
/// As upstream, the pair is not looked up: an unknown rollout just gets a
/// counter.
pub async fn next_sequence_id(context: HttpContext, body: JsonBody) -> HttpResult<Response> {
    let json = body.required()?;
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
    let (rollout_id, attempt_id) = v.finish(read)?;
    let pair = (
        RolloutId::parse("rollout_id", rollout_id)?,
        AttemptId::parse("attempt_id", attempt_id)?,
    );
    let ids = context.engine.next_sequence_ids_unchecked(&[pair]).await?;
    Ok(PyJson(StatusCode::OK, serde_json::json!({"sequence_id": ids[0]})).into_response())
}
