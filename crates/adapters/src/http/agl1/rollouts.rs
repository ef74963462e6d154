//! The rollout routes: create, list, the terminal cursor (a page, a long
//! poll or server-sent events), get, PATCH of the status, delete.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::Path;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode, header};

use super::answer::raw_answer;
use super::render::{self, TerminalItem};
use super::schema;
use crate::http::context::HttpContext;
use crate::http::error::HttpResult;
use crate::http::extract::{JsonBody, QueryParams};
use crate::http::validate::{Loc, Validator};
use crate::pyjson::PyJson;
use lightning_store_core::agl1::{Agl1State, CompletionPage};
use lightning_store_core::ids::RolloutId;
use lightning_store_core::limits;
use lightning_store_core::model::Json;

/// The longest `wait` of a terminal cursor long poll, in seconds.
const MAX_WAIT_SECONDS: f64 = 300.0;

/// Completions one server-sent events read takes at most.
const STREAM_PAGE: usize = 256;

pub(super) async fn create(context: HttpContext, body: JsonBody) -> HttpResult<Response> {
    let body = body.required()?;
    context.check_batch("rollouts", Some(&body))?;
    let mut v = Validator::new();
    let requests = v.each(&Loc::body(), &body, schema::rollout_create);
    let requests = v.finish(requests)?;
    let created = context.engine.create_agl1_rollouts(requests).await?;
    Ok(raw_answer(StatusCode::CREATED, render::rollouts(&created)))
}

pub(super) async fn list(context: HttpContext, params: QueryParams) -> HttpResult<Response> {
    let mut v = Validator::new();
    let given: Vec<&str> = params.values("state_in").collect();
    let states = if given.is_empty() {
        v.issue(
            "missing",
            &Loc::query("state_in"),
            "Field required",
            &Json::Null,
            None,
        );
        None
    } else {
        let mut states = Vec::with_capacity(given.len());
        for (index, text) in given.iter().enumerate() {
            let loc = Loc::query("state_in").index(index);
            states.extend(v.member(&loc, &Json::String((*text).to_owned()), &Agl1State::ALL));
        }
        Some(states)
    };
    let limit = params.int(&mut v, "limit", 500);
    let (states, limit) = v.finish(states.zip(limit))?;
    let rollouts = context.engine.list_agl1_rollouts(&states, limit).await?;
    Ok(raw_answer(StatusCode::OK, render::rollouts(&rollouts)))
}

/// `GET /api/rollouts/terminal?after&limit[&wait]`: a page of the
/// completion log (upstream's), waiting up to `wait` seconds for the first
/// entry; with `Accept: text/event-stream`, every entry from `after` (or
/// `Last-Event-ID`) on as server-sent events, until the server shuts down.
pub(super) async fn terminal(
    context: HttpContext,
    headers: HeaderMap,
    params: QueryParams,
) -> HttpResult<Response> {
    let mut v = Validator::new();
    let after = params.int(&mut v, "after", 0);
    let limit = params.int(&mut v, "limit", 1000);
    let wait = params.read(&mut v, "wait", 0.0, |v, loc, value| v.float(loc, value));
    let ((after, limit), wait) = v.finish(after.zip(limit).zip(wait))?;
    let after = after.max(0);
    let limit = usize::try_from(limit.max(1)).unwrap_or(usize::MAX);
    let streams = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    if streams {
        let resume = headers
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<i64>().ok());
        return Ok(completion_stream(context, resume.unwrap_or(after)));
    }
    let longest = Duration::from_secs_f64(MAX_WAIT_SECONDS);
    let wait = limits::wait_seconds("wait", wait)?.map_or(longest, |wait| wait.min(longest));
    let page = context
        .engine
        .wait_for_completions(after, limit, wait)
        .await?;
    Ok(PyJson(StatusCode::OK, terminal_page(after, &page)).into_response())
}

#[derive(serde::Serialize)]
struct TerminalPage {
    items: Vec<TerminalItem>,
    next_after: i64,
    total_terminal: i64,
}

fn terminal_page(after: i64, page: &CompletionPage) -> TerminalPage {
    TerminalPage {
        items: page.entries.iter().filter_map(TerminalItem::of).collect(),
        next_after: after + page.entries.len() as i64,
        total_terminal: page.total,
    }
}

/// Streams the completion log from `after` as server-sent events: one
/// `terminal` event per 1.x rollout, its `id` the cursor to resume after.
fn completion_stream(context: HttpContext, after: i64) -> Response {
    let mut closing = context.engine.closing();
    let stream = futures::stream::unfold((context, after), move |(context, after)| {
        let closed = *closing.borrow_and_update();
        async move {
            if closed {
                return None;
            }
            let wait = Duration::from_secs(30);
            let page = match context
                .engine
                .wait_for_completions(after, STREAM_PAGE, wait)
                .await
            {
                Ok(page) => page,
                Err(error) => {
                    tracing::warn!(%error, "terminal stream ends");
                    return None;
                }
            };
            let mut events = Vec::with_capacity(page.entries.len());
            let mut next = after;
            for entry in &page.entries {
                next = entry.position + 1;
                if let Some(item) = TerminalItem::of(entry) {
                    let event = SseEvent::default()
                        .event("terminal")
                        .id(next.to_string())
                        .data(serde_json::to_string(&item).expect("a terminal item serialises"));
                    events.push(Ok::<_, Infallible>(event));
                }
            }
            Some((futures::stream::iter(events), (context, next)))
        }
    });
    let stream = futures::StreamExt::flatten(stream);
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

pub(super) async fn get(
    context: HttpContext,
    Path(rollout_id): Path<String>,
) -> HttpResult<Response> {
    let rollout_id = RolloutId::parse("rollout_id", rollout_id)?;
    let detail = context.engine.get_agl1_rollout(&rollout_id).await?;
    Ok(raw_answer(StatusCode::OK, render::rollout_detail(&detail)))
}

pub(super) async fn patch(
    context: HttpContext,
    Path(rollout_id): Path<String>,
    body: JsonBody,
) -> HttpResult<Response> {
    let body = body.required()?;
    let mut v = Validator::new();
    let patch = schema::rollout_patch(&mut v, &Loc::body(), &body);
    let patch = v.finish(patch)?;
    let rollout_id = RolloutId::parse("rollout_id", rollout_id)?;
    let rollout = context
        .engine
        .patch_agl1_rollout(&rollout_id, patch)
        .await?;
    Ok(raw_answer(StatusCode::OK, render::rollout(&rollout)))
}

pub(super) async fn delete(
    context: HttpContext,
    Path(rollout_id): Path<String>,
) -> HttpResult<Response> {
    let rollout_id = RolloutId::parse("rollout_id", rollout_id)?;
    context.engine.delete_agl1_rollout(&rollout_id).await?;
    context.gateway.rollout_deleted(&rollout_id);
    // Upstream's 204 carries FastAPI's default JSON content type.
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}
