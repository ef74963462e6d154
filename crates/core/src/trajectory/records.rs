//! The records of the two training layouts, as they are written (one JSON
//! object per line, later one Parquet row): `triplets` ([`TripletRecord`]:
//! a training row, a model call that gives none, or a rollout that gives
//! none) and `messages` ([`Conversation`]). Field names are the schema:
//! they are only ever added to, and every field is always written (`null`
//! when absent), except a chat message's optional tool fields.

use serde::Serialize;

use crate::model::Json;

/// The ids every record of a rollout carries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Origin {
    pub rollout_id: String,
    /// The attempt the model calls were recorded in (1.x: the events'
    /// attempt; 0.x: the spans' attempt).
    pub attempt_id: Option<String>,
    /// The resources version the rollout ran with.
    pub resources_id: Option<String>,
}

/// One record of the `triplets` layout, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TripletRecord {
    /// A training row (`kind: "row"`).
    Row(TrainingRow),
    /// A model call that gives no row (`kind: "skipped_call"`).
    SkippedCall(SkippedCall),
    /// A rollout that gives no row at all (`kind: "no_rows"`).
    NoRows(NoRows),
}

/// One prompt, response and reward: what the trainer trains on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainingRow {
    #[serde(flatten)]
    pub origin: Origin,
    /// The row's place among the rollout's rows, from 0.
    pub row_index: usize,
    /// The call's place among the rollout's model calls, from 0 (1.x: its
    /// `model_request` events; 0.x: the LLM-call spans the adapter finds).
    pub call_index: usize,
    /// The model that answered (1.x: the gateway's server; 0.x:
    /// `gen_ai.response.model`, else `gen_ai.request.model`).
    pub model: Option<String>,
    /// 1.x: the model server's version (the weights' version).
    pub model_version: Option<i64>,
    pub prompt_token_ids: Vec<i64>,
    pub response_token_ids: Vec<i64>,
    /// One log-probability per response token, when every one was recorded.
    pub response_log_probs: Option<Vec<f64>>,
    /// 1.x: the rollout's reward, on its last row only; 0.x: the reward the
    /// adapter matched to this call.
    pub reward: Option<f64>,
    /// The prompt's image URLs, in order (`None` for a text-only prompt).
    pub image_urls: Option<Vec<String>>,
    /// 1.x: the MoE routing tensor, as recorded (training calls with
    /// routing enabled).
    pub routed_experts: Option<Json>,
    /// 0.x: the agent the call was made in (`*` outside any named agent).
    pub agent_name: Option<String>,
    /// 0.x: the model's response id (`gen_ai.response.id`).
    pub response_id: Option<String>,
}

/// Why a model call gives no training row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// The model server answered with an error (1.x: `status` is `error` or
    /// the HTTP status is 400 or more).
    FailedCall,
    /// No response token ids were recorded (the model server was not asked
    /// for them, or does not return them); 0.x: no prompt or no response
    /// token ids.
    NoTokenIds,
    /// 1.x: a later call with the same prompt token ids replaces it.
    Superseded,
    /// Token ids were recorded but are not a list of integers.
    MalformedTokenIds,
}

/// A model call that gives no training row, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkippedCall {
    #[serde(flatten)]
    pub origin: Origin,
    /// As [`TrainingRow::call_index`].
    pub call_index: usize,
    pub model: Option<String>,
    pub model_version: Option<i64>,
    pub reason: SkipReason,
    /// 1.x: the HTTP status of the model server's answer.
    pub http_status: Option<i64>,
    /// 1.x: the model server's error, as JSON text.
    pub error: Option<String>,
    /// 0.x: the reward the adapter matched to this call (lost with it).
    pub reward: Option<f64>,
}

/// Why a rollout gives no training row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonCode {
    /// 0.x: the attempt has no spans.
    NoSpans,
    /// No model call was recorded (1.x: through the gateway; 0.x: no span
    /// named like `openai.chat.completion`).
    NoModelCalls,
    /// Calls the model server answered with an error (`count` of them).
    FailedCalls,
    /// Calls without token ids (`count` of them).
    NoTokenIds,
    /// Calls whose token ids are not lists of integers (`count`).
    MalformedTokenIds,
    /// No reward was recorded.
    NoReward,
    /// The last reward is not a number (`detail`: its JSON).
    RewardNotANumber,
    /// The rollout failed (`detail`: its error message, if any).
    RolloutFailed,
    /// The rollout has not finished.
    NotFinished,
}

/// One reason a rollout gives no training row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RolloutReason {
    pub code: ReasonCode,
    /// How many calls the reason applies to, where it counts calls.
    pub count: Option<usize>,
    pub detail: Option<String>,
}

/// A rollout that gives no training row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoRows {
    #[serde(flatten)]
    pub origin: Origin,
    /// Model calls recorded (before any de-duplication).
    pub model_calls: usize,
    pub reasons: Vec<RolloutReason>,
}

/// One message of a conversation, as TRL's chat format reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, `tool` as recorded (`unknown` when the
    /// record has none).
    pub role: String,
    /// The text: a string content as is, a list's text parts joined by a
    /// newline (other parts, such as images, left out), empty for none.
    pub content: String,
    /// The assistant's tool calls, as recorded (OpenAI's list).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Json>,
    /// The tool call a `tool` message answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The author's name, when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl ChatMessage {
    /// A message of `role` with `content` only.
    pub fn text(role: &str, content: String) -> Self {
        Self {
            role: role.to_owned(),
            content,
            tool_calls: None,
            tool_call_id: None,
            name: None,
        }
    }
}

/// One rollout as one conversation: the `messages` layout.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Conversation {
    /// The conversation, in TRL's `{"role", "content"}` format.
    pub messages: Vec<ChatMessage>,
    /// The rollout's reward (1.x: the last reward event's number; 0.x: the
    /// last reward span's primary value).
    pub reward: Option<f64>,
    #[serde(flatten)]
    pub origin: Origin,
    /// The rollout's status (`succeeded`, `failed`, ...).
    pub status: String,
    /// `train`, `val` or `test`, when set.
    pub mode: Option<String>,
    /// The model of the call the conversation ends with.
    pub model: Option<String>,
    /// Model calls recorded.
    pub model_calls: usize,
    /// Calls whose prompt and answer the conversation holds, in order
    /// (the others, such as a side call with another context, are not in it).
    pub calls_in_conversation: usize,
}
