//! The rules that read 1.x event data: which earlier model request a new
//! one supersedes (its routing tensor is dropped in the same transaction
//! as the append), and the views a trainer reads: raw, or `triplet` (model
//! requests trimmed to token ids and log-probabilities, rewards to their
//! value, model requests de-duplicated by prompt token ids), with or
//! without routing tensors. Upstream's code is the reference
//! (`agentlightning/server/routes/events.py`); where it would crash on
//! malformed data (a 500), these functions read what they can instead.

use super::records::Agl1Event;
use crate::error::{StoreError, StoreResult};
use crate::model::Json;
use crate::training::usage::ModelCall;

/// The event type the gateway records for every model call.
pub const MODEL_REQUEST: &str = "model_request";
/// The event type of a reward.
pub const REWARD: &str = "reward";
/// The data key of a model request's routing tensor.
pub const ROUTED_EXPERTS: &str = "routed_experts";

/// How events are presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventFormat {
    /// As recorded.
    Raw,
    /// Trimmed for RL training (upstream's `format=triplet`).
    Triplet,
}

/// What an event query returns, besides the rollout it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventQuery {
    /// Only events of this type.
    pub event_type: Option<String>,
    pub format: EventFormat,
    /// Keep model requests' routing tensors.
    pub include_routed_experts: bool,
}

impl Default for EventQuery {
    fn default() -> Self {
        Self {
            event_type: None,
            format: EventFormat::Raw,
            include_routed_experts: true,
        }
    }
}

/// Parses an event's data (stored as JSON text by the store itself).
pub fn parse_data(data: &str) -> StoreResult<Json> {
    serde_json::from_str(data)
        .map_err(|error| StoreError::Internal(format!("stored event data is not JSON: {error}")))
}

/// Returns whether a new model request (its data `new`) supersedes the
/// routing tensor of `previous`, the attempt's latest earlier model
/// request: the new prompt repeats the previous prompt or extends the
/// previous prompt and response, and the previous data has the key.
pub fn supersedes(new: &Json, previous: &Json) -> bool {
    if object_get(previous, ROUTED_EXPERTS).is_none() {
        return false;
    }
    let current = trim_model_request(new);
    let earlier = trim_model_request(previous);
    let prompt = &current["prompt_token_ids"];
    let earlier_prompt = &earlier["prompt_token_ids"];
    if prompt == earlier_prompt {
        return true;
    }
    let (Some(prompt), Some(earlier_prompt), Some(earlier_response)) = (
        prompt.as_array(),
        earlier_prompt.as_array(),
        earlier["response_token_ids"].as_array(),
    ) else {
        return false;
    };
    let context_len = earlier_prompt.len() + earlier_response.len();
    // Python's `prompt[:len(context)] == context`: a shorter prompt never
    // equals a longer context.
    prompt.len() >= context_len
        && prompt[..earlier_prompt.len()] == earlier_prompt[..]
        && prompt[earlier_prompt.len()..context_len] == earlier_response[..]
}

/// Returns `data` without its routing tensor.
pub fn drop_routed_experts(data: &mut Json) {
    if let Json::Object(object) = data {
        object.shift_remove(ROUTED_EXPERTS);
    }
}

/// Returns the events an event query presents, in order: filtered by type,
/// trimmed and de-duplicated for `triplet`, and without routing tensors
/// unless asked for.
pub fn present(events: Vec<Agl1Event>, query: &EventQuery) -> StoreResult<Vec<Agl1Event>> {
    let events = events
        .into_iter()
        .filter(|e| query.event_type.as_ref().is_none_or(|t| &e.event_type == t));
    let mut events: Vec<Agl1Event> = match query.format {
        EventFormat::Raw => events.collect(),
        EventFormat::Triplet => triplet_view(events)?
            .into_iter()
            .map(|(_, event)| event)
            .collect(),
    };
    if !query.include_routed_experts {
        for event in &mut events {
            // Only model requests carry the tensor; most do not mention it.
            if event.event_type == MODEL_REQUEST && event.data.contains(ROUTED_EXPERTS) {
                let mut data = parse_data(&event.data)?;
                if object_get(&data, ROUTED_EXPERTS).is_some() {
                    drop_routed_experts(&mut data);
                    event.data = data.to_string();
                }
            }
        }
    }
    Ok(events)
}

/// Returns the `triplet` view of `events` (model requests and rewards
/// trimmed, model requests de-duplicated by prompt), each kept event with
/// its position among `events`, in order.
pub fn triplet_view(
    events: impl IntoIterator<Item = Agl1Event>,
) -> StoreResult<Vec<(usize, Agl1Event)>> {
    let mut trimmed = Vec::new();
    for mut event in events {
        let view = match event.event_type.as_str() {
            MODEL_REQUEST => Some(trim_model_request(&parse_data(&event.data)?)),
            REWARD => Some(trim_reward(&parse_data(&event.data)?)),
            _ => None,
        };
        let prompt = match view {
            Some(view) => {
                let prompt = dedupe_key(&view);
                event.data = view.to_string();
                prompt
            }
            None => None,
        };
        trimmed.push((event, prompt));
    }
    Ok(dedupe_model_requests(trimmed))
}

/// Keeps the last model request of each valid prompt key (a non-empty
/// list of integers) and every other event, in order, with their positions.
fn dedupe_model_requests(events: Vec<(Agl1Event, Option<Vec<i64>>)>) -> Vec<(usize, Agl1Event)> {
    let keys: Vec<Option<&[i64]>> = events
        .iter()
        .map(|(event, key)| key.as_deref().filter(|_| event.event_type == MODEL_REQUEST))
        .collect();
    let kept = kept_by_prompt(&keys);
    events
        .into_iter()
        .enumerate()
        .zip(kept)
        .filter(|(_, kept)| *kept)
        .map(|((index, (event, _)), _)| (index, event))
        .collect()
}

/// Returns, for each event given by its model request's prompt key
/// (`None`: not a model request, or one without a valid key), whether the
/// triplet view keeps it: the last model request of each key, and every
/// other event.
pub(crate) fn kept_by_prompt(keys: &[Option<&[i64]>]) -> Vec<bool> {
    let mut last_of = std::collections::HashMap::new();
    for (index, key) in keys.iter().enumerate() {
        if let Some(key) = key {
            last_of.insert(*key, index);
        }
    }
    keys.iter()
        .enumerate()
        .map(|(index, key)| key.is_none_or(|key| last_of[key] == index))
        .collect()
}

/// Returns the de-duplication key of a trimmed model request: its prompt
/// token ids when they are a non-empty list of integers (Python `int`s,
/// not booleans or floats).
pub(crate) fn dedupe_key(trimmed: &Json) -> Option<Vec<i64>> {
    let ids = trimmed.get("prompt_token_ids")?.as_array()?;
    if ids.is_empty() {
        return None;
    }
    ids.iter().map(Json::as_i64).collect()
}

fn object_get<'a>(value: &'a Json, key: &str) -> Option<&'a Json> {
    value.as_object().and_then(|object| object.get(key))
}

/// `value.get(key, default)` on a dict, `default` on anything else.
fn get_or<'a>(value: &'a Json, key: &str, default: &'a Json) -> &'a Json {
    object_get(value, key).unwrap_or(default)
}

/// Returns the triplet view of a model request: prompt and response token
/// ids, the response's log-probabilities, the serving model, and the
/// routing tensor, HTTP status, status and error when present.
pub fn trim_model_request(data: &Json) -> Json {
    let empty_list = Json::Array(Vec::new());
    let empty_object = Json::Object(Default::default());
    let response = object_get(data, "response");
    let mut prompt = empty_list.clone();
    let mut response_ids = empty_list.clone();
    let mut log_probs = Json::Null;
    match response {
        Some(response @ Json::Object(_)) => {
            prompt = get_or(response, "prompt_token_ids", &empty_list).clone();
            if let Some(first) = get_or(response, "choices", &empty_list)
                .as_array()
                .and_then(|choices| choices.first())
            {
                if !super::records::truthy(&prompt) {
                    prompt = get_or(first, "prompt_token_ids", &empty_list).clone();
                }
                response_ids = get_or(first, "token_ids", &empty_list).clone();
                log_probs = choice_log_probs(first).map_or(Json::Null, |probs| {
                    Json::Array(probs.into_iter().map(Json::from).collect())
                });
            }
        }
        Some(Json::Array(chunks)) => {
            // Legacy: raw streaming chunks.
            let mut ids = Vec::new();
            for chunk in chunks {
                let chunk_prompt = get_or(chunk, "prompt_token_ids", &Json::Null);
                if !super::records::truthy(&prompt) && super::records::truthy(chunk_prompt) {
                    prompt = chunk_prompt.clone();
                }
                if let Some(tokens) = get_or(chunk, "choices", &empty_list)
                    .as_array()
                    .and_then(|choices| choices.first())
                    .and_then(|first| first.get("token_ids"))
                    .and_then(Json::as_array)
                {
                    ids.extend(tokens.iter().cloned());
                }
            }
            response_ids = Json::Array(ids);
        }
        _ => {}
    }
    let server = get_or(data, "server", &empty_object);
    let mut trimmed = serde_json::Map::new();
    trimmed.insert("prompt_token_ids".into(), prompt);
    trimmed.insert("response_token_ids".into(), response_ids);
    trimmed.insert("response_log_probs".into(), log_probs);
    trimmed.insert(
        "server".into(),
        serde_json::json!({
            "model": get_or(server, "model", &Json::Null),
            "version": get_or(server, "version", &Json::Null),
        }),
    );
    if let Some(routed) = object_get(data, ROUTED_EXPERTS).filter(|v| !v.is_null()) {
        trimmed.insert(ROUTED_EXPERTS.into(), routed.clone());
    }
    for key in ["http_status", "status"] {
        if let Some(value) = object_get(data, key) {
            trimmed.insert(key.into(), value.clone());
        }
    }
    if let Some(error) = response.and_then(|r| object_get(r, "error")) {
        trimmed.insert("error".into(), error.clone());
    }
    Json::Object(trimmed)
}

/// Returns a choice's per-token log-probabilities (OpenAI chat's
/// `logprobs.content[].logprob` or completions' `logprobs.token_logprobs`),
/// or `None` when any is missing, not a number or not finite.
fn choice_log_probs(choice: &Json) -> Option<Vec<f64>> {
    let log_probs = object_get(choice, "logprobs")?.as_object()?;
    let raw: Vec<&Json> = if let Some(content) = log_probs.get("content").and_then(Json::as_array) {
        content
            .iter()
            .map(|item| item.as_object()?.get("logprob"))
            .collect::<Option<_>>()?
    } else {
        log_probs
            .get("token_logprobs")
            .and_then(Json::as_array)?
            .iter()
            .collect()
    };
    raw.into_iter()
        .map(|value| {
            let number = match value {
                Json::Number(n) => n.as_f64(),
                Json::Bool(b) => Some(f64::from(u8::from(*b))),
                Json::String(s) => s.trim().parse::<f64>().ok(),
                _ => None,
            }?;
            number.is_finite().then_some(number)
        })
        .collect()
}

/// Returns the reward a reward event's `value` gives the trainer
/// (upstream's `_as_reward_value`): a number, not a boolean.
pub fn reward_value(value: &Json) -> Option<f64> {
    match value {
        Json::Number(number) => number.as_f64(),
        _ => None,
    }
}

/// What the store reads of a model request's data beyond the event: the
/// model version that served it, and what its call used.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ModelRequestRead {
    /// Its `model_version`, else its `server.version`, when an integer.
    pub model_version: Option<i64>,
    /// Its `latency_ms` and its `usage`.
    pub call: ModelCall,
}

/// Reads a model request's data (a JSON object's text) for its model
/// version and its call, in one parse of those four fields only. Data that
/// is not an object gives no version and a call of no latency and no
/// tokens.
pub fn model_request(data: &str) -> ModelRequestRead {
    #[derive(serde::Deserialize)]
    struct Fields {
        model_version: Option<Json>,
        server: Option<Json>,
        latency_ms: Option<Json>,
        usage: Option<Json>,
    }
    let Ok(fields) = serde_json::from_str::<Fields>(data) else {
        return ModelRequestRead::default();
    };
    let server_version = || fields.server.as_ref()?.get("version")?.as_i64();
    ModelRequestRead {
        model_version: fields
            .model_version
            .as_ref()
            .and_then(Json::as_i64)
            .or_else(server_version),
        call: ModelCall::of_model_request(
            fields.latency_ms.as_ref().and_then(Json::as_f64),
            fields.usage.as_ref(),
        ),
    }
}

/// Returns the triplet view of a reward: its value, and its source and
/// reason when present.
pub fn trim_reward(data: &Json) -> Json {
    let mut trimmed = serde_json::Map::new();
    trimmed.insert(
        "value".into(),
        object_get(data, "value").cloned().unwrap_or(Json::Null),
    );
    for key in ["source", "reason"] {
        if let Some(value) = object_get(data, key) {
            trimmed.insert(key.into(), value.clone());
        }
    }
    Json::Object(trimmed)
}

/// An event of `event_type` carrying `data`, of rollout `r`, attempt `0`,
/// at time zero: the unit tests' event.
#[cfg(test)]
pub(crate) fn test_event(event_type: &str, data: Json) -> Agl1Event {
    Agl1Event {
        event_type: event_type.into(),
        rollout_id: "r".into(),
        attempt_id: "0".into(),
        timestamp: crate::model::Timestamp(0),
        data: data.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::test_event as event;
    use super::*;
    use serde_json::json;

    #[test]
    fn a_model_requests_version_is_its_model_version_else_its_servers() {
        for (data, version) in [
            (r#"{"model_version":4,"server":{"version":3}}"#, Some(4)),
            (
                r#"{"request":{"model_version":9},"server":{"version":3}}"#,
                Some(3),
            ),
            (r#"{"model_version":"4","server":"s"}"#, None),
            (r#"{"model_version":null}"#, None),
            ("{}", None),
            ("not json", None),
        ] {
            assert_eq!(model_request(data).model_version, version, "{data}");
        }
    }

    fn chat(prompt: &[i64], response: &[i64]) -> Json {
        json!({
            "model": "m",
            "response": {
                "prompt_token_ids": prompt,
                "choices": [{"token_ids": response, "logprobs": {"content": [{"logprob": -0.5}, {"logprob": "-1"}]}}],
            },
            "server": {"model": "m", "endpoint": "http://x/v1", "version": 3},
            "http_status": 200,
            "status": "ok",
            "routed_experts": [[1, 2]],
        })
    }

    #[test]
    fn model_requests_trim_to_token_ids() {
        let trimmed = trim_model_request(&chat(&[1, 2], &[3]));
        assert_eq!(
            trimmed,
            json!({
                "prompt_token_ids": [1, 2], "response_token_ids": [3],
                "response_log_probs": [-0.5, -1.0],
                "server": {"model": "m", "version": 3},
                "routed_experts": [[1, 2]], "http_status": 200, "status": "ok",
            })
        );
        // Completions: the prompt sits on the choice; logprobs are token_logprobs.
        let completion = json!({"response": {"choices": [{"prompt_token_ids": [9], "token_ids": [8],
            "logprobs": {"token_logprobs": [0.1, null]}}], "error": "x"}});
        let trimmed = trim_model_request(&completion);
        assert_eq!(trimmed["prompt_token_ids"], json!([9]));
        assert_eq!(
            trimmed["response_log_probs"],
            Json::Null,
            "null is not a number"
        );
        assert_eq!(trimmed["error"], json!("x"));
        assert_eq!(trimmed["server"], json!({"model": null, "version": null}));
        // Legacy chunks concatenate token ids.
        let chunks = json!({"response": [{"prompt_token_ids": [1]}, {"choices": [{"token_ids": [5]}]},
            {"choices": [{"token_ids": [6]}]}]});
        let trimmed = trim_model_request(&chunks);
        assert_eq!(trimmed["prompt_token_ids"], json!([1]));
        assert_eq!(trimmed["response_token_ids"], json!([5, 6]));
        // Garbage never panics.
        let trimmed = trim_model_request(&json!({"response": {"choices": [7]}, "server": null}));
        assert_eq!(trimmed["response_token_ids"], json!([]));
    }

    #[test]
    fn a_request_supersedes_the_previous_routing_of_its_trajectory() {
        let previous = chat(&[1, 2], &[3]);
        assert!(supersedes(&chat(&[1, 2], &[4]), &previous), "same prompt");
        assert!(supersedes(&chat(&[1, 2, 3, 5], &[6]), &previous), "extends");
        assert!(!supersedes(&chat(&[1, 2, 4], &[6]), &previous), "diverges");
        assert!(!supersedes(&chat(&[1], &[6]), &previous), "shorter");
        let mut without = previous.clone();
        drop_routed_experts(&mut without);
        assert!(
            !supersedes(&chat(&[1, 2], &[4]), &without),
            "nothing to drop"
        );
    }

    #[test]
    fn triplets_trim_and_dedupe_by_prompt() {
        let events = vec![
            event(MODEL_REQUEST, chat(&[1], &[2])),
            event(
                REWARD,
                json!({"value": 0.5, "message": "m", "source": "agent"}),
            ),
            event(MODEL_REQUEST, chat(&[1], &[3])),
            event(MODEL_REQUEST, json!({"response": {}})),
            event("custom", json!({"k": 1})),
        ];
        let query = EventQuery {
            format: EventFormat::Triplet,
            include_routed_experts: false,
            ..EventQuery::default()
        };
        let out = present(events.clone(), &query).unwrap();
        let data: Vec<Json> = out.iter().map(|e| parse_data(&e.data).unwrap()).collect();
        assert_eq!(out.len(), 4, "the first [1] request is a duplicate");
        assert_eq!(data[0], json!({"value": 0.5, "source": "agent"}));
        assert_eq!(data[1]["response_token_ids"], json!([3]));
        assert!(data[1].get(ROUTED_EXPERTS).is_none());
        assert_eq!(data[2]["prompt_token_ids"], json!([]), "no key: kept");
        assert_eq!(data[3], json!({"k": 1}));

        let rewards = EventQuery {
            event_type: Some(REWARD.into()),
            ..EventQuery::default()
        };
        let raw = present(events, &rewards).unwrap();
        assert_eq!(raw.len(), 1);
        assert_eq!(
            parse_data(&raw[0].data).unwrap()["message"],
            json!("m"),
            "raw keeps everything"
        );
    }
}
