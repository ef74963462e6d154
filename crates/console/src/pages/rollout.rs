//! A rollout's page: its input, config and metadata; its attempts as a
//! timeline (start, last heartbeat, end, status, worker, why it ended);
//! its spans as a waterfall tree across attempts (parents before their
//! children, durations, status, errors marked, attributes and events
//! on demand); its reward. For an agent-lightning 1.x rollout, its
//! `model_request` events as a conversation, its triplets, and why it
//! gives the trainer no rows. For a rollout that waits, its place in the
//! queue and why it is not running.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use askama::Template;

use super::conversation::{self, Conversation};
use super::viewer::Actions;
use crate::charts::Axis;
use crate::context::Sources;
use crate::format::status_class;
use crate::format::{self, ShownTime};
use crate::rendered::render_error;
use crate::rendered::{PageError, Rendered};
use crate::url::{PREFIX, path_segment, query_value};
use lightning_store_core::agl1::Agl1Event;
use lightning_store_core::agl1::diagnosis::{Diagnosis, Finding};
use lightning_store_core::agl1::events::{
    self as agl1_events, EventFormat, EventQuery, MODEL_REQUEST,
};
use lightning_store_core::ids::RolloutId;
use lightning_store_core::model::{
    Attempt, AttemptStatus, RolloutConfig, RolloutView, Seconds, Span, SpanStatusCode, Timestamp,
};
use lightning_store_core::pages::{self, Agl1Part, RolloutLimits};
use lightning_store_core::reward;
use lightning_store_core::waiting::WaitReason;

/// What the page reads at most: attempts, spans (the waterfall), 1.x
/// events (the conversation and triplets; the diagnosis reads them all),
/// and the workers read to say why a waiting rollout waits. The JSON
/// download has everything.
pub const LIMITS: RolloutLimits = RolloutLimits {
    attempts: 1_000,
    spans: 1_000,
    events: 1_000,
    workers: 1_000,
};

/// Deepest indentation of the waterfall (deeper spans stay at this depth).
const MAX_DEPTH: usize = 12;

struct Summary {
    status: String,
    class: &'static str,
    mode: String,
    resources: Option<(String, String)>,
    created: ShownTime,
    ended: Option<ShownTime>,
    duration: String,
    cancel: Option<String>,
    download: String,
    agl1: bool,
}

struct RewardView {
    value: String,
    dimensions: Vec<(String, String)>,
    source: String,
}

struct WaitingView {
    place: Option<String>,
    reasons: Vec<String>,
}

struct TimelineRow {
    label: String,
    x: f64,
    width: f64,
    class: &'static str,
    heartbeat: Option<f64>,
    title: String,
}

struct AttemptRow {
    /// The row's element id (the search box links to it).
    key: String,
    number: u32,
    attempt_id: String,
    status: String,
    class: &'static str,
    worker: String,
    started: ShownTime,
    heartbeat: Option<ShownTime>,
    ended: Option<ShownTime>,
    duration: String,
    why: String,
}

struct AttributeRow {
    key: String,
    value: String,
}

struct EventRow {
    name: String,
    offset: String,
    attributes: Vec<AttributeRow>,
}

struct SpanRow {
    /// A stable element id, so that an opened row stays open across updates.
    key: String,
    /// An attempt's heading row, not a span.
    heading: Option<String>,
    depth: usize,
    name: String,
    x: f64,
    width: f64,
    error: bool,
    duration: String,
    status: String,
    sequence_id: i64,
    span_id: String,
    trace_id: String,
    parent_id: String,
    attributes: Vec<AttributeRow>,
    events: Vec<EventRow>,
}

struct TripletRow {
    number: usize,
    model: String,
    prompt_tokens: usize,
    response_tokens: usize,
    log_probs: String,
    status: String,
    kept: bool,
    preview: String,
}

struct Agl1View {
    attempt_id: String,
    error_message: Option<String>,
    conversation: Conversation,
    events_note: Option<String>,
    triplets: Vec<TripletRow>,
    diagnosis: Diagnosis,
    findings: Vec<(bool, String)>,
}

#[derive(Template)]
#[template(path = "rollout.html")]
struct RolloutPage<'a> {
    /// What precedes the namespace's console paths.
    base: &'a str,
    summary: Summary,
    reward: Option<RewardView>,
    waiting: Option<WaitingView>,
    input: String,
    config: Vec<(&'static str, String)>,
    metadata: String,
    timeline: Vec<TimelineRow>,
    timeline_from: String,
    timeline_to: String,
    attempts: Vec<AttemptRow>,
    attempts_note: Option<String>,
    spans: Vec<SpanRow>,
    spans_note: Option<String>,
    agl1: Option<Agl1View>,
}

#[derive(Template)]
#[template(path = "rollout_heading.html")]
struct Heading<'a> {
    base: &'a str,
    rollout_id: &'a str,
}

/// Renders a rollout's page from one engine read.
pub async fn render(
    sources: &Sources,
    rollout_id: &RolloutId,
    actions: Actions,
) -> Result<Rendered, PageError> {
    let free_slots_here = sources
        .dispatcher
        .snapshot()
        .iter()
        .map(|s| s.slots.saturating_sub(s.held.len()))
        .sum();
    let read = sources
        .engine
        .rollout_page(rollout_id, LIMITS, free_slots_here)
        .await?;
    let now = read.now;
    let links = &sources.links;
    let spans = &read.spans.items;
    let spans_note = spans_note(&read);
    let attempts_note = (read.attempts.total > read.attempts.items.len()).then(|| {
        format!(
            "The first {} of {} attempts are shown; the JSON download has them all.",
            read.attempts.items.len(),
            format::count(read.attempts.total as u64)
        )
    });
    let agl1 = match &read.agl1 {
        Some(part) => Some(agl1_view(part)?),
        None => None,
    };
    let waiting = read.waiting.as_ref().map(|waiting| WaitingView {
        place: waiting
            .place
            .map(|p| format!("{} of {}", p.ahead + 1, p.queued)),
        reasons: waiting
            .reasons
            .iter()
            .map(|r| reason_text(r, now))
            .collect(),
    });
    let view = &read.view;
    let rollout = &view.rollout;
    let reward = reward::final_reward(spans.iter().map(|span| span.as_ref()))
        .map(|found| RewardView {
            value: found.value().to_string(),
            dimensions: found
                .dimensions
                .iter()
                .map(|d| (d.name.clone(), d.value.to_string()))
                .collect(),
            source: format!("from span #{}", found.sequence_id),
        })
        .or_else(|| {
            let agl1 = agl1.as_ref()?;
            Some(RewardView {
                value: agl1.diagnosis.reward?.to_string(),
                dimensions: Vec::new(),
                source: "from the last reward event".to_owned(),
            })
        });
    let summary = Summary {
        status: rollout.status.to_string(),
        class: status_class(rollout.status),
        mode: rollout.mode.map_or_else(String::new, |m| m.to_string()),
        resources: rollout.resources_id.as_ref().map(|id| {
            (
                id.clone(),
                links.to(&format!("{PREFIX}/resources?a={}", query_value(id))),
            )
        }),
        created: format::time(rollout.start_time),
        ended: rollout.end_time.map(format::time),
        duration: format::duration(format::between(
            rollout.start_time,
            rollout.end_time.unwrap_or(now),
        )),
        cancel: (actions.cancel && read.cancellable)
            .then(|| format!("{}/cancel", links.rollout(rollout_id))),
        download: links.to(&format!(
            "{PREFIX}/rollouts/{}/download",
            path_segment(rollout_id)
        )),
        agl1: agl1.is_some(),
    };
    let attempts = &read.attempts.items;
    let (timeline, timeline_from, timeline_to) = timeline(view, attempts, now);
    let attempts = attempts
        .iter()
        .map(|attempt| attempt_row(attempt, &rollout.config, now))
        .collect();
    let waiting_now = waiting.is_some();
    let page = RolloutPage {
        base: links.base(),
        summary,
        reward,
        waiting,
        input: format::json(&rollout.input),
        config: config_rows(&rollout.config),
        metadata: format::json(&rollout.metadata),
        timeline,
        timeline_from,
        timeline_to,
        attempts,
        attempts_note,
        spans: waterfall(spans, view, now),
        spans_note,
        agl1,
    };
    Ok(Rendered {
        title: format!("Rollout {rollout_id}"),
        fixed: Heading {
            base: links.base(),
            rollout_id: rollout_id.as_str(),
        }
        .render()
        .map_err(render_error)?,
        html: page.render().map_err(render_error)?,
        waiting: waiting_now,
    })
}

/// Says when the waterfall does not show every span: the retention
/// deleted them, or there are more than it shows.
fn spans_note(read: &pages::RolloutPage) -> Option<String> {
    if read.spans_evicted {
        return Some("The span retention deleted this rollout's spans.".to_owned());
    }
    let spans = &read.spans;
    (spans.total > spans.items.len()).then(|| {
        format!(
            "The first {} of {} spans are shown; the JSON download has them all.",
            spans.items.len(),
            format::count(spans.total as u64)
        )
    })
}

fn agl1_view(part: &Agl1Part) -> Result<Agl1View, PageError> {
    let detail = &part.detail;
    let triplets = agl1_events::present(
        part.events.clone(),
        &EventQuery {
            event_type: Some(MODEL_REQUEST.to_owned()),
            format: EventFormat::Triplet,
            include_routed_experts: false,
        },
    )?
    .iter()
    .enumerate()
    .map(|(index, event)| triplet_row(index + 1, event))
    .collect();
    let findings = part.diagnosis.findings.iter().map(finding_text).collect();
    Ok(Agl1View {
        attempt_id: detail
            .last_attempt_id
            .clone()
            .unwrap_or_else(|| lightning_store_core::agl1::DEFAULT_ATTEMPT_ID.to_owned()),
        error_message: detail.error_message.clone(),
        conversation: conversation::read(&part.events),
        events_note: (part.events_total > part.events.len()).then(|| {
            format!(
                "The first {} of {} events are shown; the JSON download has them all.",
                part.events.len(),
                format::count(part.events_total as u64)
            )
        }),
        triplets,
        diagnosis: part.diagnosis.clone(),
        findings,
    })
}

fn triplet_row(number: usize, event: &Agl1Event) -> TripletRow {
    let data: serde_json::Value = serde_json::from_str(&event.data).unwrap_or_default();
    let ids = |key: &str| data[key].as_array().map_or(0, Vec::len);
    let response = data["response_token_ids"].as_array();
    let failed =
        data["status"] == "error" || data["http_status"].as_i64().is_some_and(|s| s >= 400);
    let kept = !failed && response.is_some_and(|ids| !ids.is_empty());
    let preview: Vec<String> = data["prompt_token_ids"]
        .as_array()
        .map(|ids| ids.iter().take(12).map(ToString::to_string).collect())
        .unwrap_or_default();
    TripletRow {
        number,
        model: data["server"]["model"].as_str().unwrap_or("").to_owned(),
        prompt_tokens: ids("prompt_token_ids"),
        response_tokens: ids("response_token_ids"),
        log_probs: data["response_log_probs"]
            .as_array()
            .map_or_else(|| "none".to_owned(), |p| p.len().to_string()),
        status: data["http_status"].as_i64().map_or_else(
            || data["status"].as_str().unwrap_or("").to_owned(),
            |s| s.to_string(),
        ),
        kept,
        preview: if preview.is_empty() {
            String::new()
        } else {
            format!("[{}…]", preview.join(", "))
        },
    }
}

/// Says a finding in words; `true` for the ones that cost training rows.
fn finding_text(finding: &Finding) -> (bool, String) {
    match finding {
        Finding::NoModelCalls => (
            true,
            "No model call went through the gateway: the agent did not use the rollout's gateway URL (AGL_OPENAI_BASE_URL), or it failed before its first call.".to_owned(),
        ),
        Finding::FailedCalls { calls } => (
            true,
            format!("{calls} model call(s) failed (an error status from the model server): the trainer skips them."),
        ),
        Finding::NoTokenIds { calls } => (
            true,
            format!("{calls} model call(s) came back without response token ids: the model server must return them (vLLM: the gateway asks for return_token_ids; another server may ignore it)."),
        ),
        Finding::NoLogProbs { rows } => (
            false,
            format!("{rows} row(s) have no log-probabilities (logprobs were not asked for, see --gateway-logprobs, or not returned)."),
        ),
        Finding::NoReward => (
            true,
            "No reward event: the rows have no reward (the trainer fills in its default).".to_owned(),
        ),
        Finding::RewardNotANumber { value } => (
            true,
            format!("The last reward event's value is not a number ({value}): the trainer ignores it."),
        ),
        Finding::Failed { error } => (
            true,
            match error {
                Some(error) => format!("The rollout failed: {error}"),
                None => "The rollout failed.".to_owned(),
            },
        ),
        Finding::NotFinished => (
            false,
            "The rollout has not finished: the trainer reads it once it has.".to_owned(),
        ),
    }
}

fn reason_text(reason: &WaitReason, now: Timestamp) -> String {
    match reason {
        WaitReason::InQueue { ahead: 0, .. } => {
            "It is next in the queue: the next worker that asks for work takes it.".to_owned()
        }
        WaitReason::InQueue { ahead, .. } => {
            format!("{ahead} rollout(s) are ahead of it in the queue.")
        }
        WaitReason::WaitsForController => {
            "An agent-lightning 1.x rollout: the 1.x controller starts it (PATCH to running); no worker dequeues it.".to_owned()
        }
        WaitReason::Retry {
            attempts,
            max_attempts,
            last,
        } => format!(
            "Attempt {attempts} of {max_attempts} ended {last}: it waits in the queue to be retried."
        ),
        WaitReason::NoFreeSlot { sessions } => format!(
            "{sessions} worker session(s) are open, but none has a free slot on this server and no worker asked for work lately."
        ),
        WaitReason::NoDequeue { since: None } => {
            "No worker has asked for work yet (no dequeue, no open worker session).".to_owned()
        }
        WaitReason::NoDequeue { since: Some(since) } => format!(
            "No worker has asked for work for {} (no open worker session either).",
            format::duration(format::between(*since, now))
        ),
        WaitReason::GatewayPaused { reason } => match reason {
            Some(reason) => format!("The LLM gateway is paused ({reason}): agents' model calls are refused meanwhile."),
            None => "The LLM gateway is paused: agents' model calls are refused meanwhile.".to_owned(),
        },
    }
}

fn config_rows(config: &RolloutConfig) -> Vec<(&'static str, String)> {
    let seconds =
        |value: Option<Seconds>| value.map_or_else(|| "none".to_owned(), |s| format!("{s} s"));
    vec![
        ("timeout", seconds(config.timeout_seconds)),
        ("unresponsive after", seconds(config.unresponsive_seconds)),
        ("max attempts", config.max_attempts.get().to_string()),
        (
            "retried when an attempt is",
            if config.retry_condition.statuses().is_empty() {
                "never retried".to_owned()
            } else {
                config
                    .retry_condition
                    .statuses()
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        ),
    ]
}

fn attempt_class(status: AttemptStatus) -> &'static str {
    match status {
        AttemptStatus::Preparing | AttemptStatus::Running => "run",
        AttemptStatus::Succeeded => "ok",
        AttemptStatus::Failed | AttemptStatus::Timeout | AttemptStatus::Unresponsive => "bad",
    }
}

/// Says why an attempt ended (or that it has not).
fn why_ended(attempt: &Attempt, config: &RolloutConfig) -> String {
    let seconds = |value: Option<Seconds>| value.map_or_else(String::new, |s| format!(" ({s} s)"));
    match attempt.status {
        AttemptStatus::Preparing => "preparing: the worker has not started it yet".to_owned(),
        AttemptStatus::Running => "running".to_owned(),
        AttemptStatus::Succeeded => "the runner reported success".to_owned(),
        AttemptStatus::Failed => "the runner reported a failure".to_owned(),
        AttemptStatus::Timeout => format!(
            "it ran longer than the rollout's timeout{}",
            seconds(config.timeout_seconds)
        ),
        AttemptStatus::Unresponsive => format!(
            "no heartbeat within the rollout's limit{}, or its worker's session was lost",
            seconds(config.unresponsive_seconds)
        ),
    }
}

fn attempt_row(attempt: &Attempt, config: &RolloutConfig, now: Timestamp) -> AttemptRow {
    AttemptRow {
        key: format!("attempt-{}", hex::encode(&attempt.attempt_id)),
        number: attempt.sequence_id,
        attempt_id: attempt.attempt_id.clone(),
        status: attempt.status.to_string(),
        class: attempt_class(attempt.status),
        worker: attempt.worker_id.clone().unwrap_or_default(),
        started: format::time(attempt.start_time),
        heartbeat: attempt.last_heartbeat_time.map(format::time),
        ended: attempt.end_time.map(format::time),
        duration: format::duration(format::between(
            attempt.start_time,
            attempt.end_time.unwrap_or(now),
        )),
        why: why_ended(attempt, config),
    }
}

/// The attempts on a time axis from the rollout's creation to its end (or now).
fn timeline(
    view: &RolloutView,
    attempts: &[Attempt],
    now: Timestamp,
) -> (Vec<TimelineRow>, String, String) {
    let from = view.rollout.start_time;
    let to = view.rollout.end_time.unwrap_or(now).max(
        attempts
            .iter()
            .filter_map(|a| a.end_time)
            .max()
            .unwrap_or(from),
    );
    let axis = Axis::new(from, to);
    let rows = attempts
        .iter()
        .map(|attempt| {
            let end = attempt.end_time.unwrap_or(now);
            let placed = axis.place(attempt.start_time, end);
            TimelineRow {
                label: format!("#{} (id {})", attempt.sequence_id, attempt.attempt_id),
                x: placed.x,
                width: placed.width,
                class: attempt_class(attempt.status),
                heartbeat: attempt.last_heartbeat_time.map(|t| axis.at(t)),
                title: format!(
                    "attempt #{} (id {}): {} on {}, {}",
                    attempt.sequence_id,
                    attempt.attempt_id,
                    attempt.status,
                    attempt.worker_id.as_deref().unwrap_or("no worker"),
                    format::duration(format::between(attempt.start_time, end))
                ),
            }
        })
        .collect();
    (rows, format::time(from).text, format::time(to).text)
}

/// The spans as a tree, each attempt's under its heading: every span after
/// its parent, siblings by start time; a span whose parent is not stored
/// is a root.
fn waterfall(spans: &[Arc<Span>], view: &RolloutView, now: Timestamp) -> Vec<SpanRow> {
    let times: Vec<Timestamp> = spans
        .iter()
        .flat_map(|s| [s.start_time, s.end_time])
        .flatten()
        .collect();
    let from = times
        .iter()
        .min()
        .copied()
        .unwrap_or(view.rollout.start_time);
    let to = times.iter().max().copied().unwrap_or(now);
    let axis = Axis::new(from, to);
    let mut attempts: Vec<&str> = Vec::new();
    for span in spans {
        if !attempts.contains(&span.attempt_id.as_str()) {
            attempts.push(&span.attempt_id);
        }
    }
    let mut rows = Vec::with_capacity(spans.len() + attempts.len());
    for attempt_id in attempts {
        let members: Vec<&Span> = spans
            .iter()
            .map(AsRef::as_ref)
            .filter(|s| s.attempt_id == attempt_id)
            .collect();
        rows.push(SpanRow::heading(attempt_id, members.len()));
        let ids: HashSet<&str> = members.iter().map(|s| s.span_id.as_str()).collect();
        let mut children: HashMap<&str, Vec<&Span>> = HashMap::new();
        let mut roots = Vec::new();
        for span in &members {
            match span.parent_id.as_deref().filter(|p| ids.contains(p)) {
                Some(parent) => children.entry(parent).or_default().push(span),
                None => roots.push(*span),
            }
        }
        let order = |list: &mut Vec<&Span>| {
            list.sort_by_key(|s| (s.start_time, s.sequence_id));
        };
        order(&mut roots);
        children.values_mut().for_each(order);
        let mut seen = HashSet::new();
        let mut stack: Vec<(&Span, usize)> = roots.into_iter().rev().map(|s| (s, 0)).collect();
        while let Some((span, depth)) = stack.pop() {
            if !seen.insert(span.span_id.as_str()) {
                continue;
            }
            rows.push(SpanRow::of(span, depth, &axis));
            if let Some(kids) = children.get(span.span_id.as_str()) {
                stack.extend(kids.iter().rev().map(|kid| (*kid, depth + 1)));
            }
        }
        // Spans in a cycle of parents are shown too, as roots.
        for span in members {
            if seen.insert(span.span_id.as_str()) {
                rows.push(SpanRow::of(span, 0, &axis));
            }
        }
    }
    rows
}

impl SpanRow {
    fn heading(attempt_id: &str, count: usize) -> Self {
        SpanRow {
            key: format!("spans-{}", hex::encode(attempt_id)),
            heading: Some(format!("Attempt {attempt_id}: {count} spans")),
            depth: 0,
            name: String::new(),
            x: 0.0,
            width: 0.0,
            error: false,
            duration: String::new(),
            status: String::new(),
            sequence_id: 0,
            span_id: String::new(),
            trace_id: String::new(),
            parent_id: String::new(),
            attributes: Vec::new(),
            events: Vec::new(),
        }
    }

    fn of(span: &Span, depth: usize, axis: &Axis) -> Self {
        let start = span.start_time.or(span.end_time).unwrap_or(Timestamp(0));
        let end = span.end_time.unwrap_or(start);
        let placed = axis.place(start, end);
        let error = span.status.code == SpanStatusCode::Error;
        let status = match span.status.code {
            SpanStatusCode::Unset => String::new(),
            SpanStatusCode::Ok => "ok".to_owned(),
            SpanStatusCode::Error => match &span.status.description {
                Some(description) => format!("error: {}", format::cut(description.clone())),
                None => "error".to_owned(),
            },
        };
        SpanRow {
            key: format!(
                "span-{}-{}",
                hex::encode(&span.attempt_id),
                hex::encode(&span.span_id)
            ),
            heading: None,
            depth: depth.min(MAX_DEPTH),
            name: span.name.clone(),
            x: placed.x,
            width: placed.width,
            error,
            duration: match (span.start_time, span.end_time) {
                (Some(start), Some(end)) => format::duration(format::between(start, end)),
                _ => "no end".to_owned(),
            },
            status,
            sequence_id: span.sequence_id,
            span_id: span.span_id.clone(),
            trace_id: span.trace_id.clone(),
            parent_id: span.parent_id.clone().unwrap_or_default(),
            attributes: span
                .attributes
                .iter()
                .map(|kv| AttributeRow {
                    key: kv.key.clone(),
                    value: format::attribute(&kv.value),
                })
                .collect(),
            events: span
                .events
                .iter()
                .map(|event| EventRow {
                    name: event.name.clone(),
                    offset: event.time.map_or_else(String::new, |t| {
                        format!("+{}", format::duration(format::between(start, t)))
                    }),
                    attributes: event
                        .attributes
                        .iter()
                        .map(|kv| AttributeRow {
                            key: kv.key.clone(),
                            value: format::attribute(&kv.value),
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lightning_store_core::model::{Json, Rollout, SpanKind, SpanStatus};

    fn span(id: &str, parent: Option<&str>, start: i64) -> Arc<Span> {
        Arc::new(Span {
            rollout_id: "r".into(),
            attempt_id: "a".into(),
            sequence_id: start,
            trace_id: "t".into(),
            span_id: id.into(),
            parent_id: parent.map(str::to_owned),
            name: id.into(),
            status: SpanStatus::default(),
            attributes: Vec::new(),
            events: Vec::new(),
            links: Vec::new(),
            start_time: Some(Timestamp(start)),
            end_time: Some(Timestamp(start + 10)),
            context: None,
            parent: None,
            resource: None,
            kind: SpanKind::Internal,
            scope: None,
            extra: Default::default(),
        })
    }

    #[test]
    fn the_waterfall_puts_children_under_their_parents() {
        let spans = vec![
            span("child-b", Some("root"), 30),
            span("root", None, 0),
            span("grandchild", Some("child-a"), 15),
            span("child-a", Some("root"), 10),
            span("orphan", Some("missing"), 5),
        ];
        let view = RolloutView {
            rollout: Rollout {
                rollout_id: "r".into(),
                input: Json::Null,
                start_time: Timestamp(0),
                end_time: None,
                mode: None,
                resources_id: None,
                status: lightning_store_core::model::RolloutStatus::Running,
                config: RolloutConfig::default(),
                metadata: Json::Null,
            },
            attempt: None,
        };
        let rows = waterfall(&spans, &view, Timestamp(100));
        let order: Vec<(&str, usize)> = rows
            .iter()
            .filter(|r| r.heading.is_none())
            .map(|r| (r.name.as_str(), r.depth))
            .collect();
        assert_eq!(
            order,
            [
                ("root", 0),
                ("child-a", 1),
                ("grandchild", 2),
                ("child-b", 1),
                ("orphan", 0)
            ]
        );
        assert!(rows[0].heading.is_some());
    }
}
