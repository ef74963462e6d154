//! Text output: aligned tables and labelled details.

use comfy_table::{Table, presets};
use serde_json::Value;

use super::error::ClientResult;
use super::json::mode_name;
use crate::connection::ShortName;
use lightning_store_proto as pb;

pub(super) fn list_table(header: &[&str]) -> Table {
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_header(header.to_vec());
    table
}

/// Renders labelled values as two aligned columns.
pub(super) fn details(rows: Vec<(&str, String)>) -> String {
    let mut table = Table::new();
    table.load_preset(presets::NOTHING);
    for (label, value) in rows {
        table.add_row(vec![label.to_owned(), value]);
    }
    render(table)
}

/// Renders a table with two spaces between columns and no padding at the
/// start or end of lines.
pub(super) fn render(mut table: Table) -> String {
    for column in table.column_iter_mut() {
        column.set_padding((0, 2));
    }
    table
        .lines()
        .map(|line| line.trim_end().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Prints a list table, or a line saying the list is empty, with a note
/// when the page shows only part of the matches.
pub(super) fn print_list(
    table: Table,
    noun: &str,
    shown: usize,
    offset: i64,
    total: i64,
) -> ClientResult {
    if shown == 0 {
        if total == 0 {
            out!("no {noun}");
        } else {
            out!("no {noun} at offset {offset} ({total} in total)");
        }
        return Ok(());
    }
    out!("{}", render(table));
    if shown as i64 != total {
        let first = offset + 1;
        out!(
            "showing {first}-{} of {total} {noun}",
            first + shown as i64 - 1
        );
    }
    Ok(())
}

pub(super) fn rollout_rows(r: &pb::Rollout, with_attempt: bool) -> Vec<(&'static str, String)> {
    let config = r.config.clone().unwrap_or_default();
    let retry = config
        .retry_condition
        .iter()
        .map(|&s| pb::AttemptStatus::name_of(s))
        .collect::<Vec<_>>()
        .join(", ");
    let seconds = |value: Option<f64>| value.map_or_else(|| "-".to_owned(), |v| format!("{v}s"));
    let mut rows = vec![
        ("rollout", r.rollout_id.clone()),
        ("status", pb::RolloutStatus::name_of(r.status)),
        ("mode", or_dash(mode_name(r.mode).as_deref())),
        ("resources", or_dash(r.resources_id.as_deref())),
        ("start", time_cell(r.start_time.as_ref())),
        ("end", time_cell(r.end_time.as_ref())),
        ("max attempts", config.max_attempts.unwrap_or(1).to_string()),
        (
            "retry on",
            or_dash(Some(retry.as_str()).filter(|r| !r.is_empty())),
        ),
        ("timeout", seconds(config.timeout_seconds)),
        ("unresponsive", seconds(config.unresponsive_seconds)),
        ("input", r.input_json.clone()),
        ("metadata", r.metadata_json.clone()),
    ];
    if with_attempt && let Some(a) = &r.attempt {
        rows.push(("attempt", a.attempt_id.clone()));
        rows.push((
            "attempt status",
            format!(
                "#{} {}",
                a.sequence_id,
                pb::AttemptStatus::name_of(a.status)
            ),
        ));
        rows.push(("worker", or_dash(a.worker_id.as_deref())));
    }
    rows
}

pub(super) fn attempt_rows(a: &pb::Attempt) -> Vec<(&'static str, String)> {
    vec![
        ("attempt", a.attempt_id.clone()),
        ("rollout", a.rollout_id.clone()),
        ("sequence", a.sequence_id.to_string()),
        ("status", pb::AttemptStatus::name_of(a.status)),
        ("worker", or_dash(a.worker_id.as_deref())),
        ("start", time_cell(a.start_time.as_ref())),
        ("end", time_cell(a.end_time.as_ref())),
        ("last heartbeat", time_cell(a.last_heartbeat_time.as_ref())),
        ("metadata", a.metadata_json.clone()),
    ]
}

pub(super) fn attempts_table(attempts: &[pb::Attempt]) -> Table {
    let mut table = list_table(&["SEQ", "ID", "STATUS", "WORKER", "START", "END"]);
    for a in attempts {
        table.add_row(vec![
            a.sequence_id.to_string(),
            a.attempt_id.clone(),
            pb::AttemptStatus::name_of(a.status),
            or_dash(a.worker_id.as_deref()),
            time_cell(a.start_time.as_ref()),
            time_cell(a.end_time.as_ref()),
        ]);
    }
    table
}

pub(super) fn span_duration(span: &pb::Span) -> String {
    match (&span.start_time, &span.end_time) {
        (Some(start), Some(end)) => {
            let nanos = (i128::from(end.seconds) - i128::from(start.seconds)) * 1_000_000_000
                + i128::from(end.nanos - start.nanos);
            format!("{:.3}s", nanos as f64 / 1e9)
        }
        _ => "-".to_owned(),
    }
}

pub(super) fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// Formats a total with its non-zero per-status counts, e.g. `3 (queuing 2, succeeded 1)`.
pub(super) fn with_statuses(
    total: i64,
    by_status: &std::collections::HashMap<String, i64>,
) -> String {
    let mut parts: Vec<_> = by_status.iter().filter(|(_, n)| **n > 0).collect();
    if parts.is_empty() {
        return total.to_string();
    }
    parts.sort();
    let parts: Vec<String> = parts.iter().map(|(s, n)| format!("{s} {n}")).collect();
    format!("{total} ({})", parts.join(", "))
}

pub(super) fn or_dash(value: Option<&str>) -> String {
    value.unwrap_or("-").to_owned()
}

/// Formats a time as RFC 3339 UTC to the second (`2023-11-14T22:13:20Z`).
pub(super) fn time_cell(t: Option<&prost_types::Timestamp>) -> String {
    t.map_or_else(
        || "-".to_owned(),
        |t| {
            prost_types::Timestamp {
                seconds: t.seconds,
                nanos: 0,
            }
            .to_string()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_show_whole_utc_seconds() {
        let at = |seconds, nanos| time_cell(Some(&prost_types::Timestamp { seconds, nanos }));
        assert_eq!(at(0, 0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400, 999_999_999), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_700_000_000, 1), "2023-11-14T22:13:20Z");
        assert_eq!(at(-1, 0), "1969-12-31T23:59:59Z");
        assert_eq!(time_cell(None), "-");
    }
}
