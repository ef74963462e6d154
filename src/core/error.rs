//! The one error type of the store. The API layer maps each variant to a gRPC
//! status code in a single exhaustive match.

/// An error returned by a store operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// An id names nothing (unknown rollout, attempt, resources or worker).
    #[error("{0}")]
    NotFound(String),
    /// The request is malformed; nothing was written.
    #[error("{0}")]
    InvalidArgument(String),
    /// The request is well-formed but the current state does not allow it.
    #[error("{0}")]
    FailedPrecondition(String),
    /// The backend cannot be reached or the server is shutting down; retrying may succeed.
    #[error("{0}")]
    Unavailable(String),
    /// A bug or an unexpected backend failure; details are logged, not sent to clients.
    #[error("{0}")]
    Internal(String),
}

/// Result of a store operation.
pub type StoreResult<T> = Result<T, StoreError>;

impl StoreError {
    /// Returns upstream's error for an unknown rollout.
    pub fn rollout_not_found(rollout_id: &str) -> Self {
        Self::NotFound(format!("Rollout {rollout_id} not found"))
    }

    /// Returns upstream's error for an unknown attempt.
    pub fn attempt_not_found(rollout_id: &str, attempt_id: &str) -> Self {
        Self::NotFound(format!(
            "Attempt {attempt_id} not found for rollout {rollout_id}"
        ))
    }

    /// Returns upstream's error for an unknown row of an update (its
    /// primary key column and value).
    pub fn item_not_found(key: &str, value: &str) -> Self {
        Self::NotFound(format!(
            "Item does not exist with primary key(s): {key}='{value}'"
        ))
    }

    /// Returns upstream's error for an unknown resources snapshot.
    pub fn resources_not_found(resources_id: &str) -> Self {
        Self::NotFound(format!("Resources {resources_id} not found"))
    }

    /// Returns upstream's error for an unknown worker.
    pub fn worker_not_found(worker_id: &str) -> Self {
        Self::NotFound(format!("Worker {worker_id} not found"))
    }

    /// Returns upstream's error for an attempt update on a rollout without attempts.
    pub fn no_attempts(rollout_id: &str) -> Self {
        Self::FailedPrecondition(format!("No attempts found for rollout {rollout_id}"))
    }

    /// Returns a bad-input error.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::InvalidArgument(message.into())
    }
}
