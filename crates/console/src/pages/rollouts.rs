//! The Rollouts page: the store's rollouts filtered, sorted and paged by
//! the server, every choice in the URL (a GET form), so that a page can be
//! bookmarked and shared.

use askama::Template;

use crate::context::Sources;
use crate::format::status_class;
use crate::format::{self, ShownTime};
use crate::rendered::render_error;
use crate::rendered::{PageError, Rendered};
use crate::url::{Links, PREFIX, query_get, query_pairs, query_value};
use lightning_store_core::error::StoreResult;
use lightning_store_core::model::{RolloutMode, RolloutStatus, RolloutView};
use lightning_store_core::query::{Page, RewardRange, RolloutFilter, TimeRange, WithoutRowsFilter};
use lightning_store_core::training::NoRowsReason;

/// Rollouts on one page.
const PER_PAGE: usize = 50;

/// The fields the page sorts by, with their column names.
const SORTS: [(&str, &str); 5] = [
    ("start_time", "Created"),
    ("end_time", "Ended"),
    ("status", "Status"),
    ("rollout_id", "Rollout"),
    ("reward", "Reward"),
];

/// What the Rollouts page shows, as its URL says.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct RolloutsQuery {
    pub statuses: Vec<RolloutStatus>,
    /// Modes; `None` stands for "no mode".
    pub modes: Vec<Option<RolloutMode>>,
    /// A part of the rollout id.
    pub id_contains: Option<String>,
    /// Rollouts with an attempt on this worker.
    pub worker: Option<String>,
    /// Rollouts of this resources id.
    pub resources: Option<String>,
    /// Rollouts whose first model call (agent-lightning 1.x) this model
    /// version served.
    pub model_version: Option<i64>,
    /// Created at or after (an `<input type="datetime-local">` value, UTC).
    pub from: Option<String>,
    /// Created before.
    pub until: Option<String>,
    /// Ended at or after (as `from`).
    pub ended_from: Option<String>,
    /// Ended before.
    pub ended_until: Option<String>,
    /// The least final reward (a number, as typed).
    pub reward_min: Option<String>,
    /// The greatest final reward.
    pub reward_max: Option<String>,
    /// 1.x rollouts that gave no training row (for a reason).
    pub without_rows: Option<WithoutRowsFilter>,
    /// The sort field (one of [`SORTS`]) and whether it descends.
    pub sort: (String, bool),
    /// The page, from 1.
    pub page: usize,
}

impl RolloutsQuery {
    /// Parses the page's query string; unknown names are ignored, bad
    /// values refused with a message for the page.
    pub fn parse(query: &str) -> Result<Self, String> {
        let pairs = query_pairs(query);
        let mut parsed = RolloutsQuery {
            sort: ("start_time".to_owned(), true),
            page: 1,
            ..RolloutsQuery::default()
        };
        for (name, value) in &pairs {
            match name.as_str() {
                "status" => parsed.statuses.push(
                    RolloutStatus::parse(value)
                        .ok_or_else(|| format!("unknown rollout status {value:?}"))?,
                ),
                "mode" if value == "none" => parsed.modes.push(None),
                "mode" => parsed.modes.push(Some(
                    RolloutMode::parse(value).ok_or_else(|| format!("unknown mode {value:?}"))?,
                )),
                _ => {}
            }
        }
        parsed.statuses.sort();
        parsed.statuses.dedup();
        parsed.modes.sort();
        parsed.modes.dedup();
        parsed.id_contains = query_get(&pairs, "q").map(str::to_owned);
        parsed.worker = query_get(&pairs, "worker").map(str::to_owned);
        parsed.resources = query_get(&pairs, "resources").map(str::to_owned);
        if let Some(text) = query_get(&pairs, "model_version") {
            let version = text.parse().map_err(|_| {
                format!("model_version: {text:?} is not a model version (an integer)")
            })?;
            parsed.model_version = Some(version);
        }
        for (field, value) in [
            ("from", &mut parsed.from),
            ("until", &mut parsed.until),
            ("ended_from", &mut parsed.ended_from),
            ("ended_until", &mut parsed.ended_until),
        ] {
            if let Some(text) = query_get(&pairs, field) {
                format::parse_local_time(text)
                    .ok_or_else(|| format!("{field}: {text:?} is not a date and time"))?;
                *value = Some(text.to_owned());
            }
        }
        for (field, value) in [
            ("reward_min", &mut parsed.reward_min),
            ("reward_max", &mut parsed.reward_max),
        ] {
            if let Some(text) = query_get(&pairs, field) {
                parse_reward(text).ok_or_else(|| format!("{field}: {text:?} is not a number"))?;
                *value = Some(text.to_owned());
            }
        }
        parsed.reward_range().map_err(|error| error.to_string())?;
        if let Some(text) = query_get(&pairs, "without_rows") {
            let without = match text {
                "any" => Some(WithoutRowsFilter::AnyReason),
                _ => NoRowsReason::parse(text).map(WithoutRowsFilter::Reason),
            };
            parsed.without_rows = Some(without.ok_or_else(|| {
                format!("without_rows: {text:?} is neither \"any\" nor a reason")
            })?);
        }
        if let Some(sort) = query_get(&pairs, "sort") {
            let (field, descending) = match sort.strip_prefix('-') {
                Some(field) => (field, true),
                None => (sort, false),
            };
            if !SORTS.iter().any(|(name, _)| *name == field) {
                return Err(format!("cannot sort by {field:?}"));
            }
            parsed.sort = (field.to_owned(), descending);
        }
        if let Some(page) = query_get(&pairs, "page") {
            parsed.page = page
                .parse::<usize>()
                .ok()
                .filter(|page| *page >= 1)
                .ok_or_else(|| format!("page {page:?} is not a page number"))?;
        }
        Ok(parsed)
    }

    /// Returns the URL of the export of the rollouts the page's filters
    /// select (`super::export`).
    fn export_url(&self, links: &Links) -> String {
        let mut parts = self.filter_parts();
        parts.push("layout=rollouts".to_owned());
        links.to(&format!("{PREFIX}/export?{}", parts.join("&")))
    }

    /// Returns the page's URL with the sort or the page changed.
    pub(super) fn url(
        &self,
        links: &Links,
        sort: Option<(&str, bool)>,
        page: Option<usize>,
    ) -> String {
        let mut parts = self.filter_parts();
        let (field, descending) = sort.unwrap_or((&self.sort.0, self.sort.1));
        parts.push(format!("sort={}{field}", if descending { "-" } else { "" }));
        let page = page.unwrap_or(self.page);
        if page > 1 {
            parts.push(format!("page={page}"));
        }
        links.to(&format!("{PREFIX}/rollouts?{}", parts.join("&")))
    }

    /// Returns the query string's parts of the filters.
    fn filter_parts(&self) -> Vec<String> {
        let mut parts = Vec::new();
        for status in &self.statuses {
            parts.push(format!("status={status}"));
        }
        for mode in &self.modes {
            parts.push(format!("mode={}", mode.map_or("none", RolloutMode::as_str)));
        }
        for (name, value) in [
            ("q", &self.id_contains),
            ("worker", &self.worker),
            ("resources", &self.resources),
            ("from", &self.from),
            ("until", &self.until),
            ("ended_from", &self.ended_from),
            ("ended_until", &self.ended_until),
            ("reward_min", &self.reward_min),
            ("reward_max", &self.reward_max),
        ] {
            if let Some(value) = value {
                parts.push(format!("{name}={}", query_value(value)));
            }
        }
        if let Some(version) = self.model_version {
            parts.push(format!("model_version={version}"));
        }
        if let Some(without) = self.without_rows {
            parts.push(format!("without_rows={}", without_rows_value(without)));
        }
        parts
    }

    /// Returns the rollout filter of the page's filters.
    pub fn filter(&self) -> RolloutFilter {
        let time = |text: &Option<String>| text.as_deref().and_then(format::parse_local_time);
        RolloutFilter {
            status_in: (!self.statuses.is_empty()).then(|| self.statuses.clone()),
            rollout_id_contains: self.id_contains.clone(),
            mode_in: (!self.modes.is_empty()).then(|| self.modes.clone()),
            start_time: TimeRange {
                from: time(&self.from),
                until: time(&self.until),
            },
            end_time: TimeRange {
                from: time(&self.ended_from),
                until: time(&self.ended_until),
            },
            worker_id: self.worker.clone(),
            resources_id: self.resources.clone(),
            model_version: self.model_version,
            without_rows: self.without_rows,
            // Checked when parsed.
            reward: self.reward_range().unwrap_or_default(),
            ..RolloutFilter::default()
        }
    }

    /// Returns the reward range of the page's bounds.
    fn reward_range(&self) -> StoreResult<RewardRange> {
        let bound = |text: &Option<String>| text.as_deref().and_then(parse_reward);
        RewardRange::new(bound(&self.reward_min), bound(&self.reward_max))
    }
}

/// Returns the URL's value of a filter of rollouts without training rows.
fn without_rows_value(without: WithoutRowsFilter) -> &'static str {
    match without {
        WithoutRowsFilter::AnyReason => "any",
        WithoutRowsFilter::Reason(reason) => reason.as_str(),
    }
}

/// Parses a reward bound as typed (a finite number).
fn parse_reward(text: &str) -> Option<f64> {
    text.parse::<f64>().ok().filter(|value| value.is_finite())
}

struct Row {
    href: String,
    rollout_id: String,
    status: RolloutStatus,
    class: &'static str,
    reward: String,
    mode: String,
    created: ShownTime,
    ended: Option<ShownTime>,
    duration: String,
    attempt: String,
    worker: String,
    resources: String,
}

struct Column {
    label: &'static str,
    href: String,
    /// `ascending`, `descending` or `none`, for `aria-sort`.
    sorted: &'static str,
}

struct Choice {
    value: &'static str,
    checked: bool,
}

/// An option of a `<select>`.
struct SelectOption {
    value: &'static str,
    label: String,
    selected: bool,
}

#[derive(Template)]
#[template(path = "rollouts_filters.html")]
struct Filters<'a> {
    base: &'a str,
    query: &'a RolloutsQuery,
    statuses: Vec<Choice>,
    modes: Vec<Choice>,
    /// The choices of the training rows filter, the first none.
    without_rows: Vec<SelectOption>,
}

#[derive(Template)]
#[template(path = "rollouts.html")]
struct RolloutsPage {
    /// The export of the filters' ended rollouts.
    export: String,
    columns: Vec<Column>,
    rows: Vec<Row>,
    total: String,
    first: usize,
    last: usize,
    previous: Option<String>,
    next: Option<String>,
}

/// Returns the choices of the training rows filter, `chosen` selected.
fn without_rows_options(chosen: Option<WithoutRowsFilter>) -> Vec<SelectOption> {
    let filters = [None, Some(WithoutRowsFilter::AnyReason)]
        .into_iter()
        .chain(NoRowsReason::ALL.map(|r| Some(WithoutRowsFilter::Reason(r))));
    filters
        .map(|filter| SelectOption {
            value: filter.map_or("", without_rows_value),
            label: match filter {
                None => "no condition".to_owned(),
                Some(WithoutRowsFilter::AnyReason) => "gave none".to_owned(),
                Some(WithoutRowsFilter::Reason(reason)) => {
                    format!("gave none: {}", format::no_rows_reason(reason))
                }
            },
            selected: filter == chosen,
        })
        .collect()
}

/// Renders the Rollouts page.
pub async fn render(sources: &Sources, query: &RolloutsQuery) -> Result<Rendered, PageError> {
    let links = &sources.links;
    let page = Page {
        sort_by: Some(query.sort.0.clone()),
        descending: query.sort.1,
        limit: Some(PER_PAGE),
        offset: (query.page - 1) * PER_PAGE,
    };
    let read = sources.engine.rollouts_page(&query.filter(), &page).await?;
    let (found, now) = (read.rollouts, read.now);
    let rows: Vec<Row> = found
        .items
        .iter()
        .map(|view| {
            let reward = read.rewards.get(&view.rollout.rollout_id).copied();
            row(view, reward, now, links)
        })
        .collect();
    let first = page.offset + 1;
    let last = page.offset + rows.len();
    let columns = SORTS
        .iter()
        .map(|(field, label)| {
            let current = query.sort.0 == *field;
            // A click on the sorted column reverses it; another sorts it descending.
            let descending = !(current && query.sort.1);
            Column {
                label,
                href: query.url(links, Some((field, descending)), Some(1)),
                sorted: match (current, query.sort.1) {
                    (false, _) => "none",
                    (true, true) => "descending",
                    (true, false) => "ascending",
                },
            }
        })
        .collect();
    let fixed = Filters {
        base: links.base(),
        query,
        statuses: RolloutStatus::ALL
            .iter()
            .map(|status| Choice {
                value: status.as_str(),
                checked: query.statuses.contains(status),
            })
            .collect(),
        modes: [
            ("train", Some(RolloutMode::Train)),
            ("val", Some(RolloutMode::Val)),
            ("test", Some(RolloutMode::Test)),
            ("none", None),
        ]
        .into_iter()
        .map(|(value, mode)| Choice {
            value,
            checked: query.modes.contains(&mode),
        })
        .collect(),
        without_rows: without_rows_options(query.without_rows),
    }
    .render()
    .map_err(render_error)?;
    let html = RolloutsPage {
        export: query.export_url(links),
        columns,
        total: format::count(found.total as u64),
        first,
        last,
        previous: (query.page > 1).then(|| query.url(links, None, Some(query.page - 1))),
        next: (last < found.total).then(|| query.url(links, None, Some(query.page + 1))),
        rows,
    }
    .render()
    .map_err(render_error)?;
    Ok(Rendered {
        title: "Rollouts".to_owned(),
        fixed,
        html,
        waiting: false,
    })
}

fn row(
    view: &RolloutView,
    reward: Option<f64>,
    now: lightning_store_core::model::Timestamp,
    links: &Links,
) -> Row {
    let rollout = &view.rollout;
    let attempt = view.attempt.as_ref();
    Row {
        href: links.rollout(&rollout.rollout_id),
        rollout_id: rollout.rollout_id.clone(),
        status: rollout.status,
        class: status_class(rollout.status),
        reward: format::reward(reward),
        mode: rollout.mode.map_or_else(String::new, |m| m.to_string()),
        created: format::time(rollout.start_time),
        ended: rollout.end_time.map(format::time),
        duration: format::duration(format::between(
            rollout.start_time,
            rollout.end_time.unwrap_or(now),
        )),
        attempt: attempt.map_or_else(String::new, |a| format!("#{} {}", a.sequence_id, a.status)),
        worker: attempt
            .and_then(|a| a.worker_id.clone())
            .unwrap_or_default(),
        resources: rollout.resources_id.clone().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_holds_every_filter_and_round_trips() {
        let query = RolloutsQuery::parse(
            "status=running&status=queuing&mode=train&mode=none&q=a%26b&worker=w%201\
             &from=2026-11-28T10:00&ended_until=2026-11-28T11:30:05&sort=end_time&page=3\
             &live_after=9&model_version=7&without_rows=no_token_ids",
        )
        .unwrap();
        assert_eq!(
            query.statuses,
            [RolloutStatus::Queuing, RolloutStatus::Running]
        );
        assert_eq!(query.modes, [None, Some(RolloutMode::Train)]);
        assert_eq!(query.id_contains.as_deref(), Some("a&b"));
        assert_eq!(query.sort, ("end_time".to_owned(), false));
        assert_eq!(query.page, 3);
        let filter = query.filter();
        assert_eq!(filter.model_version, Some(7));
        assert_eq!(
            filter.without_rows,
            Some(WithoutRowsFilter::Reason(NoRowsReason::NoTokenIds))
        );
        assert_eq!(filter.end_time.from, None);
        assert_eq!(
            filter.end_time.until,
            format::parse_local_time("2026-11-28T11:30:05")
        );
        let again = RolloutsQuery::parse(
            query
                .url(&Links::default(), None, None)
                .split_once('?')
                .unwrap()
                .1,
        )
        .unwrap();
        assert_eq!(again, query);
        assert!(RolloutsQuery::parse("status=done").is_err());
        assert!(RolloutsQuery::parse("sort=input").is_err());
        assert!(RolloutsQuery::parse("page=0").is_err());
        assert!(RolloutsQuery::parse("from=tomorrow").is_err());
        assert!(RolloutsQuery::parse("ended_from=later").is_err());
        assert!(RolloutsQuery::parse("reward_min=high").is_err());
        assert!(RolloutsQuery::parse("reward_max=NaN").is_err());
        assert!(RolloutsQuery::parse("reward_min=1&reward_max=0.5").is_err());
        assert!(RolloutsQuery::parse("model_version=1.5").is_err());
        assert!(RolloutsQuery::parse("without_rows=some").is_err());
        assert_eq!(
            RolloutsQuery::parse("without_rows=any")
                .unwrap()
                .without_rows,
            Some(WithoutRowsFilter::AnyReason)
        );
        let rewarded = RolloutsQuery::parse("reward_min=0.25&reward_max=&sort=-reward").unwrap();
        assert_eq!(rewarded.reward_max, None, "an empty field is no bound");
        assert_eq!(rewarded.sort, ("reward".to_owned(), true));
        assert_eq!(
            rewarded.filter().reward,
            RewardRange::new(Some(0.25), None).unwrap()
        );
        let default = RolloutsQuery::parse("").unwrap();
        assert_eq!(
            default.sort,
            ("start_time".to_owned(), true),
            "newest first"
        );
    }
}
