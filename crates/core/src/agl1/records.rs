//! agent-lightning 1.x's records over the store: its rollout states and
//! fields, events, model servers, the gateway's pause, replicas and the
//! terminal cursor's completions.

use super::super::error::echo;
/// An `Idempotency-Key` of an event POST, scoped to its rollout and
/// attempt: the digest of its event type and data.
pub use super::super::idempotency::IdempotencyKey;
use super::super::model::{Json, Rollout, RolloutMode, RolloutStatus, Timestamp};
use super::super::training::usage::ModelCall;

/// The attempt a 1.x rollout runs when nobody named one (upstream's
/// `DEFAULT_ATTEMPT_ID`).
pub const DEFAULT_ATTEMPT_ID: &str = "0";

/// The lifecycle state of a 1.x rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Agl1State {
    Queuing,
    Running,
    Succeeded,
    Failed,
}

impl crate::model::Named for Agl1State {
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl Agl1State {
    /// Every state, in upstream's declaration order.
    pub const ALL: [Agl1State; 4] = [
        Agl1State::Queuing,
        Agl1State::Running,
        Agl1State::Succeeded,
        Agl1State::Failed,
    ];

    /// Returns the state's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queuing => "queuing",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
        }
    }

    /// Parses a state's name.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Returns the 1.x state a core status shows as: waiting statuses are
    /// `queuing`, held ones `running`, and a cancelled rollout has failed.
    pub fn of(status: RolloutStatus) -> Self {
        match status {
            RolloutStatus::Queuing | RolloutStatus::Requeuing => Self::Queuing,
            RolloutStatus::Preparing | RolloutStatus::Running => Self::Running,
            RolloutStatus::Succeeded => Self::Succeeded,
            RolloutStatus::Failed | RolloutStatus::Cancelled => Self::Failed,
        }
    }

    /// Returns the core statuses that show as this state.
    pub fn statuses(self) -> &'static [RolloutStatus] {
        match self {
            Self::Queuing => &[RolloutStatus::Queuing, RolloutStatus::Requeuing],
            Self::Running => &[RolloutStatus::Preparing, RolloutStatus::Running],
            Self::Succeeded => &[RolloutStatus::Succeeded],
            Self::Failed => &[RolloutStatus::Failed, RolloutStatus::Cancelled],
        }
    }

    /// Returns whether a PATCH may move a rollout from this state to `to`
    /// (upstream's `VALID_TRANSITIONS`): terminal states are final.
    pub fn allows(self, to: Agl1State) -> bool {
        matches!(
            (self, to),
            (Self::Queuing, Self::Running | Self::Failed)
                | (Self::Running, Self::Succeeded | Self::Failed)
        )
    }

    /// Returns true for `succeeded` and `failed`.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

impl std::fmt::Display for Agl1State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The fields of a 1.x rollout that the core rollout does not have,
/// stored with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Agl1Fields {
    /// The controller-facing config as upstream renders it
    /// (`timeout_seconds`, `local`, `k8s`); the watchdog does not enforce
    /// its timeout: the 1.x controller does (docs/agent-lightning-1x.md).
    pub config: Json,
    pub k8s_job_name: Option<String>,
    pub last_attempt_id: Option<String>,
    pub error_message: Option<String>,
    /// 1 at creation, bumped by every PATCH that changes something.
    pub version: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A 1.x rollout: a core rollout with its 1.x fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Agl1Rollout {
    pub rollout: Rollout,
    pub fields: Agl1Fields,
}

impl Agl1Rollout {
    /// Returns the 1.x state of the rollout.
    pub fn state(&self) -> Agl1State {
        Agl1State::of(self.rollout.status)
    }

    /// Returns upstream's `is_train`: the rollout's mode, `train` when none
    /// was chosen.
    pub fn is_train(&self) -> bool {
        is_train(self.rollout.mode)
    }

    /// Returns the attempt whose events the rollout's event queries read:
    /// `last_attempt_id`, or [`DEFAULT_ATTEMPT_ID`].
    pub fn event_attempt_id(&self) -> &str {
        self.fields
            .last_attempt_id
            .as_deref()
            .unwrap_or(DEFAULT_ATTEMPT_ID)
    }
}

/// A JSON payload as the store holds it (a rollout's input, metadata, 1.x
/// config): valid JSON text, its numbers as the client wrote them. Reads
/// that only show a payload carry it as this text from the row to the
/// answer, without building and writing out a `Json` tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonText(String);

impl JsonText {
    /// Returns the text of a value, as the SQL backends store it.
    pub fn of(value: &Json) -> Self {
        Self(value.to_string())
    }

    /// Checks stored text without building a tree (a full syntax check).
    pub fn parse(text: String) -> Result<Self, serde_json::Error> {
        serde_json::from_str::<&serde_json::value::RawValue>(&text)?;
        Ok(Self(text))
    }

    /// Returns the JSON text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A 1.x rollout as its GET shows it (upstream's `RolloutDetail`): the
/// fields the answer prints, its payloads as [`JsonText`], and the attempts
/// that have events, ordered by their first event. The trainer polls it.
#[derive(Debug, Clone, PartialEq)]
pub struct Agl1RolloutDetail {
    pub rollout_id: String,
    pub status: RolloutStatus,
    pub mode: Option<RolloutMode>,
    pub input: JsonText,
    pub metadata: JsonText,
    /// The 1.x config ([`Agl1Fields::config`]).
    pub config: JsonText,
    pub k8s_job_name: Option<String>,
    pub last_attempt_id: Option<String>,
    pub error_message: Option<String>,
    pub version: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The rollout's watchdog deadline (not shown: a cached detail is
    /// served only up to it, see [`cache`]).
    pub deadline: Option<Timestamp>,
    pub attempts: Vec<String>,
}

impl Agl1RolloutDetail {
    /// Returns the detail of a rollout and its 1.x fields, with its
    /// watchdog deadline and its attempts.
    pub fn of(
        rollout: &Rollout,
        fields: &Agl1Fields,
        deadline: Option<Timestamp>,
        attempts: Vec<String>,
    ) -> Self {
        Self {
            rollout_id: rollout.rollout_id.clone(),
            status: rollout.status,
            mode: rollout.mode,
            input: JsonText::of(&rollout.input),
            metadata: JsonText::of(&rollout.metadata),
            config: JsonText::of(&fields.config),
            k8s_job_name: fields.k8s_job_name.clone(),
            last_attempt_id: fields.last_attempt_id.clone(),
            error_message: fields.error_message.clone(),
            version: fields.version,
            created_at: fields.created_at,
            updated_at: fields.updated_at,
            deadline,
            attempts,
        }
    }

    /// Returns the 1.x state of the rollout.
    pub fn state(&self) -> Agl1State {
        Agl1State::of(self.status)
    }

    /// Returns upstream's `is_train`.
    pub fn is_train(&self) -> bool {
        is_train(self.mode)
    }
}

/// Returns upstream's `is_train` for a core mode (no mode: train).
pub fn is_train(mode: Option<RolloutMode>) -> bool {
    !matches!(mode, Some(RolloutMode::Val | RolloutMode::Test))
}

/// Returns the core mode of upstream's `is_train`.
pub fn mode_of(is_train: bool) -> RolloutMode {
    if is_train {
        RolloutMode::Train
    } else {
        RolloutMode::Val
    }
}

/// A 1.x rollout to create.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAgl1Rollout {
    /// The caller's id: creating an existing id returns that rollout
    /// untouched. `None` draws a new id.
    pub rollout_id: Option<String>,
    pub input: Json,
    pub is_train: bool,
    /// The config as upstream renders it.
    pub config: Json,
    /// The metadata as upstream renders it.
    pub metadata: Json,
}

/// A partial update of a 1.x rollout's status: `None` leaves a field
/// alone, `Some(None)` writes null (a `state` of null is a transition to
/// nothing, which no state allows).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatusPatch {
    pub state: Option<Option<Agl1State>>,
    pub k8s_job_name: Option<Option<String>>,
    pub last_attempt_id: Option<Option<String>>,
    pub error_message: Option<Option<String>>,
}

impl StatusPatch {
    /// Returns true when the patch sets nothing (it then changes nothing,
    /// not even the version).
    pub fn is_empty(&self) -> bool {
        self.state.is_none()
            && self.k8s_job_name.is_none()
            && self.last_attempt_id.is_none()
            && self.error_message.is_none()
    }
}

/// Returns upstream's 409 message for a transition its state machine
/// forbids (`None`: a transition to null).
pub fn transition_error(rollout_id: &str, from: Agl1State, to: Option<Agl1State>) -> String {
    let to = to.map_or("None", Agl1State::as_str);
    format!(
        "Rollout {}: cannot transition {from} -> {to}",
        echo(rollout_id)
    )
}

/// Returns upstream's 404 message for an unknown 1.x rollout.
pub fn not_found(rollout_id: &str) -> String {
    format!("Rollout not found: {}", echo(rollout_id))
}

/// One event of a 1.x trajectory: arbitrary JSON of a type, recorded per
/// (rollout, attempt) in append order with the server's time.
#[derive(Debug, Clone, PartialEq)]
pub struct Agl1Event {
    pub event_type: String,
    pub rollout_id: String,
    pub attempt_id: String,
    pub timestamp: Timestamp,
    /// A JSON object, as JSON text (events are large and mostly passed
    /// through: they are parsed only where a rule reads them).
    pub data: String,
}

/// An event to append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAgl1Event {
    pub event_type: String,
    /// A JSON object, as JSON text.
    pub data: String,
    /// Whether the data holds a non-null `routed_experts` (a model request
    /// that may supersede the previous one's routing tensor).
    pub has_routed_experts: bool,
    /// The model version that served a model request, when the caller
    /// knows it (the gateway); `None` for other events, or to have it read
    /// from the data when needed ([`super::events::model_request`]).
    pub model_version: Option<i64>,
    /// What a model request's call used, when the caller knows it (the
    /// gateway); `None` for other events, or to have it read from the data
    /// ([`super::events::model_request`]).
    pub call: Option<ModelCall>,
    /// The client's `Idempotency-Key` with a digest of its request: a
    /// repeated key returns the event first recorded under it.
    pub idempotency: Option<IdempotencyKey>,
}

/// A stored event with its position in the store's event log.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    /// Store-wide append position (increasing; order within an attempt).
    pub pos: i64,
    pub event: Agl1Event,
}

/// A model server the gateway may route to, keyed by (model, endpoint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelServer {
    pub model: String,
    /// The OpenAI-compatible base URL, e.g. `http://vllm:8000/v1`.
    pub endpoint: String,
    pub version: i64,
}

/// The gateway's pause, shared by every server through the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pause {
    pub paused: bool,
    pub retry_after_seconds: i64,
    pub reason: Option<String>,
    /// Bumped by every pause and resume, so that servers can tell which
    /// pause they have applied.
    pub generation: i64,
}

impl Default for Pause {
    fn default() -> Self {
        Self {
            paused: false,
            retry_after_seconds: 5,
            reason: None,
            generation: 0,
        }
    }
}

/// What one server running the gateway reports through the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    pub server_id: String,
    /// Proxy calls in flight on that server.
    pub inflight: i64,
    /// The pause generation that server applies.
    pub generation_seen: i64,
    /// When it last reported; silent servers are presumed gone.
    pub heartbeat: Timestamp,
}

/// One entry of the completion log: a rollout that entered a terminal
/// status, at its position (0-based, append order, never shifted).
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub position: i64,
    pub rollout_id: String,
    /// The rollout, when it still exists and is a 1.x rollout.
    pub rollout: Option<Agl1Rollout>,
}

/// A page of the completion log.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CompletionPage {
    pub entries: Vec<Completion>,
    /// Entries in the whole log.
    pub total: i64,
}

/// Python's truthiness of a JSON value.
pub fn truthy(value: &Json) -> bool {
    match value {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Json::String(s) => !s.is_empty(),
        Json::Array(items) => !items.is_empty(),
        Json::Object(object) => !object.is_empty(),
    }
}
