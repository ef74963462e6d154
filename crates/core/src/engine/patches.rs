//! The partial updates the engine takes: the fields of a rollout or an attempt to
//! overwrite, and an attempt update with its worker.

use crate::ids::{AttemptId, RolloutId, WorkerId};
use crate::model::{AttemptStatus, Json, RolloutConfig, RolloutMode, RolloutStatus, Timestamp};

/// Fields of a rollout to overwrite; `None` leaves a field unchanged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RolloutPatch {
    pub input: Option<Json>,
    pub mode: Option<Option<RolloutMode>>,
    pub resources_id: Option<Option<String>>,
    pub status: Option<RolloutStatus>,
    pub config: Option<RolloutConfig>,
    pub metadata: Option<Json>,
}

/// Fields of an attempt to overwrite; `None` leaves a field unchanged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttemptPatch {
    pub status: Option<AttemptStatus>,
    pub worker_id: Option<WorkerId>,
    pub last_heartbeat_time: Option<Timestamp>,
    pub metadata: Option<Json>,
}

/// One attempt update of a batch ([`Engine::update_attempts`]): the
/// arguments of [`Engine::update_attempt`].
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptUpdate {
    pub rollout_id: RolloutId,
    /// An attempt id, or `latest`.
    pub attempt_id: AttemptId,
    pub patch: AttemptPatch,
    /// The writer's session epoch, checked when present.
    pub owner_epoch: Option<u64>,
}
