//! The queue, rollout, attempt and wait routes.

use std::time::Duration;

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use super::super::context::HttpContext;
use super::super::error::HttpResult;
use super::super::extract::{IdempotencyKey, JsonBody, QueryParams, RequestCaller};
use super::super::validate::{Loc, Object, Validator};
use super::models::{AttemptJson, PageJson, RolloutJson};
use super::requests::{
    ATTEMPT_FIELDS, AttemptQuery, ROLLOUT_FIELDS, RolloutQuery, Source, opt_string_field,
    read_attempt_patch, read_rollout_patch, read_spec,
};
use crate::pyjson::PyJson;
use lightning_store_core::error::StoreError;
use lightning_store_core::idempotency::checked_request_id;
use lightning_store_core::ids::{self, AttemptId, RolloutId, WorkerId};
use lightning_store_core::limits;
use lightning_store_core::model::{Json, RolloutSpec};
use lightning_store_core::query::RolloutFilter;

/// Reads a worker id a request gives with an attempt (empty is accepted).
fn worker_id(id: Option<String>) -> HttpResult<Option<WorkerId>> {
    Ok(id.map(|id| WorkerId::parse("worker_id", id)).transpose()?)
}

/// `POST /queues/rollouts/enqueue`: 201 and the queued rollouts. With an
/// `Idempotency-Key` header, a retry answers with the rollouts the first
/// call created (as they are now) and enqueues nothing.
pub async fn enqueue(
    context: HttpContext,
    IdempotencyKey(key): IdempotencyKey,
    body: JsonBody,
) -> HttpResult<Response> {
    let request_id = checked_request_id(key)?;
    let json = body.required()?;
    context.check_batch("rollouts", json.get("rollouts"))?;
    let mut v = Validator::new();
    let specs = read_enqueue(&mut v, &json);
    let specs = v.finish(specs)?;
    if specs.is_empty() {
        return Ok(PyJson(StatusCode::CREATED, Vec::<Json>::new()).into_response());
    }
    let enqueued = context.engine.enqueue_rollouts(specs, request_id).await?;
    let json: Vec<RolloutJson> = enqueued.rollouts.iter().map(Into::into).collect();
    Ok(PyJson(StatusCode::CREATED, json).into_response())
}

fn read_enqueue(v: &mut Validator, json: &Json) -> Option<Vec<RolloutSpec>> {
    let loc = Loc::body();
    let object = v.model(&loc, json)?;
    let rollouts = v.required(object, &loc, "rollouts")?;
    v.each(&loc.key("rollouts"), rollouts, |v, loc, item| {
        let object = v.model(loc, item)?;
        read_spec(v, loc, object)
    })
}

/// `POST /queues/rollouts/dequeue`: the claimed rollouts (never waits).
pub async fn dequeue(
    context: HttpContext,
    RequestCaller(caller): RequestCaller,
    JsonBody(json): JsonBody,
) -> HttpResult<Response> {
    let (limit, worker) = match json {
        None | Some(Json::Null) => (1, None),
        Some(json) => {
            let mut v = Validator::new();
            let read = read_dequeue(&mut v, &json);
            v.finish(read)?
        }
    };
    // As upstream: no limit, no work (nothing is taken for anyone).
    if limit <= 0 {
        return Ok(PyJson(StatusCode::OK, Vec::<Json>::new()).into_response());
    }
    let claimed = context
        .engine
        .dequeue(limit, worker_id(worker)?, Duration::ZERO, &caller)
        .await?;
    let json: Vec<RolloutJson> = claimed.iter().map(Into::into).collect();
    Ok(PyJson(StatusCode::OK, json).into_response())
}

fn read_dequeue(v: &mut Validator, json: &Json) -> Option<(i64, Option<String>)> {
    let object = v.model(&Loc::body(), json)?;
    let limit = match object.get("limit") {
        None => Some(1),
        Some(value) => v.int(&Loc::body().key("limit"), value),
    };
    let worker = opt_string_field(v, object, "worker_id");
    Some((limit?, worker?))
}

/// `POST /rollouts`: 201 and the started rollout with its first attempt.
pub async fn start_rollout(
    context: HttpContext,
    RequestCaller(caller): RequestCaller,
    body: JsonBody,
) -> HttpResult<Response> {
    let json = body.required()?;
    let mut v = Validator::new();
    let read = read_start(&mut v, &json);
    let (spec, worker) = v.finish(read)?;
    let view = context
        .engine
        .start_rollout(spec, worker_id(worker)?, &caller)
        .await?;
    Ok(PyJson(StatusCode::CREATED, RolloutJson::from(&view)).into_response())
}

fn read_start(v: &mut Validator, json: &Json) -> Option<(RolloutSpec, Option<String>)> {
    let object = v.model(&Loc::body(), json)?;
    let spec = read_spec(v, &Loc::body(), object);
    let worker = opt_string_field(v, object, "worker_id");
    Some((spec?, worker?))
}

/// Runs a rollout query read from `source`.
async fn run_query(context: &HttpContext, source: Source<'_>) -> HttpResult<Response> {
    if let Some(count) = source.list_len("rollout_id_in") {
        context.engine.limits().check_ids("rollout_id_in", count)?;
    }
    let mut v = Validator::new();
    let read = RolloutQuery::read(&mut v, &source);
    let query = v.finish(read)?;
    let page = query.page.to_page(ROLLOUT_FIELDS)?;
    let filter = RolloutFilter {
        status_in: query.status_in,
        rollout_id_in: query.rollout_id_in,
        rollout_id_contains: query.rollout_id_contains,
        logic: query.logic,
        ..RolloutFilter::default()
    };
    let result = context.engine.query_rollouts(&filter, &page).await?;
    Ok(PyJson(StatusCode::OK, PageJson::new(&result, RolloutJson::from)).into_response())
}

/// `GET /rollouts`: the dashboard's rollout list.
pub async fn query(context: HttpContext, params: QueryParams) -> HttpResult<Response> {
    run_query(&context, Source::Query(&params)).await
}

/// `POST /rollouts/search`: what `LightningStoreClient.query_rollouts` calls.
pub async fn search(context: HttpContext, body: JsonBody) -> HttpResult<Response> {
    let object = body.object()?;
    run_query(&context, Source::Body(&object)).await
}

/// `GET /rollouts/{rollout_id}`: the rollout (with its latest attempt), or
/// `null` when unknown.
pub async fn get_rollout(
    context: HttpContext,
    Path(rollout_id): Path<String>,
) -> HttpResult<Response> {
    let rollout_id = RolloutId::parse("rollout_id", rollout_id)?;
    match context.engine.get_rollout(&rollout_id).await {
        Ok(view) => Ok(PyJson(StatusCode::OK, RolloutJson::from(&view)).into_response()),
        Err(StoreError::NotFound(_)) => Ok(null()),
        Err(error) => Err(error.into()),
    }
}

/// `GET /rollouts/search`: upstream's router reads it as the rollout whose
/// id is `search`.
pub async fn get_rollout_named_search(context: HttpContext) -> HttpResult<Response> {
    get_rollout(context, Path("search".to_owned())).await
}

/// Returns `200 null`, upstream's answer for an unknown entity.
fn null() -> Response {
    PyJson(StatusCode::OK, Json::Null).into_response()
}

/// `POST /rollouts/{rollout_id}`: writes the fields present.
pub async fn update_rollout(
    context: HttpContext,
    Path(rollout_id): Path<String>,
    body: JsonBody,
) -> HttpResult<Response> {
    let patch = read_rollout_patch(&body.required()?)?;
    let rollout_id = RolloutId::parse("rollout_id", rollout_id)?;
    let rollout = context.engine.update_rollout(&rollout_id, patch).await?;
    Ok(PyJson(StatusCode::OK, RolloutJson::from(&rollout)).into_response())
}

/// `POST /rollouts/{rollout_id}/attempts`: 201 and the rollout with its new attempt.
pub async fn start_attempt(
    context: HttpContext,
    Path(rollout_id): Path<String>,
    RequestCaller(caller): RequestCaller,
    JsonBody(json): JsonBody,
) -> HttpResult<Response> {
    let worker = match json {
        None | Some(Json::Null) => None,
        Some(json) => {
            let mut v = Validator::new();
            let read = v
                .model(&Loc::body(), &json)
                .and_then(|object: &Object| opt_string_field(&mut v, object, "worker_id"));
            v.finish(read)?
        }
    };
    let rollout_id = RolloutId::parse("rollout_id", rollout_id)?;
    let view = context
        .engine
        .start_attempt(&rollout_id, worker_id(worker)?, &caller)
        .await?;
    Ok(PyJson(StatusCode::CREATED, RolloutJson::from(&view)).into_response())
}

/// Runs an attempt query; an unknown rollout has an empty page, as upstream.
async fn run_attempt_query(
    context: &HttpContext,
    rollout_id: String,
    source: Source<'_>,
) -> HttpResult<Response> {
    let mut v = Validator::new();
    let read = AttemptQuery::read(&mut v, &source);
    let query = v.finish(read)?;
    let page = query.page.to_page(ATTEMPT_FIELDS)?;
    let rollout_id = RolloutId::parse("rollout_id", rollout_id)?;
    match context.engine.query_attempts(&rollout_id, &page).await {
        Ok(result) => {
            let json = PageJson::new(&result, AttemptJson::from);
            Ok(PyJson(StatusCode::OK, json).into_response())
        }
        Err(StoreError::NotFound(_)) => {
            let json = PageJson::<AttemptJson>::empty(page.limit, page.offset);
            Ok(PyJson(StatusCode::OK, json).into_response())
        }
        Err(error) => Err(error.into()),
    }
}

/// `GET /rollouts/{rollout_id}/attempts`.
pub async fn query_attempts(
    context: HttpContext,
    Path(rollout_id): Path<String>,
    params: QueryParams,
) -> HttpResult<Response> {
    run_attempt_query(&context, rollout_id, Source::Query(&params)).await
}

/// `POST /rollouts/{rollout_id}/attempts/search`.
pub async fn search_attempts(
    context: HttpContext,
    Path(rollout_id): Path<String>,
    body: JsonBody,
) -> HttpResult<Response> {
    let object = body.object()?;
    run_attempt_query(&context, rollout_id, Source::Body(&object)).await
}

/// `GET /rollouts/{rollout_id}/attempts/latest`: the attempt, or `null`.
pub async fn latest_attempt(
    context: HttpContext,
    Path(rollout_id): Path<String>,
) -> HttpResult<Response> {
    let rollout_id = RolloutId::parse("rollout_id", rollout_id)?;
    match context.engine.latest_attempt(&rollout_id).await {
        Ok(Some(attempt)) => {
            Ok(PyJson(StatusCode::OK, AttemptJson::from(&attempt)).into_response())
        }
        Ok(None) | Err(StoreError::NotFound(_)) => Ok(null()),
        Err(error) => Err(error.into()),
    }
}

/// `POST /rollouts/{rollout_id}/attempts/{attempt_id}`: writes the fields
/// present (`attempt_id` may be `latest`).
pub async fn update_attempt(
    context: HttpContext,
    Path((rollout_id, attempt_id)): Path<(String, String)>,
    RequestCaller(caller): RequestCaller,
    body: JsonBody,
) -> HttpResult<Response> {
    let patch = read_attempt_patch(&body.required()?)?;
    let rollout_id = RolloutId::parse("rollout_id", rollout_id)?;
    let attempt_id = AttemptId::parse("attempt_id", attempt_id)?;
    let attempt = context
        .engine
        .update_attempt(&rollout_id, &attempt_id, patch, None, &caller)
        .await?;
    Ok(PyJson(StatusCode::OK, AttemptJson::from(&attempt)).into_response())
}

/// `POST /rollouts/{rollout_id}/attempts/latest`.
pub async fn update_latest_attempt(
    context: HttpContext,
    Path(rollout_id): Path<String>,
    caller: RequestCaller,
    body: JsonBody,
) -> HttpResult<Response> {
    update_attempt(
        context,
        Path((rollout_id, ids::LATEST.to_owned())),
        caller,
        body,
    )
    .await
}

/// `POST /waits/rollouts`: the finished rollouts among those named, once
/// all are finished or `timeout` seconds passed (`null`: no limit).
pub async fn wait(context: HttpContext, body: JsonBody) -> HttpResult<Response> {
    let json = body.required()?;
    context.check_ids("rollout_ids", json.get("rollout_ids"))?;
    let mut v = Validator::new();
    let read = read_wait(&mut v, &json);
    let (rollout_ids, timeout) = v.finish(read)?;
    let rollout_ids = ids::parse_all("rollout_ids", rollout_ids)?;
    let timeout = match timeout {
        None => None,
        Some(seconds) => limits::wait_seconds("timeout", seconds)?,
    };
    let rollouts = context
        .engine
        .wait_for_rollouts(&rollout_ids, timeout)
        .await?;
    let json: Vec<RolloutJson> = rollouts.iter().map(Into::into).collect();
    Ok(PyJson(StatusCode::OK, json).into_response())
}

fn read_wait(v: &mut Validator, json: &Json) -> Option<(Vec<String>, Option<f64>)> {
    let loc = Loc::body();
    let object = v.model(&loc, json)?;
    let ids = v
        .required(object, &loc, "rollout_ids")
        .and_then(|ids| v.each(&loc.key("rollout_ids"), ids, |v, loc, id| v.string(loc, id)));
    let timeout = match object.get("timeout") {
        None => Some(None),
        Some(value) => v.opt_float(&loc.key("timeout"), value),
    };
    Some((ids?, timeout?))
}
