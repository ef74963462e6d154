//! A rollout as one JSON document, for a bug report or an analysis: the
//! rollout with its latest attempt, every attempt and every span in
//! agent-lightning's JSON (as its store API writes them), and for a 1.x
//! rollout its events as recorded.

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;
use serde_json::value::RawValue;

use super::layout::failed;
use super::state::NamespaceConsole;
use super::viewer::Viewer;
use crate::rendered::PageError;
use lightning_store_adapters::http::agl0::models::{AttemptJson, RolloutJson};
use lightning_store_adapters::http::agl0::span_json::SpanJson;
use lightning_store_core::error::StoreError;
use lightning_store_core::ids::RolloutId;

#[derive(Serialize)]
struct EventJson<'a> {
    event_type: &'a str,
    attempt_id: &'a str,
    timestamp: f64,
    data: Box<RawValue>,
}

#[derive(Serialize)]
struct Download<'a> {
    rollout: RolloutJson<'a>,
    attempts: Vec<AttemptJson<'a>>,
    spans: Vec<SpanJson<'a>>,
    /// Retention deleted the spans.
    spans_evicted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    agl1_events: Option<Vec<EventJson<'a>>>,
}

/// Answers a rollout as a JSON file.
pub async fn download(
    console: NamespaceConsole,
    Path(rollout_id): Path<String>,
    viewer: Viewer,
) -> Response {
    let rollout_id = match RolloutId::parse("rollout_id", rollout_id) {
        Ok(rollout_id) => rollout_id,
        Err(error) => return failed(&error.into(), &viewer),
    };
    match document(&console, &rollout_id).await {
        Ok(body) => {
            let name: String = rollout_id
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            let disposition = format!("attachment; filename=\"rollout-{name}.json\"");
            let mut response = (
                StatusCode::OK,
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                body,
            )
                .into_response();
            if let Ok(value) = HeaderValue::from_str(&disposition) {
                response
                    .headers_mut()
                    .insert(header::CONTENT_DISPOSITION, value);
            }
            response
        }
        Err(error) => failed(&error, &viewer),
    }
}

async fn document(
    console: &NamespaceConsole,
    rollout_id: &RolloutId,
) -> Result<Vec<u8>, PageError> {
    let read = console.sources.engine.rollout_download(rollout_id).await?;
    let (view, attempts, spans, spans_evicted, events) = (
        read.view,
        read.attempts,
        read.spans,
        read.spans_evicted,
        read.agl1_events,
    );
    let document = Download {
        rollout: (&view).into(),
        attempts: attempts.iter().map(Into::into).collect(),
        spans: spans.iter().map(|span| SpanJson(span)).collect(),
        spans_evicted,
        agl1_events: events.as_ref().map(|events| {
            events
                .iter()
                .map(|event| EventJson {
                    event_type: &event.event_type,
                    attempt_id: &event.attempt_id,
                    timestamp: event.timestamp.as_secs_f64(),
                    data: RawValue::from_string(event.data.clone()).unwrap_or_else(|_| {
                        RawValue::from_string("null".to_owned()).expect("valid JSON")
                    }),
                })
                .collect()
        }),
    };
    serde_json::to_vec_pretty(&document).map_err(|error| {
        PageError::Store(StoreError::Internal(format!(
            "cannot write the rollout as JSON: {error}"
        )))
    })
}
