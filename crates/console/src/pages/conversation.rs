//! A 1.x rollout's `model_request` events read as a conversation: each
//! call's request (OpenAI chat messages, or a completion prompt) and its
//! answer, with the model, token counts, latency, and whether the token
//! ids and log-probabilities a trainer needs were recorded. A call repeats
//! the conversation so far; only the messages it adds are shown, as a chat
//! reads.

use crate::format::{self, ShownTime};
use lightning_store_core::agl1::Agl1Event;
use lightning_store_core::agl1::events::{MODEL_REQUEST, REWARD};
use lightning_store_core::model::Json;

/// One message of the conversation.
pub struct Message {
    /// `system`, `user`, `assistant`, `tool`, or `prompt` for a completion.
    pub role: String,
    pub text: String,
}

/// One call through the gateway.
pub struct Call {
    pub number: usize,
    pub time: ShownTime,
    pub model: String,
    /// The messages this call added to the conversation.
    pub messages: Vec<Message>,
    /// The model's answer (`None` when the call failed).
    pub answer: Option<Message>,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub latency: String,
    pub status: String,
    pub failed: bool,
    pub finish_reason: Option<String>,
    /// Token ids of the prompt and the answer were recorded.
    pub token_ids: bool,
    /// Log-probabilities of the answer were recorded.
    pub log_probs: bool,
}

/// A reward event.
pub struct RewardEvent {
    pub time: ShownTime,
    pub value: String,
    pub detail: String,
}

/// The conversation of a rollout's events, in order.
pub struct Conversation {
    pub calls: Vec<Call>,
    pub rewards: Vec<RewardEvent>,
    /// Events of other types.
    pub others: usize,
}

/// Reads the conversation of an attempt's raw events.
pub fn read(events: &[Agl1Event]) -> Conversation {
    let mut conversation = Conversation {
        calls: Vec::new(),
        rewards: Vec::new(),
        others: 0,
    };
    let mut shown: Vec<(String, String)> = Vec::new();
    for event in events {
        let Ok(data) = serde_json::from_str::<Json>(&event.data) else {
            conversation.others += 1;
            continue;
        };
        match event.event_type.as_str() {
            MODEL_REQUEST => {
                let number = conversation.calls.len() + 1;
                conversation
                    .calls
                    .push(call(number, event, &data, &mut shown));
            }
            REWARD => conversation.rewards.push(RewardEvent {
                time: format::time(event.timestamp),
                value: data
                    .get("value")
                    .map_or_else(|| "none".to_owned(), Json::to_string),
                detail: ["reason", "source", "message"]
                    .iter()
                    .filter_map(|key| data.get(*key).and_then(Json::as_str))
                    .collect::<Vec<_>>()
                    .join(" · "),
            }),
            _ => conversation.others += 1,
        }
    }
    conversation
}

fn call(number: usize, event: &Agl1Event, data: &Json, shown: &mut Vec<(String, String)>) -> Call {
    let request = &data["request"];
    let response = &data["response"];
    let choice = &response["choices"][0];
    let mut sent: Vec<(String, String)> = match request.get("messages").and_then(Json::as_array) {
        Some(messages) => messages
            .iter()
            .map(|m| {
                (
                    m["role"].as_str().unwrap_or("message").to_owned(),
                    content_text(m),
                )
            })
            .collect(),
        None => request
            .get("prompt")
            .map(|prompt| vec![("prompt".to_owned(), plain(prompt))])
            .unwrap_or_default(),
    };
    // Only what this call adds to what the conversation showed so far.
    let repeated = shown.len() <= sent.len() && sent[..shown.len()] == shown[..];
    let new = if repeated {
        sent.split_off(shown.len())
    } else {
        std::mem::take(&mut sent)
    };
    let answer = match (choice.get("message"), choice.get("text")) {
        (Some(message), _) => Some(Message {
            role: message["role"].as_str().unwrap_or("assistant").to_owned(),
            text: content_text(message),
        }),
        (None, Some(text)) => Some(Message {
            role: "assistant".to_owned(),
            text: plain(text),
        }),
        (None, None) => None,
    };
    let mut conversation: Vec<(String, String)> = if repeated { shown.clone() } else { Vec::new() };
    conversation.extend(new.iter().cloned());
    if let Some(answer) = &answer {
        conversation.push((answer.role.clone(), answer.text.clone()));
    }
    *shown = conversation;
    let usage = &data["usage"];
    let http_status = data["http_status"].as_i64();
    let failed = data["status"] == "error" || http_status.is_some_and(|s| s >= 400);
    let has_ids = |value: &Json| value.as_array().is_some_and(|ids| !ids.is_empty());
    Call {
        number,
        time: format::time(event.timestamp),
        model: data["model"]
            .as_str()
            .or_else(|| response["model"].as_str())
            .unwrap_or("")
            .to_owned(),
        messages: new
            .into_iter()
            .map(|(role, text)| Message { role, text })
            .collect(),
        answer,
        prompt_tokens: usage["prompt_tokens"].as_u64(),
        completion_tokens: usage["completion_tokens"].as_u64(),
        latency: data["latency_ms"].as_f64().map_or_else(String::new, |ms| {
            format::duration(std::time::Duration::from_secs_f64(ms.max(0.0) / 1e3))
        }),
        status: http_status.map_or_else(
            || data["status"].as_str().unwrap_or("").to_owned(),
            |s| s.to_string(),
        ),
        failed,
        finish_reason: data["finish_reason"].as_str().map(str::to_owned),
        token_ids: (has_ids(&response["prompt_token_ids"]) || has_ids(&choice["prompt_token_ids"]))
            && has_ids(&choice["token_ids"]),
        log_probs: !choice["logprobs"].is_null(),
    }
}

/// A message's content as text: a string, the text parts of a list, tool
/// calls as JSON.
fn content_text(message: &Json) -> String {
    let mut text = match &message["content"] {
        Json::String(text) => text.clone(),
        Json::Array(parts) => parts
            .iter()
            .map(|part| match part["text"].as_str() {
                Some(text) => text.to_owned(),
                None => part.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Json::Null => String::new(),
        other => other.to_string(),
    };
    if let Some(calls) = message.get("tool_calls").filter(|c| !c.is_null()) {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&format::json(calls));
    }
    format::cut(text)
}

fn plain(value: &Json) -> String {
    format::cut(match value {
        Json::String(text) => text.clone(),
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lightning_store_core::agl1::Agl1Event;
    use lightning_store_core::model::Timestamp;
    use serde_json::json;

    /// A call of rollout `r`, attempt `0`, at time zero.
    fn event(event_type: &str, data: Json) -> Agl1Event {
        Agl1Event {
            event_type: event_type.into(),
            rollout_id: "r".into(),
            attempt_id: "0".into(),
            timestamp: Timestamp(0),
            data: data.to_string(),
        }
    }

    #[test]
    fn calls_show_what_they_add_to_the_conversation() {
        let first = json!({"model": "m", "request": {"messages": [
                {"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]},
            "response": {"prompt_token_ids": [1], "choices": [{"message": {"role": "assistant", "content": "hello"},
                "token_ids": [2], "logprobs": {"content": []}}]},
            "usage": {"prompt_tokens": 5, "completion_tokens": 1}, "latency_ms": 12.5, "http_status": 200, "status": "ok"});
        let second = json!({"model": "m", "request": {"messages": [
                {"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"}, {"role": "user", "content": [{"type": "text", "text": "bye"}]}]},
            "response": {"choices": [{"message": {"role": "assistant", "content": "<b>bye</b>"}}]},
            "http_status": 200});
        let events = [
            event(MODEL_REQUEST, first),
            event(MODEL_REQUEST, second),
            event(REWARD, json!({"value": 1.0, "reason": "correct"})),
            event("custom", json!({})),
        ];
        let conversation = read(&events);
        assert_eq!(conversation.calls.len(), 2);
        let (one, two) = (&conversation.calls[0], &conversation.calls[1]);
        assert_eq!(one.messages.len(), 2);
        assert_eq!(one.answer.as_ref().unwrap().text, "hello");
        assert!(one.token_ids && one.log_probs);
        assert_eq!(
            (one.prompt_tokens, one.completion_tokens),
            (Some(5), Some(1))
        );
        assert_eq!(one.latency, "12 ms");
        assert_eq!(two.messages.len(), 1, "only the new user message");
        assert_eq!(two.messages[0].text, "bye");
        assert!(!two.token_ids && !two.log_probs);
        assert_eq!(conversation.rewards[0].value, "1.0");
        assert_eq!(conversation.rewards[0].detail, "correct");
        assert_eq!(conversation.others, 1);
    }
}
