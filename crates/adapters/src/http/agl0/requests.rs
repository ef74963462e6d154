//! The request models of agent-lightning's store server
//! (`agentlightning/store/client_server.py`), read with pydantic's rules
//! into domain values: queries (from a query string or a JSON body),
//! rollout specifications and the partial updates.
//!
//! Over 600 lines only with its tests: about 600 lines of request models,
//! all read by one validator with pydantic's rules.

use super::super::error::{HttpError, HttpResult};
use super::super::extract::QueryParams;
use super::super::validate::{Loc, Object, Validator};
use lightning_store_core::engine::{AttemptPatch, RolloutPatch};
use lightning_store_core::error::echo;
use lightning_store_core::ids::WorkerId;
use lightning_store_core::model::{
    AttemptStatus, Json, Named, RolloutConfig, RolloutMode, RolloutSpec, RolloutStatus, Timestamp,
    WorkerStatus,
};
use lightning_store_core::model::{MaxAttempts, RetryCondition};
use lightning_store_core::query::{FilterLogic, Page};

/// The worker statuses agent-lightning names (`lost` shows as `unknown`).
const WORKER_STATUSES: &[WorkerStatus] = &[
    WorkerStatus::Idle,
    WorkerStatus::Busy,
    WorkerStatus::Unknown,
];

/// Fields of upstream's models, in order: what `sort_by` is checked against
/// and the list its error names.
pub const ROLLOUT_FIELDS: &[&str] = &[
    "rollout_id",
    "input",
    "start_time",
    "end_time",
    "mode",
    "resources_id",
    "status",
    "config",
    "metadata",
];
/// Fields of `Attempt`.
pub const ATTEMPT_FIELDS: &[&str] = &[
    "rollout_id",
    "attempt_id",
    "sequence_id",
    "start_time",
    "end_time",
    "status",
    "worker_id",
    "last_heartbeat_time",
    "metadata",
];
/// Fields of `Worker`.
pub const WORKER_FIELDS: &[&str] = &[
    "worker_id",
    "status",
    "heartbeat_stats",
    "last_heartbeat_time",
    "last_dequeue_time",
    "last_busy_time",
    "last_idle_time",
    "current_rollout_id",
    "current_attempt_id",
];
/// Fields of `ResourcesUpdate`.
pub const RESOURCES_FIELDS: &[&str] = &[
    "resources_id",
    "create_time",
    "update_time",
    "version",
    "resources",
];
/// Fields of `Span`.
pub const SPAN_FIELDS: &[&str] = &[
    "rollout_id",
    "attempt_id",
    "sequence_id",
    "trace_id",
    "span_id",
    "parent_id",
    "name",
    "status",
    "attributes",
    "events",
    "links",
    "start_time",
    "end_time",
    "context",
    "parent",
    "resource",
];

/// Where a query model's fields come from: a JSON body (`POST .../search`)
/// or the query string (`GET`), whose values are text that pydantic's lax
/// rules convert.
pub enum Source<'a> {
    Body(&'a Object),
    Query(&'a QueryParams),
}

impl Source<'_> {
    /// Returns where `field` sits in the request.
    fn loc(&self, field: &str) -> Loc {
        match self {
            Self::Body(_) => Loc::body().key(field),
            Self::Query(_) => Loc::query(field),
        }
    }

    /// Returns a scalar field (the last value of a repeated query parameter).
    fn get(&self, field: &str) -> Option<Json> {
        match self {
            Self::Body(object) => object.get(field).cloned(),
            Self::Query(params) => params.value(field).map(|v| Json::String(v.to_owned())),
        }
    }

    /// Returns how many values a list field holds (`None` when it is absent
    /// or, in a body, not a list: the validator's to refuse), without
    /// copying them.
    pub(super) fn list_len(&self, field: &str) -> Option<usize> {
        match self {
            Self::Body(object) => object.get(field)?.as_array().map(Vec::len),
            Self::Query(params) => {
                let count = params.values(field).count();
                (count > 0).then_some(count)
            }
        }
    }

    /// Returns a list field (every value of a repeated query parameter).
    fn get_list(&self, field: &str) -> Option<Json> {
        match self {
            Self::Body(object) => object.get(field).cloned(),
            Self::Query(params) => {
                let values: Vec<Json> = params
                    .values(field)
                    .map(|v| Json::String(v.to_owned()))
                    .collect();
                (!values.is_empty()).then_some(Json::Array(values))
            }
        }
    }

    fn opt_string(&self, v: &mut Validator, field: &str) -> Option<Option<String>> {
        match self.get(field) {
            None => Some(None),
            Some(value) => v.opt_string(&self.loc(field), &value),
        }
    }

    fn int_or(&self, v: &mut Validator, field: &str, default: i64) -> Option<i64> {
        match self.get(field) {
            None => Some(default),
            Some(value) => v.int(&self.loc(field), &value),
        }
    }

    fn literal_or(
        &self,
        v: &mut Validator,
        field: &str,
        allowed: &[&'static str],
        default: &'static str,
    ) -> Option<&'static str> {
        match self.get(field) {
            None => Some(default),
            Some(value) => v.literal(&self.loc(field), &value, allowed),
        }
    }

    /// Reads a list of an enum's names; `None` inside when the field is
    /// absent or null.
    fn choice_list<T: Named>(
        &self,
        v: &mut Validator,
        field: &str,
        allowed: &[T],
    ) -> Option<Option<Vec<T>>> {
        match self.get_list(field) {
            None | Some(Json::Null) => Some(None),
            Some(value) => v
                .each(&self.loc(field), &value, |v, loc, item| {
                    v.choice(loc, item, allowed)
                })
                .map(Some),
        }
    }

    fn string_list(&self, v: &mut Validator, field: &str) -> Option<Option<Vec<String>>> {
        match self.get_list(field) {
            None | Some(Json::Null) => Some(None),
            Some(value) => v
                .each(&self.loc(field), &value, |v, loc, item| v.string(loc, item))
                .map(Some),
        }
    }
}

/// Sorting and paging of a query as the request gave them.
#[derive(Debug, Clone)]
pub struct PageParams {
    limit: i64,
    offset: i64,
    sort_by: Option<String>,
    sort_order: &'static str,
}

impl PageParams {
    /// Reads `limit`, `offset`, `sort_by` (default `default_sort`) and `sort_order`.
    fn read(v: &mut Validator, source: &Source, default_sort: Option<&str>) -> Option<Self> {
        let limit = source.int_or(v, "limit", -1);
        let offset = source.int_or(v, "offset", 0);
        let sort_by = match source.get("sort_by") {
            None => Some(default_sort.map(str::to_owned)),
            Some(value) => v.opt_string(&source.loc("sort_by"), &value),
        };
        let sort_order = source.literal_or(v, "sort_order", &["asc", "desc"], "asc");
        Some(Self {
            limit: limit?,
            offset: offset?,
            sort_by: sort_by?,
            sort_order: sort_order?,
        })
    }

    /// Checks the page as upstream's server does (400s with its messages;
    /// `sort_by` must be a field of the listed model) and converts it.
    pub fn to_page(&self, model_fields: &[&str]) -> HttpResult<Page> {
        if let Some(field) = &self.sort_by
            && !model_fields.contains(&field.as_str())
        {
            return Err(HttpError::bad_request(format!(
                "Invalid sort_by: {}, allowed fields are: {}",
                echo(field),
                model_fields.join(", ")
            )));
        }
        if self.limit == 0 || (self.limit < 0 && self.limit != -1) {
            return Err(HttpError::bad_request(
                "Limit must be greater than 0 or -1 for no limit",
            ));
        }
        if self.offset < 0 {
            return Err(HttpError::bad_request(
                "Offset must be greater than or equal to 0",
            ));
        }
        Ok(Page {
            sort_by: self.sort_by.clone(),
            descending: self.sort_order == "desc",
            limit: usize::try_from(self.limit).ok(),
            offset: usize::try_from(self.offset).unwrap_or(usize::MAX),
        })
    }
}

fn filter_logic(v: &mut Validator, source: &Source) -> Option<FilterLogic> {
    let logic = source.literal_or(v, "filter_logic", &["and", "or"], "and")?;
    Some(if logic == "or" {
        FilterLogic::Or
    } else {
        FilterLogic::And
    })
}

/// `QueryRolloutsRequest`.
pub struct RolloutQuery {
    pub status_in: Option<Vec<RolloutStatus>>,
    pub rollout_id_in: Option<Vec<String>>,
    pub rollout_id_contains: Option<String>,
    pub page: PageParams,
    pub logic: FilterLogic,
}

impl RolloutQuery {
    /// Reads the query.
    pub fn read(v: &mut Validator, source: &Source) -> Option<Self> {
        let status_in = source.choice_list(v, "status_in", RolloutStatus::ALL);
        let rollout_id_in = source.string_list(v, "rollout_id_in");
        let contains = source.opt_string(v, "rollout_id_contains");
        let page = PageParams::read(v, source, None);
        let logic = filter_logic(v, source);
        Some(Self {
            status_in: status_in?,
            rollout_id_in: rollout_id_in?,
            rollout_id_contains: contains?,
            page: page?,
            logic: logic?,
        })
    }
}

/// `QueryAttemptsRequest`.
pub struct AttemptQuery {
    pub page: PageParams,
}

impl AttemptQuery {
    /// Reads the query.
    pub fn read(v: &mut Validator, source: &Source) -> Option<Self> {
        PageParams::read(v, source, Some("sequence_id")).map(|page| Self { page })
    }
}

/// `QueryResourcesRequest`.
pub struct ResourcesQuery {
    pub resources_id: Option<String>,
    pub resources_id_contains: Option<String>,
    pub page: PageParams,
}

impl ResourcesQuery {
    /// Reads the query.
    pub fn read(v: &mut Validator, source: &Source) -> Option<Self> {
        let resources_id = source.opt_string(v, "resources_id");
        let contains = source.opt_string(v, "resources_id_contains");
        let page = PageParams::read(v, source, None);
        Some(Self {
            resources_id: resources_id?,
            resources_id_contains: contains?,
            page: page?,
        })
    }
}

/// `QueryWorkersRequest`.
pub struct WorkerQuery {
    pub status_in: Option<Vec<WorkerStatus>>,
    pub worker_id_contains: Option<String>,
    pub page: PageParams,
    pub logic: FilterLogic,
}

impl WorkerQuery {
    /// Reads the query. A filter on `unknown` also keeps `lost` workers
    /// (dropped worker sessions), which agent-lightning calls unknown.
    pub fn read(v: &mut Validator, source: &Source) -> Option<Self> {
        let status_in = source
            .choice_list(v, "status_in", WORKER_STATUSES)
            .map(|statuses| {
                statuses.map(|mut statuses| {
                    if statuses.contains(&WorkerStatus::Unknown) {
                        statuses.push(WorkerStatus::Lost);
                    }
                    statuses
                })
            });
        let contains = source.opt_string(v, "worker_id_contains");
        let page = PageParams::read(v, source, None);
        let logic = filter_logic(v, source);
        Some(Self {
            status_in: status_in?,
            worker_id_contains: contains?,
            page: page?,
            logic: logic?,
        })
    }
}

/// `QuerySpansRequest`: which spans (`rollout_id`, `attempt_id`), the text
/// conditions and the page.
pub struct SpanQuery {
    pub rollout_id: String,
    pub attempt_id: Option<String>,
    /// (exact, contains) of trace_id, span_id, parent_id and name, in order.
    pub text: [(Option<String>, Option<String>); 4],
    pub logic: FilterLogic,
    pub page: PageParams,
}

impl SpanQuery {
    /// Reads the query.
    pub fn read(v: &mut Validator, source: &Source, whole: &Json) -> Option<Self> {
        let rollout_id = match source.get("rollout_id") {
            Some(value) => v.string(&source.loc("rollout_id"), &value),
            None => {
                // FastAPI reports a missing query parameter with input null.
                let input = match source {
                    Source::Body(_) => whole,
                    Source::Query(_) => &Json::Null,
                };
                v.issue(
                    "missing",
                    &source.loc("rollout_id"),
                    "Field required",
                    input,
                    None,
                );
                None
            }
        };
        let attempt_id = source.opt_string(v, "attempt_id");
        let mut text: [(Option<String>, Option<String>); 4] = Default::default();
        let mut ok = true;
        for (slot, field) in text
            .iter_mut()
            .zip(["trace_id", "span_id", "parent_id", "name"])
        {
            let exact = source.opt_string(v, field);
            let contains = source.opt_string(v, &format!("{field}_contains"));
            match (exact, contains) {
                (Some(exact), Some(contains)) => *slot = (exact, contains),
                _ => ok = false,
            }
        }
        let logic = filter_logic(v, source);
        let page = PageParams::read(v, source, Some("sequence_id"));
        ok.then_some(())?;
        Some(Self {
            rollout_id: rollout_id?,
            attempt_id: attempt_id?,
            text,
            logic: logic?,
            page: page?,
        })
    }
}

/// Reads a `RolloutConfig` with the core's rules of its values, refused
/// as pydantic refuses a constrained field (see [`Validator::seconds`]).
fn read_config(v: &mut Validator, loc: &Loc, value: &Json) -> Option<RolloutConfig> {
    let object = v.model(loc, value)?;
    let seconds = |v: &mut Validator, field: &str| {
        v.optional(object, loc, field, None, |v, loc, value| match value {
            Json::Null => Some(None),
            other => v.seconds(loc, other).map(Some),
        })
    };
    let timeout_seconds = seconds(v, "timeout_seconds");
    let unresponsive_seconds = seconds(v, "unresponsive_seconds");
    let max_attempts = v.optional(
        object,
        loc,
        "max_attempts",
        MaxAttempts::ONE,
        |v, loc, value| v.max_attempts(loc, value),
    );
    let retry_condition = v.optional(
        object,
        loc,
        "retry_condition",
        RetryCondition::default(),
        |v, loc, value| v.retry_condition(loc, value),
    );
    Some(RolloutConfig {
        timeout_seconds: timeout_seconds?,
        unresponsive_seconds: unresponsive_seconds?,
        max_attempts: max_attempts?,
        retry_condition: retry_condition?,
    })
}

fn read_mode(v: &mut Validator, loc: &Loc, value: &Json) -> Option<Option<RolloutMode>> {
    match value {
        Json::Null => Some(None),
        other => v.choice(loc, other, RolloutMode::ALL).map(Some),
    }
}

/// Reads the fields shared by `EnqueueRolloutRequest` and `RolloutRequest`:
/// `input` (required), `mode`, `resources_id`, `config` and `metadata`
/// (`null` ones take upstream's defaults: a fresh config, `{}`).
pub fn read_spec(v: &mut Validator, loc: &Loc, object: &Object) -> Option<RolloutSpec> {
    let input = v.required(object, loc, "input").cloned();
    let mode = match object.get("mode") {
        None => Some(None),
        Some(value) => read_mode(v, &loc.key("mode"), value),
    };
    let resources_id = match object.get("resources_id") {
        None => Some(None),
        Some(value) => v.opt_string(&loc.key("resources_id"), value),
    };
    let config = match object.get("config") {
        None | Some(Json::Null) => Some(RolloutConfig::default()),
        Some(value) => read_config(v, &loc.key("config"), value),
    };
    let metadata = match object.get("metadata") {
        None | Some(Json::Null) => Some(Json::Object(Default::default())),
        Some(value) => v.opt_dict(&loc.key("metadata"), value),
    };
    Some(RolloutSpec {
        input: input?,
        mode: mode?,
        resources_id: resources_id?,
        config: config?,
        metadata: metadata?,
    })
}

/// Reads an optional string field of a body object.
pub fn opt_string_field(v: &mut Validator, object: &Object, field: &str) -> Option<Option<String>> {
    match object.get(field) {
        None => Some(None),
        Some(value) => v.opt_string(&Loc::body().key(field), value),
    }
}

/// Returns the 400 upstream answers for a field given as `null` where the
/// store needs a value.
fn null_field(field: &str) -> HttpError {
    HttpError::bad_request(format!("{field} is invalid; it cannot be a null value."))
}

/// Reads `UpdateRolloutRequest`: the fields present are written (`input`,
/// `mode`, `resources_id` and `metadata` may be null; `status` and
/// `config` may not).
pub fn read_rollout_patch(body: &Json) -> HttpResult<RolloutPatch> {
    let mut v = Validator::new();
    let loc = Loc::body();
    let Some(object) = v.model(&loc, body) else {
        return Ok(v.finish(None)?);
    };
    let input = object.get("input").cloned();
    let mode = object
        .get("mode")
        .map(|value| read_mode(&mut v, &loc.key("mode"), value));
    let resources_id = object
        .get("resources_id")
        .map(|value| v.opt_string(&loc.key("resources_id"), value));
    let status = object.get("status").map(|value| match value {
        Json::Null => Some(None),
        other => v
            .choice(&loc.key("status"), other, RolloutStatus::ALL)
            .map(Some),
    });
    let config = object.get("config").map(|value| match value {
        Json::Null => Some(None),
        other => read_config(&mut v, &loc.key("config"), other).map(Some),
    });
    let metadata = object
        .get("metadata")
        .map(|value| v.opt_dict(&loc.key("metadata"), value));
    if v.failed() {
        return Ok(v.finish(None)?);
    }
    // Validated above: every present field converted.
    let status = match status.flatten() {
        Some(None) => return Err(null_field("status")),
        other => other.flatten(),
    };
    let config = match config.flatten() {
        Some(None) => return Err(null_field("config")),
        other => other.flatten(),
    };
    Ok(RolloutPatch {
        input,
        mode: mode.flatten(),
        resources_id: resources_id.flatten(),
        status,
        config,
        metadata: metadata.flatten(),
    })
}

/// Reads `UpdateAttemptRequest`: the fields present are written; none may be null.
pub fn read_attempt_patch(body: &Json) -> HttpResult<AttemptPatch> {
    let mut v = Validator::new();
    let loc = Loc::body();
    let Some(object) = v.model(&loc, body) else {
        return Ok(v.finish(None)?);
    };
    let field = |name: &str| object.get(name).filter(|value| !value.is_null());
    let status =
        field("status").map(|value| v.choice(&loc.key("status"), value, AttemptStatus::ALL));
    let worker_id = field("worker_id").map(|value| v.string(&loc.key("worker_id"), value));
    let heartbeat =
        field("last_heartbeat_time").map(|value| v.float(&loc.key("last_heartbeat_time"), value));
    let metadata = field("metadata").map(|value| v.dict(&loc.key("metadata"), value).cloned());
    if v.failed() {
        return Ok(v.finish(None)?);
    }
    for name in ["status", "worker_id", "last_heartbeat_time", "metadata"] {
        if object.get(name).is_some_and(Json::is_null) {
            return Err(null_field(name));
        }
    }
    let last_heartbeat_time = match heartbeat.flatten() {
        None => None,
        Some(seconds) => Some(Timestamp::from_secs_f64(seconds).ok_or_else(|| {
            HttpError::bad_request(format!("last_heartbeat_time {seconds} is out of range"))
        })?),
    };
    Ok(AttemptPatch {
        status: status.flatten(),
        worker_id: worker_id
            .flatten()
            .map(|id| WorkerId::parse("worker_id", id))
            .transpose()?,
        last_heartbeat_time,
        metadata: metadata.flatten().map(Json::Object),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn issues(error: impl Into<HttpError>) -> Json {
        match error.into() {
            HttpError::Invalid(issues) => serde_json::to_value(issues).unwrap(),
            HttpError::Detail(status, detail) => {
                json!({"status": status.as_u16(), "detail": detail})
            }
        }
    }

    #[test]
    fn specs_take_upstream_defaults_and_report_every_issue() {
        let mut v = Validator::new();
        let body = json!({"input": {"q": 1}, "metadata": null});
        let spec = read_spec(&mut v, &Loc::body(), body.as_object().unwrap()).unwrap();
        assert_eq!(spec.metadata, json!({}));
        assert_eq!(spec.config, RolloutConfig::default());

        let mut v = Validator::new();
        let body = json!({"mode": "bad", "config": {"max_attempts": 0, "retry_condition": ["x"]}});
        assert!(read_spec(&mut v, &Loc::body(), body.as_object().unwrap()).is_none());
        let reported = issues(v.finish::<()>(None).unwrap_err());
        let kinds: Vec<&str> = reported
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "missing",
                "literal_error",
                "greater_than_equal",
                "literal_error"
            ]
        );
    }

    #[test]
    fn updates_write_present_fields_and_refuse_required_nulls() {
        let patch = read_rollout_patch(&json!({"mode": null, "metadata": {"a": 1}})).unwrap();
        assert_eq!(patch.mode, Some(None));
        assert_eq!(patch.metadata, Some(json!({"a": 1})));
        assert_eq!(patch.status, None);
        assert_eq!(
            issues(read_rollout_patch(&json!({"status": null})).unwrap_err()),
            json!({"status": 400, "detail": "status is invalid; it cannot be a null value."})
        );
        let patch =
            read_attempt_patch(&json!({"worker_id": "", "last_heartbeat_time": 12.5})).unwrap();
        assert_eq!(patch.worker_id.as_deref(), Some(""));
        assert_eq!(patch.last_heartbeat_time, Some(Timestamp(12_500_000_000)));
        assert_eq!(
            issues(read_attempt_patch(&json!({"metadata": null})).unwrap_err()),
            json!({"status": 400, "detail": "metadata is invalid; it cannot be a null value."})
        );
    }

    #[test]
    fn pages_are_checked_with_upstream_messages() {
        let pairs = QueryParams::parse(Some("limit=0"));
        let mut v = Validator::new();
        let page = PageParams::read(&mut v, &Source::Query(&pairs), None).unwrap();
        assert_eq!(
            issues(page.to_page(ROLLOUT_FIELDS).unwrap_err())["detail"],
            "Limit must be greater than 0 or -1 for no limit"
        );
        let pairs = QueryParams::parse(Some("sort_by=nope"));
        let page = PageParams::read(&mut v, &Source::Query(&pairs), None).unwrap();
        assert_eq!(
            issues(page.to_page(WORKER_FIELDS).unwrap_err())["detail"],
            format!(
                "Invalid sort_by: nope, allowed fields are: {}",
                WORKER_FIELDS.join(", ")
            )
        );
        let pairs = QueryParams::parse(Some("status_in=busy&status_in=unknown&limit=5"));
        let query = WorkerQuery::read(&mut v, &Source::Query(&pairs)).unwrap();
        assert_eq!(
            query.status_in,
            Some(vec![
                WorkerStatus::Busy,
                WorkerStatus::Unknown,
                WorkerStatus::Lost
            ])
        );
        assert_eq!(query.page.to_page(WORKER_FIELDS).unwrap().limit, Some(5));
    }
}
