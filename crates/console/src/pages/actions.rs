//! The console's actions, each confirmed on a page of its own before its
//! form is posted: cancel a rollout, pause and resume agent-lightning
//! 1.x's gateway. They call the engine and the gateway as the API does,
//! and [`lightning_store_adapters::auth`] checked the same permission before they run.

use askama::Template;
use axum::extract::{Path, Request};
use axum::response::Response;
use http::StatusCode;

use super::layout::{Layout, Nav, error_page, failed};
use super::session::{FORM_TOKEN, Form, see_other};
use super::state::NamespaceConsole;
use super::viewer::Viewer;
use crate::rendered::{PageError, render_error};
use lightning_store_core::ids::RolloutId;
use lightning_store_core::lifecycle;
use lightning_store_core::model::RolloutStatus;
use lightning_store_core::pages::Cancelled;

/// A confirmation page: a question, what doing it means, and the form
/// that does it.
#[derive(Template)]
#[template(path = "confirm.html")]
pub(super) struct Confirm<'a> {
    pub(super) title: &'a str,
    pub(super) question: &'a str,
    pub(super) detail: &'a str,
    pub(super) action: &'a str,
    pub(super) button: &'a str,
    pub(super) danger: bool,
    pub(super) back: &'a str,
    pub(super) form_token_name: &'a str,
    pub(super) form_token: Option<&'a str>,
    /// Ask for the pause's reason and retry delay.
    pub(super) pause_fields: bool,
}

impl Confirm<'_> {
    /// Answers with the page for `viewer`.
    pub(super) fn answer(&self, viewer: &Viewer) -> Response {
        match self.render() {
            Ok(main) => Layout::page(self.title, &main, Nav::None, viewer).answer(StatusCode::OK),
            Err(error) => failed(&render_error(error), viewer),
        }
    }
}

/// Asks whether to cancel a rollout.
pub async fn confirm_cancel(
    console: NamespaceConsole,
    Path(rollout_id): Path<String>,
    viewer: Viewer,
) -> Response {
    let rollout_id = match RolloutId::parse("rollout_id", rollout_id) {
        Ok(rollout_id) => rollout_id,
        Err(error) => return failed(&error.into(), &viewer),
    };
    let view = match console.sources.engine.get_rollout(&rollout_id).await {
        Ok(view) => view,
        Err(error) => return failed(&error.into(), &viewer),
    };
    let back = console.sources.links.rollout(&rollout_id);
    if !lifecycle::may_cancel(view.rollout.status) {
        return finished(&rollout_id, view.rollout.status);
    }
    let action = format!("{back}/cancel");
    let question = format!("Cancel rollout {rollout_id}?");
    let detail = format!(
        "It is {}. Its attempt, if one runs, is told to stop, and the rollout is not retried.",
        view.rollout.status
    );
    Confirm {
        title: "Cancel a rollout",
        question: &question,
        detail: &detail,
        action: &action,
        button: "Cancel the rollout",
        danger: true,
        back: &back,
        form_token_name: FORM_TOKEN,
        form_token: viewer.form_token.as_deref(),
        pause_fields: false,
    }
    .answer(&viewer)
}

fn finished(rollout_id: &str, status: RolloutStatus) -> Response {
    error_page(
        StatusCode::CONFLICT,
        "Already finished",
        &format!(
            "Rollout {rollout_id} has already finished ({status}): there is nothing to cancel."
        ),
    )
}

/// Cancels a rollout (the confirmation's form).
pub async fn cancel(
    console: NamespaceConsole,
    Path(rollout_id): Path<String>,
    viewer: Viewer,
    request: Request,
) -> Response {
    if let Err(response) = Form::read(request).await {
        return response;
    }
    let rollout_id = match RolloutId::parse("rollout_id", rollout_id) {
        Ok(rollout_id) => rollout_id,
        Err(error) => return failed(&error.into(), &viewer),
    };
    match console.sources.engine.cancel_rollout(&rollout_id).await {
        Ok(Cancelled::AlreadyFinished(status)) => finished(&rollout_id, status),
        Ok(Cancelled::Done(_)) => {
            tracing::info!(
                rollout_id = rollout_id.as_str(),
                token = viewer.token_name.as_deref(),
                "console: rollout cancelled"
            );
            see_other(&console.sources.links.rollout(&rollout_id))
        }
        Err(error) => failed(&error.into(), &viewer),
    }
}

/// Asks whether to pause the gateway, and with which reason and delay.
pub async fn confirm_pause(viewer: Viewer) -> Response {
    Confirm {
        title: "Pause the gateway",
        question: "Pause agent-lightning 1.x's LLM gateway?",
        detail: "New model calls are refused (429, retry after the delay) on every server until it is resumed; calls in flight finish. The pause returns once every server applies it.",
        action: &viewer.links.to("/console/gateway/pause"),
        button: "Pause the gateway",
        danger: true,
        back: &viewer.links.to("/console/models"),
        form_token_name: FORM_TOKEN,
        form_token: viewer.form_token.as_deref(),
        pause_fields: true,
    }
    .answer(&viewer)
}

/// Asks whether to resume the gateway.
pub async fn confirm_resume(viewer: Viewer) -> Response {
    Confirm {
        title: "Resume the gateway",
        question: "Resume agent-lightning 1.x's LLM gateway?",
        detail: "Model calls are served again on every server.",
        action: &viewer.links.to("/console/gateway/resume"),
        button: "Resume the gateway",
        danger: false,
        back: &viewer.links.to("/console/models"),
        form_token_name: FORM_TOKEN,
        form_token: viewer.form_token.as_deref(),
        pause_fields: false,
    }
    .answer(&viewer)
}

/// Pauses the gateway (the confirmation's form).
pub async fn pause(console: NamespaceConsole, viewer: Viewer, request: Request) -> Response {
    let form = match Form::read(request).await {
        Ok(form) => form,
        Err(response) => return response,
    };
    // The fields of the 1.x API's PauseRequest, taken as it takes them
    // (the gateway and the engine own what a pause may be).
    let Ok(retry_after) = form
        .get("retry_after")
        .map(str::trim)
        .unwrap_or("5")
        .parse::<i64>()
    else {
        return error_page(
            StatusCode::BAD_REQUEST,
            "Cannot pause",
            "The retry delay must be a whole number of seconds.",
        );
    };
    let reason = form
        .get("reason")
        .map(str::trim)
        .filter(|reason| !reason.is_empty())
        .map(str::to_owned);
    set_pause(&console, &viewer, Some((retry_after, reason))).await
}

/// Resumes the gateway (the confirmation's form).
pub async fn resume(console: NamespaceConsole, viewer: Viewer, request: Request) -> Response {
    if let Err(response) = Form::read(request).await {
        return response;
    }
    set_pause(&console, &viewer, None).await
}

async fn set_pause(
    console: &NamespaceConsole,
    viewer: &Viewer,
    pause: Option<(i64, Option<String>)>,
) -> Response {
    let pausing = pause.is_some();
    match console.sources.gateway.set_pause(pause).await {
        Ok(_) => {
            tracing::info!(
                paused = pausing,
                token = viewer.token_name.as_deref(),
                "console: gateway pause set"
            );
            see_other(&console.sources.links.to("/console/models"))
        }
        Err(error) => failed(&PageError::from(error), viewer),
    }
}
