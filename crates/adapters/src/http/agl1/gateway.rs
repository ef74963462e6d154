//! The gateway routes: proxied model calls, and pause, resume and state.

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};

use super::render::PauseBody;
use super::schema;
use crate::gateway::{GatewayState, ProxyAnswer, ProxyCall};
use crate::http::context::HttpContext;
use crate::http::error::{HttpError, HttpResult};
use crate::http::extract::JsonBody;
use crate::http::validate::{Loc, Validator};
use crate::pyjson::PyJson;
use lightning_store_core::agl1::gateway::{GatewayMode, UPSTREAM_PATHS};
use lightning_store_core::error::echo;
use lightning_store_core::ids::{AttemptId, RolloutId};

fn state_answer(state: &GatewayState) -> Response {
    PyJson(StatusCode::OK, PauseBody::new(&state.pause, state.inflight)).into_response()
}

pub(super) async fn pause(context: HttpContext, body: JsonBody) -> HttpResult<Response> {
    let body = body.required()?;
    let mut v = Validator::new();
    let request = schema::pause_request(&mut v, &Loc::body(), &body);
    let request = v.finish(request)?;
    let state = context.gateway.set_pause(Some(request)).await?;
    Ok(state_answer(&state))
}

pub(super) async fn resume(context: HttpContext) -> HttpResult<Response> {
    let state = context.gateway.set_pause(None).await?;
    Ok(state_answer(&state))
}

pub(super) async fn state(context: HttpContext) -> HttpResult<Response> {
    let state = context.gateway.state().await?;
    Ok(state_answer(&state))
}

pub(super) async fn proxy(
    context: HttpContext,
    Path((rollout_id, attempt_id, mode, upstream_path)): Path<(String, String, String, String)>,
    body: axum::body::Body,
) -> HttpResult<Response> {
    let Some(mode) = GatewayMode::parse(&mode) else {
        return Err(HttpError::Detail(
            StatusCode::NOT_FOUND,
            format!("Unsupported proxy mode: {}", echo(&mode)),
        ));
    };
    if !UPSTREAM_PATHS.contains(&upstream_path.as_str()) {
        return Err(HttpError::Detail(
            StatusCode::NOT_FOUND,
            format!("Unsupported upstream path: {}", echo(&upstream_path)),
        ));
    }
    let body = crate::http::extract::read_body(body, context.max_body_bytes).await?;
    let call = ProxyCall {
        rollout_id: RolloutId::parse("rollout_id", rollout_id)?,
        attempt_id: AttemptId::parse("attempt_id", attempt_id)?,
        mode,
        upstream_path,
        body,
    };
    let result = context.gateway.proxy(call).await.map_err(HttpError::from);
    let status = match &result {
        Ok(ProxyAnswer::Upstream { status, .. }) => *status,
        Ok(ProxyAnswer::Paused { .. }) => StatusCode::TOO_MANY_REQUESTS.as_u16(),
        Err(error) => error.status().as_u16(),
    };
    context
        .metrics
        .agl1()
        .gateway_request(mode.as_str(), status);
    match result? {
        ProxyAnswer::Upstream { status, body } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
            let content_type = [(header::CONTENT_TYPE, "application/json")];
            Ok((status, content_type, body).into_response())
        }
        ProxyAnswer::Paused {
            retry_after_seconds,
            reason,
        } => {
            // Upstream writes this body with json.dumps' default separators.
            let reason = serde_json::to_string(&reason).expect("a reason serialises");
            let body = format!("{{\"error\": \"gateway paused\", \"reason\": {reason}}}");
            let retry_after = HeaderValue::from(retry_after_seconds);
            Ok((
                StatusCode::TOO_MANY_REQUESTS,
                [
                    (header::RETRY_AFTER, retry_after),
                    (
                        header::HeaderName::from_static("x-agl-paused"),
                        HeaderValue::from_static("true"),
                    ),
                    (
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    ),
                ],
                body,
            )
                .into_response())
        }
    }
}
