//! `lightning-store namespaces`: creates, lists and deletes the namespaces
//! of a deployment (each one training's whole world; an admin token's
//! calls).

use serde_json::json;

use super::args::{NamespaceCreateArgs, NamespaceDeleteArgs};
use super::error::ClientResult;
use super::json::print_json;
use super::session::Session;
use super::text::{list_table, render, time_cell};
use lightning_store_proto as pb;

pub(super) async fn create(mut s: Session, args: NamespaceCreateArgs) -> ClientResult {
    let span_retention = (args.span_retention_age.is_some()
        || args.span_retention_max_bytes.is_some())
    .then(|| pb::SpanRetention {
        max_age: args
            .span_retention_age
            .and_then(|age| prost_types::Duration::try_from(age).ok()),
        max_bytes: args.span_retention_max_bytes.unwrap_or(0),
    });
    let quotas = (args.max_queued_rollouts.is_some()
        || args.max_spans.is_some()
        || args.max_span_bytes.is_some())
    .then(|| pb::NamespaceQuotas {
        max_queued_rollouts: args.max_queued_rollouts.unwrap_or(0),
        max_spans: args.max_spans.unwrap_or(0),
        max_span_bytes: args.max_span_bytes.unwrap_or(0),
    });
    let created = s
        .client
        .create_namespace(pb::CreateNamespaceRequest {
            name: args.name,
            span_retention,
            quotas,
        })
        .await?
        .into_inner();
    print_namespace(&s, created.namespace.as_ref(), "created")
}

pub(super) async fn delete(mut s: Session, args: NamespaceDeleteArgs) -> ClientResult {
    let deleted = s
        .client
        .delete_namespace(pb::DeleteNamespaceRequest { name: args.name })
        .await?
        .into_inner();
    print_namespace(&s, deleted.namespace.as_ref(), "deleted")
}

pub(super) async fn list(mut s: Session) -> ClientResult {
    let listed = s
        .client
        .list_namespaces(pb::ListNamespacesRequest {})
        .await?
        .into_inner();
    if s.json {
        let namespaces: Vec<_> = listed
            .namespaces
            .iter()
            .map(|summary| {
                let stats = summary.statistics.clone().unwrap_or_default();
                json!({
                    "namespace": namespace_json(summary.namespace.as_ref()),
                    "total_rollouts": stats.total_rollouts,
                    "queued_rollouts": stats.queued_rollouts,
                    "total_spans": stats.total_spans,
                    "total_workers": stats.total_workers,
                    "stored_bytes": summary.stored_bytes,
                })
            })
            .collect();
        return print_json(&json!(namespaces));
    }
    let mut table = list_table(&[
        "NAMESPACE",
        "ROLLOUTS",
        "QUEUED",
        "SPANS",
        "WORKERS",
        "STORED",
        "CREATED",
    ]);
    for summary in &listed.namespaces {
        let stats = summary.statistics.clone().unwrap_or_default();
        let namespace = summary.namespace.clone().unwrap_or_default();
        table.add_row(vec![
            namespace.name,
            stats.total_rollouts.to_string(),
            stats.queued_rollouts.to_string(),
            stats.total_spans.to_string(),
            stats.total_workers.to_string(),
            format!("{} bytes", summary.stored_bytes),
            time_cell(namespace.created.as_ref()),
        ]);
    }
    out!("{}", render(table));
    Ok(())
}

/// A namespace in JSON.
fn namespace_json(namespace: Option<&pb::Namespace>) -> serde_json::Value {
    let namespace = namespace.cloned().unwrap_or_default();
    json!({
        "name": namespace.name,
        "created": time_cell(namespace.created.as_ref()),
        "span_retention": namespace.span_retention.map(|r| json!({
            "max_age_seconds": r.max_age.map(|d| d.seconds),
            "max_bytes": (r.max_bytes > 0).then_some(r.max_bytes),
        })),
        "quotas": namespace.quotas.map(|q| json!({
            "max_queued_rollouts": (q.max_queued_rollouts > 0).then_some(q.max_queued_rollouts),
            "max_spans": (q.max_spans > 0).then_some(q.max_spans),
            "max_span_bytes": (q.max_span_bytes > 0).then_some(q.max_span_bytes),
        })),
    })
}

/// Prints the namespace a call `did` something to.
fn print_namespace(s: &Session, namespace: Option<&pb::Namespace>, did: &str) -> ClientResult {
    if s.json {
        return print_json(&namespace_json(namespace));
    }
    let name = namespace.map_or("", |n| n.name.as_str());
    out!("namespace {name} {did}");
    Ok(())
}
