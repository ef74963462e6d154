//! The commands that read: lists and details of rollouts, attempts, spans,
//! resources and workers, and the store's statistics.

use serde_json::{Value, json};

use super::args::{
    AttemptsArgs, ResourcesArgs, RolloutArgs, RolloutsArgs, SpansArgs, WorkersArgs, page_request,
};
use super::error::ClientResult;
use super::json::{
    attempt_json, json_text, mode_name, page_json, print_json, resources_json, rollout_json,
    span_json, worker_json,
};
use super::session::Session;
use super::text::{
    attempts_table, details, list_table, or_dash, pretty, print_list, render, rollout_rows,
    span_duration, time_cell, with_statuses,
};
use crate::connection::ShortName;
use lightning_store_proto as pb;

pub(super) async fn rollouts(mut s: Session, args: RolloutsArgs) -> ClientResult {
    let page = s
        .client
        .query_rollouts(pb::QueryRolloutsRequest {
            status_in: args
                .status
                .into_iter()
                .map(|status| status as i32)
                .collect(),
            rollout_id_contains: args.id_contains,
            page: Some(page_request(args.page)),
            ..Default::default()
        })
        .await?
        .into_inner();
    if s.json {
        let items = page.rollouts.iter().map(rollout_json).collect();
        return print_json(&page_json(
            "rollouts",
            items,
            page.limit,
            page.offset,
            page.total,
        ));
    }
    let mut table = list_table(&["ID", "STATUS", "MODE", "ATTEMPT", "START", "END"]);
    for r in &page.rollouts {
        table.add_row(vec![
            r.rollout_id.clone(),
            pb::RolloutStatus::name_of(r.status),
            or_dash(mode_name(r.mode).as_deref()),
            r.attempt.as_ref().map_or_else(
                || "-".to_owned(),
                |a| {
                    format!(
                        "#{} {}",
                        a.sequence_id,
                        pb::AttemptStatus::name_of(a.status)
                    )
                },
            ),
            time_cell(r.start_time.as_ref()),
            time_cell(r.end_time.as_ref()),
        ]);
    }
    print_list(
        table,
        "rollouts",
        page.rollouts.len(),
        page.offset,
        page.total,
    )?;
    Ok(())
}

pub(super) async fn rollout(mut s: Session, args: RolloutArgs) -> ClientResult {
    let rollout = s
        .client
        .get_rollout(pb::GetRolloutRequest {
            rollout_id: args.rollout_id.clone(),
        })
        .await?
        .into_inner()
        .rollout
        .unwrap_or_default();
    let attempts = s
        .client
        .query_attempts(pb::QueryAttemptsRequest {
            rollout_id: args.rollout_id,
            page: None,
        })
        .await?
        .into_inner()
        .attempts;
    if s.json {
        let mut value = rollout_json(&rollout);
        value["attempts"] = attempts.iter().map(attempt_json).collect();
        return print_json(&value);
    }
    out!("{}", details(rollout_rows(&rollout, false)));
    if attempts.is_empty() {
        out!("\nno attempts");
    } else {
        out!("\nattempts:\n{}", render(attempts_table(&attempts)));
    }
    Ok(())
}

pub(super) async fn attempts(mut s: Session, args: AttemptsArgs) -> ClientResult {
    let page = s
        .client
        .query_attempts(pb::QueryAttemptsRequest {
            rollout_id: args.rollout_id,
            page: Some(page_request(args.page)),
        })
        .await?
        .into_inner();
    if s.json {
        let items = page.attempts.iter().map(attempt_json).collect();
        return print_json(&page_json(
            "attempts",
            items,
            page.limit,
            page.offset,
            page.total,
        ));
    }
    let table = attempts_table(&page.attempts);
    print_list(
        table,
        "attempts",
        page.attempts.len(),
        page.offset,
        page.total,
    )?;
    Ok(())
}

pub(super) async fn spans(mut s: Session, args: SpansArgs) -> ClientResult {
    let page = s
        .client
        .query_spans(pb::QuerySpansRequest {
            rollout_id: args.rollout_id,
            attempt_id: args.attempt,
            name_contains: args.name_contains,
            page: Some(page_request(args.page)),
            ..Default::default()
        })
        .await?
        .into_inner();
    if s.json {
        let items = page.spans.iter().map(span_json).collect();
        return print_json(&page_json(
            "spans",
            items,
            page.limit,
            page.offset,
            page.total,
        ));
    }
    let mut table = list_table(&["SEQ", "NAME", "SPAN ID", "PARENT", "ATTEMPT", "DURATION"]);
    for span in &page.spans {
        table.add_row(vec![
            span.sequence_id.unwrap_or_default().to_string(),
            span.name.clone(),
            span.span_id.clone(),
            span.parent_id.clone().unwrap_or_else(|| "-".to_owned()),
            span.attempt_id.clone(),
            span_duration(span),
        ]);
    }
    print_list(table, "spans", page.spans.len(), page.offset, page.total)?;
    Ok(())
}

pub(super) async fn resources(mut s: Session, args: ResourcesArgs) -> ClientResult {
    let shown = match (args.resources_id, args.latest) {
        (Some(resources_id), _) => {
            s.client
                .get_resources(pb::GetResourcesRequest { resources_id })
                .await?
                .into_inner()
                .resources
        }
        (None, true) => {
            s.client
                .get_latest_resources(pb::GetLatestResourcesRequest {})
                .await?
                .into_inner()
                .resources
        }
        (None, false) => return list_resources(s).await,
    };
    match shown {
        Some(resources) if s.json => print_json(&resources_json(&resources)),
        Some(resources) => {
            out!(
                "{}",
                details(vec![
                    ("resources", resources.resources_id.clone()),
                    ("version", resources.version.to_string()),
                    ("created", time_cell(resources.create_time.as_ref())),
                    ("updated", time_cell(resources.update_time.as_ref())),
                    ("content", pretty(&json_text(&resources.resources_json))),
                ])
            );
            Ok(())
        }
        None if s.json => print_json(&Value::Null),
        None => {
            out!("no resources");
            Ok(())
        }
    }
}

async fn list_resources(mut s: Session) -> ClientResult {
    let page = s
        .client
        .query_resources(pb::QueryResourcesRequest::default())
        .await?
        .into_inner();
    if s.json {
        let items = page.resources.iter().map(resources_json).collect();
        return print_json(&page_json(
            "resources",
            items,
            page.limit,
            page.offset,
            page.total,
        ));
    }
    let mut table = list_table(&["ID", "VERSION", "NAMES", "CREATED", "UPDATED"]);
    for r in &page.resources {
        let names = match json_text(&r.resources_json) {
            Value::Object(map) => map.keys().cloned().collect::<Vec<_>>().join(", "),
            _ => "-".to_owned(),
        };
        table.add_row(vec![
            r.resources_id.clone(),
            r.version.to_string(),
            names,
            time_cell(r.create_time.as_ref()),
            time_cell(r.update_time.as_ref()),
        ]);
    }
    print_list(
        table,
        "resources",
        page.resources.len(),
        page.offset,
        page.total,
    )?;
    Ok(())
}

pub(super) async fn workers(mut s: Session, args: WorkersArgs) -> ClientResult {
    if let Some(worker_id) = args.worker_id {
        let worker = s
            .client
            .get_worker(pb::GetWorkerRequest { worker_id })
            .await?
            .into_inner()
            .worker
            .unwrap_or_default();
        if s.json {
            return print_json(&worker_json(&worker));
        }
        out!(
            "{}",
            details(vec![
                ("worker", worker.worker_id.clone()),
                ("status", pb::WorkerStatus::name_of(worker.status)),
                ("rollout", or_dash(worker.current_rollout_id.as_deref())),
                ("attempt", or_dash(worker.current_attempt_id.as_deref())),
                (
                    "last heartbeat",
                    time_cell(worker.last_heartbeat_time.as_ref())
                ),
                ("last dequeue", time_cell(worker.last_dequeue_time.as_ref())),
                ("last busy", time_cell(worker.last_busy_time.as_ref())),
                ("last idle", time_cell(worker.last_idle_time.as_ref())),
                ("heartbeat stats", worker.heartbeat_stats_json.clone()),
            ])
        );
        return Ok(());
    }
    let page = s
        .client
        .query_workers(pb::QueryWorkersRequest::default())
        .await?
        .into_inner();
    if s.json {
        let items = page.workers.iter().map(worker_json).collect();
        return print_json(&page_json(
            "workers",
            items,
            page.limit,
            page.offset,
            page.total,
        ));
    }
    let mut table = list_table(&[
        "ID",
        "STATUS",
        "ROLLOUT",
        "ATTEMPT",
        "LAST HEARTBEAT",
        "LAST DEQUEUE",
    ]);
    for w in &page.workers {
        table.add_row(vec![
            w.worker_id.clone(),
            pb::WorkerStatus::name_of(w.status),
            or_dash(w.current_rollout_id.as_deref()),
            or_dash(w.current_attempt_id.as_deref()),
            time_cell(w.last_heartbeat_time.as_ref()),
            time_cell(w.last_dequeue_time.as_ref()),
        ]);
    }
    print_list(
        table,
        "workers",
        page.workers.len(),
        page.offset,
        page.total,
    )?;
    Ok(())
}

pub(super) async fn stats(mut s: Session) -> ClientResult {
    let stats = s
        .client
        .get_statistics(pb::GetStatisticsRequest {})
        .await?
        .into_inner();
    if s.json {
        return print_json(&json!({
            "name": stats.name,
            "total_rollouts": stats.total_rollouts,
            "queued_rollouts": stats.queued_rollouts,
            "total_attempts": stats.total_attempts,
            "total_spans": stats.total_spans,
            "total_span_bytes": stats.total_span_bytes,
            "evicted_rollouts": stats.evicted_rollouts,
            "evicted_spans": stats.evicted_spans,
            "evicted_span_bytes": stats.evicted_span_bytes,
            "total_resources": stats.total_resources,
            "total_workers": stats.total_workers,
            "uptime_seconds": stats.uptime_seconds,
            "rollouts_by_status": stats.rollouts_by_status,
            "attempts_by_status": stats.attempts_by_status,
            "oldest_queued_time": stats.oldest_queued_time.as_ref().map(|t| time_cell(Some(t))),
        }));
    }
    out!(
        "{}",
        details(vec![
            ("backend", stats.name.clone()),
            (
                "rollouts",
                with_statuses(stats.total_rollouts, &stats.rollouts_by_status),
            ),
            (
                "queued",
                format!(
                    "{} (head since {})",
                    stats.queued_rollouts,
                    time_cell(stats.oldest_queued_time.as_ref())
                ),
            ),
            (
                "attempts",
                with_statuses(stats.total_attempts, &stats.attempts_by_status),
            ),
            ("spans", stats.total_spans.to_string()),
            ("span bytes", stats.total_span_bytes.to_string()),
            (
                "evicted",
                format!(
                    "{} spans ({} bytes) of {} rollouts",
                    stats.evicted_spans, stats.evicted_span_bytes, stats.evicted_rollouts
                ),
            ),
            ("resources", stats.total_resources.to_string()),
            ("workers", stats.total_workers.to_string()),
            ("uptime", format!("{:.1}s", stats.uptime_seconds)),
        ])
    );
    Ok(())
}
