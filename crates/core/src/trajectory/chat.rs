//! OpenAI-style chat messages read from recorded JSON, and the rule that
//! makes one conversation of a rollout's model calls: the last answered
//! call's prompt messages and its answer. A chat agent sends the whole
//! conversation so far with every call, so the last call holds every
//! earlier one; a call with another context (a side call, another agent)
//! is not in it, and [`Assembled::calls_in_conversation`] says how many
//! calls are.

use super::records::ChatMessage;
use crate::model::Json;

/// One model call, read for the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatCall {
    /// The messages the call sent.
    pub prompt: Vec<ChatMessage>,
    /// The model's answer (`None`: the call failed or recorded none).
    pub answer: Option<ChatMessage>,
    pub model: Option<String>,
}

/// A rollout's calls made one conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Assembled {
    pub messages: Vec<ChatMessage>,
    /// The model of the call the conversation ends with.
    pub model: Option<String>,
    /// Calls whose prompt and answer are a prefix of the conversation.
    pub calls_in_conversation: usize,
}

/// Makes one conversation of `calls` (in the order they were made): the
/// last answered call's prompt and answer; `None` when no call was
/// answered.
pub fn assemble(calls: &[ChatCall]) -> Option<Assembled> {
    let last = calls.iter().rev().find(|call| call.answer.is_some())?;
    let mut messages = last.prompt.clone();
    messages.extend(last.answer.clone());
    let calls_in_conversation = calls
        .iter()
        .filter(|call| {
            let len = call.prompt.len() + usize::from(call.answer.is_some());
            len <= messages.len()
                && messages[..call.prompt.len()] == call.prompt[..]
                && call
                    .answer
                    .as_ref()
                    .is_none_or(|answer| &messages[call.prompt.len()] == answer)
        })
        .count();
    Some(Assembled {
        messages,
        model: last.model.clone(),
        calls_in_conversation,
    })
}

/// Reads one message object (`role`, `content`, and the tool fields); a
/// value that is not an object is not a message.
pub fn message(value: &Json) -> Option<ChatMessage> {
    let object = value.as_object()?;
    let text = |key: &str| object.get(key).and_then(Json::as_str).map(str::to_owned);
    Some(ChatMessage {
        role: text("role").unwrap_or_else(|| "unknown".to_owned()),
        content: object.get("content").map_or_else(String::new, content_text),
        tool_calls: object
            .get("tool_calls")
            .filter(|calls| !calls.is_null())
            .cloned(),
        tool_call_id: text("tool_call_id"),
        name: text("name"),
    })
}

/// Reads a list of message objects (anything else gives none).
pub fn messages(value: &Json) -> Vec<ChatMessage> {
    value
        .as_array()
        .map(|items| items.iter().filter_map(message).collect())
        .unwrap_or_default()
}

/// A message's content as text: a string as is, the text parts of a list
/// joined by a newline, nothing for `null`, other values as JSON.
pub fn content_text(content: &Json) -> String {
    match content {
        Json::String(text) => text.clone(),
        Json::Array(parts) => parts
            .iter()
            .filter_map(|part| match part {
                Json::String(text) => Some(text.as_str()),
                _ => part.get("text").and_then(Json::as_str),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Json::Null => String::new(),
        other => other.to_string(),
    }
}

/// The image URLs of a list of messages, in order (agent-lightning's
/// `_extract_image_urls_from_messages`): parts of type `image_url` with
/// a string `url`, in a content list or a string holding one as JSON.
pub fn image_urls(messages: &Json) -> Vec<String> {
    let mut urls = Vec::new();
    for message in messages.as_array().into_iter().flatten() {
        let parsed;
        let content = match message.get("content") {
            Some(Json::String(text)) => match serde_json::from_str::<Json>(text) {
                Ok(value) => {
                    parsed = value;
                    &parsed
                }
                Err(_) => continue,
            },
            Some(content) => content,
            None => continue,
        };
        for part in content.as_array().into_iter().flatten() {
            if part.get("type").and_then(Json::as_str) == Some("image_url")
                && let Some(url) = part
                    .get("image_url")
                    .and_then(|image| image.get("url"))
                    .and_then(Json::as_str)
            {
                urls.push(url.to_owned());
            }
        }
    }
    urls
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(role: &str, content: &str) -> ChatMessage {
        ChatMessage::text(role, content.to_owned())
    }

    fn call(prompt: &[ChatMessage], answer: Option<&str>) -> ChatCall {
        ChatCall {
            prompt: prompt.to_vec(),
            answer: answer.map(|a| text("assistant", a)),
            model: Some("m".into()),
        }
    }

    #[test]
    fn the_conversation_is_the_last_answered_call_and_counts_the_calls_it_holds() {
        let system = text("system", "s");
        let user = text("user", "q");
        let first = call(&[system.clone(), user.clone()], Some("a1"));
        let second = call(
            &[
                system.clone(),
                user.clone(),
                text("assistant", "a1"),
                text("user", "q2"),
            ],
            Some("a2"),
        );
        let side = call(&[text("user", "summarise")], Some("sum"));
        let failed = call(std::slice::from_ref(&system), None);
        let assembled = assemble(&[first, side, second, failed]).unwrap();
        assert_eq!(assembled.messages.len(), 5);
        assert_eq!(assembled.messages[4], text("assistant", "a2"));
        assert_eq!(
            assembled.calls_in_conversation, 3,
            "first, second, the failed prefix"
        );
        assert_eq!(assemble(&[call(&[user], None)]), None);
        assert_eq!(assemble(&[]), None);
    }

    #[test]
    fn messages_read_text_parts_tools_and_hostile_values() {
        let read = messages(&json!([
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "u"}}, "b"]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "1"}]},
            {"role": "tool", "content": 5, "tool_call_id": "1", "name": "calc"},
            {"content": "\u{0}<script>"},
            7,
        ]));
        assert_eq!(read.len(), 4, "a number is not a message");
        assert_eq!(read[0].content, "a\nb");
        assert_eq!(read[1].tool_calls, Some(json!([{"id": "1"}])));
        assert_eq!(read[1].content, "");
        assert_eq!(read[2].content, "5");
        assert_eq!(read[2].tool_call_id.as_deref(), Some("1"));
        assert_eq!(read[3].role, "unknown");
        assert_eq!(read[3].content, "\u{0}<script>");
        assert!(messages(&json!({"role": "user"})).is_empty());
        let written = serde_json::to_value(&read[0]).unwrap();
        assert_eq!(written, json!({"role": "user", "content": "a\nb"}));
    }

    #[test]
    fn image_urls_are_read_from_parts_and_json_text() {
        let urls = image_urls(&json!([
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "a"}}]},
            {"role": "user", "content": "[{\"type\": \"image_url\", \"image_url\": {\"url\": \"b\"}}]"},
            {"role": "user", "content": "not json"},
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": 1}}, {"type": "image_url"}]},
            "x",
        ]));
        assert_eq!(urls, ["a", "b"]);
        assert!(image_urls(&json!("x")).is_empty());
    }
}
