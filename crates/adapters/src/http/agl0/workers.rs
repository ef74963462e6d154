//! The worker, statistics and health routes.

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use super::super::context::HttpContext;
use super::super::error::{HttpError, HttpResult};
use super::super::extract::{JsonBody, QueryParams, RequestCaller};
use super::super::validate::{Loc, Validator};
use super::models::{PageJson, StatisticsJson, WorkerJson};
use super::requests::{Source, WORKER_FIELDS, WorkerQuery};
use crate::pyjson::PyJson;
use lightning_store_core::error::StoreError;
use lightning_store_core::ids::WorkerId;
use lightning_store_core::model::Json;
use lightning_store_core::query::WorkerFilter;

/// `GET /health`.
pub async fn health() -> Response {
    PyJson(StatusCode::OK, serde_json::json!({"status": "ok"})).into_response()
}

/// `GET /statistics`.
pub async fn statistics(context: HttpContext) -> HttpResult<Response> {
    let statistics = context.engine.statistics().await?;
    Ok(PyJson(StatusCode::OK, StatisticsJson::from(&statistics)).into_response())
}

async fn run_query(context: &HttpContext, source: Source<'_>) -> HttpResult<Response> {
    let mut v = Validator::new();
    let read = WorkerQuery::read(&mut v, &source);
    let query = v.finish(read)?;
    let page = query.page.to_page(WORKER_FIELDS)?;
    let filter = WorkerFilter {
        status_in: query.status_in,
        worker_id_contains: query.worker_id_contains,
        logic: query.logic,
    };
    let result = context.engine.query_workers(&filter, &page).await?;
    Ok(PyJson(StatusCode::OK, PageJson::new(&result, WorkerJson::from)).into_response())
}

/// `GET /workers`: the dashboard's worker list.
pub async fn query(context: HttpContext, params: QueryParams) -> HttpResult<Response> {
    run_query(&context, Source::Query(&params)).await
}

/// `POST /workers/search`: what `LightningStoreClient.query_workers` calls.
pub async fn search(context: HttpContext, body: JsonBody) -> HttpResult<Response> {
    let object = body.object()?;
    run_query(&context, Source::Body(&object)).await
}

/// `GET /workers/{worker_id}`: the worker, or `null`.
pub async fn get(context: HttpContext, Path(worker_id): Path<String>) -> HttpResult<Response> {
    let worker_id = WorkerId::parse("worker_id", worker_id)?;
    match context.engine.get_worker(&worker_id).await {
        Ok(worker) => Ok(PyJson(StatusCode::OK, WorkerJson::from(&worker)).into_response()),
        Err(StoreError::NotFound(_)) => Ok(PyJson(StatusCode::OK, Json::Null).into_response()),
        Err(error) => Err(error.into()),
    }
}

/// `GET /workers/search`: upstream's router reads it as the worker whose id
/// is `search`.
pub async fn get_named_search(context: HttpContext) -> HttpResult<Response> {
    get(context, Path("search".to_owned())).await
}

/// `POST /workers/{worker_id}`: a heartbeat, with new `heartbeat_stats`
/// when given (`null` is refused, as upstream).
pub async fn update(
    context: HttpContext,
    Path(worker_id): Path<String>,
    RequestCaller(caller): RequestCaller,
    JsonBody(json): JsonBody,
) -> HttpResult<Response> {
    let stats = match json {
        None | Some(Json::Null) => None,
        Some(json) => {
            let mut v = Validator::new();
            let loc = Loc::body();
            let read = v.model(&loc, &json).map(|object| {
                object
                    .get("heartbeat_stats")
                    .map(|value| v.opt_dict(&loc.key("heartbeat_stats"), value))
            });
            match v.finish(read)? {
                None => None,
                Some(Some(Json::Null)) => {
                    return Err(HttpError::bad_request(
                        "heartbeat_stats is invalid; it cannot be a null value.",
                    ));
                }
                Some(stats) => stats,
            }
        }
    };
    let worker_id = WorkerId::parse("worker_id", worker_id)?;
    let worker = context
        .engine
        .update_worker(&worker_id, stats, &caller)
        .await?;
    Ok(PyJson(StatusCode::OK, WorkerJson::from(&worker)).into_response())
}
