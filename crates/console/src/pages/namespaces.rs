//! The Namespaces page (deployment-wide, for a viewer who may manage
//! namespaces): every namespace with its counts, stored bytes, retention
//! and quotas, a form that creates one, and the deletion of one after a
//! confirmation page. It calls [`Namespaces`] as the gRPC calls do.

use askama::Template;
use axum::extract::{Path, Request, State};
use axum::response::Response;
use http::StatusCode;

use super::actions::Confirm;
use super::layout::{Layout, Nav, error_page, failed};
use super::session::{FORM_TOKEN, Form, see_other};
use super::state::ConsoleContext;
use super::viewer::Viewer;
use crate::format;
use crate::rendered::render_error;
use crate::url::{Links, PREFIX, path_segment};
use lightning_store_adapters::namespaces::Namespaces;
use lightning_store_core::error::StoreError;
use lightning_store_core::namespace::{NamespaceName, NamespaceSettings, Quotas};

/// One namespace as the page lists it.
struct Row {
    name: String,
    console: String,
    rollouts: String,
    queued: String,
    spans: String,
    workers: String,
    stored: String,
    created: format::ShownTime,
    retention: String,
    quotas: String,
    /// The link to its deletion's confirmation (none for `default`).
    delete: Option<String>,
}

#[derive(Template)]
#[template(path = "namespaces.html")]
struct NamespacesPage<'a> {
    rows: Vec<Row>,
    /// Why the last create failed, in the store's words.
    error: Option<&'a str>,
    /// The create form's fields as posted (kept after a failure).
    fields: &'a Fields,
    action: String,
    form_token_name: &'a str,
    form_token: Option<&'a str>,
}

/// The create form's fields, as text.
#[derive(Default)]
struct Fields {
    name: String,
    max_queued_rollouts: String,
    max_spans: String,
    max_span_bytes: String,
}

impl Fields {
    fn of(form: &Form) -> Self {
        let field = |name: &str| form.get(name).unwrap_or("").trim().to_owned();
        Self {
            name: field("name"),
            max_queued_rollouts: field("max_queued_rollouts"),
            max_spans: field("max_spans"),
            max_span_bytes: field("max_span_bytes"),
        }
    }

    /// Returns the namespace's name and settings, or why they are not
    /// valid.
    fn parse(&self) -> Result<(NamespaceName, NamespaceSettings), StoreError> {
        let name = NamespaceName::parse(self.name.clone())?;
        let quota = |label: &str, text: &str| -> Result<Option<u64>, StoreError> {
            if text.is_empty() {
                return Ok(None);
            }
            match text.parse::<u64>() {
                Ok(value) if value > 0 => Ok(Some(value)),
                _ => Err(StoreError::InvalidArgument(format!(
                    "{label} must be a whole number above 0 (or left empty)"
                ))),
            }
        };
        let quotas = Quotas {
            max_queued_rollouts: quota("max queued rollouts", &self.max_queued_rollouts)?,
            max_spans: quota("max spans", &self.max_spans)?,
            max_span_bytes: quota("max span bytes", &self.max_span_bytes)?,
        };
        Ok((
            name,
            NamespaceSettings {
                quotas,
                retention: None,
            },
        ))
    }
}

/// The Namespaces page.
pub async fn namespaces(State(context): State<ConsoleContext>, viewer: Viewer) -> Response {
    show(&context, &viewer, &Fields::default(), None).await
}

/// Creates a namespace (the page's form), then shows the page again: with
/// the new namespace, or with why it was not created.
pub async fn create_namespace(
    State(context): State<ConsoleContext>,
    viewer: Viewer,
    request: Request,
) -> Response {
    let form = match Form::read(request).await {
        Ok(form) => form,
        Err(response) => return response,
    };
    let fields = Fields::of(&form);
    let created = match fields.parse() {
        Ok((name, settings)) => context.namespaces().create(&name, settings).await,
        Err(error) => Err(error),
    };
    match created {
        Ok(namespace) => {
            tracing::info!(
                namespace = %namespace.name,
                token = viewer.token_name.as_deref(),
                "console: namespace created"
            );
            see_other(&viewer.links.to(PAGE))
        }
        Err(error) => show(&context, &viewer, &fields, Some(error)).await,
    }
}

/// Asks whether to delete a namespace and all its data.
pub async fn confirm_delete(
    State(context): State<ConsoleContext>,
    Path(name): Path<String>,
    viewer: Viewer,
) -> Response {
    let name = match deletable(&name) {
        Ok(name) => name,
        Err((status, message)) => return error_page(status, "Cannot delete", &message),
    };
    if let Err(error) = context.namespaces().resolve(&name).await {
        return failed(&error.into(), &viewer);
    }
    let question = format!("Delete namespace {name}?");
    let action = delete_link(&viewer.links, &name);
    let back = viewer.links.to(PAGE);
    Confirm {
        title: "Delete a namespace",
        question: &question,
        detail: "All its data is deleted: its rollouts, attempts, spans, resources, workers and events. Its name answers NOT_FOUND on every server at once; this cannot be undone.",
        action: &action,
        button: "Delete the namespace",
        danger: true,
        back: &back,
        form_token_name: FORM_TOKEN,
        form_token: viewer.form_token.as_deref(),
        pause_fields: false,
    }
    .answer(&viewer)
}

/// Deletes a namespace (the confirmation's form), then shows the page.
pub async fn delete_namespace(
    State(context): State<ConsoleContext>,
    Path(name): Path<String>,
    viewer: Viewer,
    request: Request,
) -> Response {
    if let Err(response) = Form::read(request).await {
        return response;
    }
    let name = match deletable(&name) {
        Ok(name) => name,
        Err((status, message)) => return error_page(status, "Cannot delete", &message),
    };
    match context.namespaces().delete(&name).await {
        Ok(_) => {
            tracing::info!(
                namespace = %name,
                token = viewer.token_name.as_deref(),
                "console: namespace deleted"
            );
            // The page of the namespace deleted is gone: the default one's.
            let links = if name == viewer.namespace {
                Links::default()
            } else {
                viewer.links.clone()
            };
            see_other(&links.to(PAGE))
        }
        Err(error) => failed(&error.into(), &viewer),
    }
}

/// The page's path under a namespace's prefix.
const PAGE: &str = "/console/namespaces";

fn delete_link(links: &Links, name: &NamespaceName) -> String {
    links.to(&format!(
        "{PREFIX}/namespaces/{}/delete",
        path_segment(name)
    ))
}

/// Returns the namespace a deletion names, or why it cannot be deleted
/// with the status that says so: a name outside the rule (400) or the
/// default namespace (409).
fn deletable(name: &str) -> Result<NamespaceName, (StatusCode, String)> {
    let name = NamespaceName::parse(name.to_owned())
        .map_err(|error| (StatusCode::BAD_REQUEST, error.to_string()))?;
    if name.is_default() {
        return Err((
            StatusCode::CONFLICT,
            "The default namespace cannot be deleted.".to_owned(),
        ));
    }
    Ok(name)
}

/// Answers the page with `fields` in the create form and, after a failed
/// create, its `error` (with the status it maps to).
async fn show(
    context: &ConsoleContext,
    viewer: &Viewer,
    fields: &Fields,
    error: Option<StoreError>,
) -> Response {
    let rows = match rows(context.namespaces(), &viewer.links).await {
        Ok(rows) => rows,
        Err(error) => return failed(&error.into(), viewer),
    };
    let status = error.as_ref().map_or(StatusCode::OK, status_of);
    let message = error.as_ref().map(ToString::to_string);
    let page = NamespacesPage {
        rows,
        error: message.as_deref(),
        fields,
        action: viewer.links.to(PAGE),
        form_token_name: FORM_TOKEN,
        form_token: viewer.form_token.as_deref(),
    };
    match page.render() {
        Ok(main) => Layout::page("Namespaces", &main, Nav::Namespaces, viewer).answer(status),
        Err(error) => failed(&render_error(error), viewer),
    }
}

/// The status of a page that shows a failed create.
fn status_of(error: &StoreError) -> StatusCode {
    match error {
        StoreError::InvalidArgument(_) => StatusCode::BAD_REQUEST,
        StoreError::AlreadyExists(_) | StoreError::FailedPrecondition(_) => StatusCode::CONFLICT,
        StoreError::NotFound(_) => StatusCode::NOT_FOUND,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// Reads every namespace's row (a namespace deleted meanwhile is left
/// out).
async fn rows(namespaces: &Namespaces, links: &Links) -> Result<Vec<Row>, StoreError> {
    let listed = namespaces.list().await?;
    let mut rows = Vec::with_capacity(listed.len());
    for namespace in listed {
        let services = match namespaces.resolve(&namespace.name).await {
            Ok(services) => services,
            Err(StoreError::NotFound(_)) => continue,
            Err(error) => return Err(error),
        };
        let counts = services.engine.statistics().await?.counts;
        let stored = namespaces.stored_bytes(&namespace).await?;
        let settings = &namespace.settings;
        rows.push(Row {
            console: Links::of(&namespace.name).to("/"),
            rollouts: format::count(counts.rollouts),
            queued: format::count(counts.queued),
            spans: format::count(counts.spans),
            workers: format::count(counts.workers),
            stored: bytes(stored),
            created: format::time(namespace.created),
            retention: retention(settings),
            quotas: quotas(&settings.quotas),
            delete: (!namespace.name.is_default()).then(|| delete_link(links, &namespace.name)),
            name: namespace.name.to_string(),
        });
    }
    Ok(rows)
}

fn bytes(value: u64) -> String {
    format!("{} bytes", format::count(value))
}

/// A namespace's span retention, as the page says it.
fn retention(settings: &NamespaceSettings) -> String {
    let Some(policy) = &settings.retention else {
        return "the server's".to_owned();
    };
    let parts: Vec<String> = [
        policy
            .max_age
            .map(|age| format!("older than {}", format::duration(age))),
        policy.max_bytes.map(|max| format!("past {}", bytes(max))),
    ]
    .into_iter()
    .flatten()
    .collect();
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join(", ")
    }
}

/// A namespace's quotas, as the page says them.
fn quotas(quotas: &Quotas) -> String {
    let parts: Vec<String> = [
        ("queued rollouts", quotas.max_queued_rollouts),
        ("spans", quotas.max_spans),
        ("span bytes", quotas.max_span_bytes),
    ]
    .into_iter()
    .filter_map(|(label, max)| max.map(|max| format!("{label} ≤ {}", format::count(max))))
    .collect();
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join(", ")
    }
}
