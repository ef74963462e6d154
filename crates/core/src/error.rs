//! The one error type of the store. The API layer maps each variant to a gRPC
//! status code in a single exhaustive match.
//!
//! Messages that quote a client's input quote it through [`echo`], and every
//! message an adapter sends is cut to [`MESSAGE_LIMIT`], so that neither an
//! answer nor a log line grows with the input.

use std::borrow::Cow;

/// Longest part of a client's input that an error message quotes, in bytes.
pub const ECHO_LIMIT: usize = 128;

/// Longest error message sent to a client (and logged), in bytes.
pub const MESSAGE_LIMIT: usize = 1024;

/// Returns `input` as an error message quotes it: whole when it is at most
/// [`ECHO_LIMIT`] bytes, else a prefix and its length.
pub fn echo(input: &str) -> Cow<'_, str> {
    bounded(input, ECHO_LIMIT)
}

/// Returns `text` when it is at most `limit` bytes, else its longest prefix
/// of at most `limit` bytes that ends on a character boundary, followed by
/// `... (N bytes)` with the whole length.
pub fn bounded(text: &str, limit: usize) -> Cow<'_, str> {
    if text.len() <= limit {
        return Cow::Borrowed(text);
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}... ({} bytes)", &text[..end], text.len()))
}

/// An error returned by a store operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// An id names nothing (unknown rollout, attempt, resources or worker).
    #[error("{0}")]
    NotFound(String),
    /// What the request creates exists already; nothing was written.
    #[error("{0}")]
    AlreadyExists(String),
    /// The request is malformed; nothing was written.
    #[error("{0}")]
    InvalidArgument(String),
    /// The request is well-formed but the current state does not allow it.
    #[error("{0}")]
    FailedPrecondition(String),
    /// The caller's token may not do this for the worker the request names
    /// ([`crate::access::Caller`]); nothing was written.
    #[error("{0}")]
    PermissionDenied(String),
    /// The request is larger than a size limit; nothing was written and
    /// the same request can never succeed (it must be split).
    #[error("{0}")]
    TooLarge(String),
    /// The call would take its namespace over one of its quotas
    /// ([`crate::namespace::Quotas`]); nothing was written. The same call
    /// may succeed once the namespace holds less (rollouts dequeued, spans
    /// deleted by retention) or its quota is raised.
    #[error("{0}")]
    QuotaExceeded(String),
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
        Self::NotFound(format!("Rollout {} not found", echo(rollout_id)))
    }

    /// Returns upstream's error for an unknown attempt.
    pub fn attempt_not_found(rollout_id: &str, attempt_id: &str) -> Self {
        Self::NotFound(format!(
            "Attempt {} not found for rollout {}",
            echo(attempt_id),
            echo(rollout_id)
        ))
    }

    /// Returns upstream's error for an unknown row of an update (its
    /// primary key column and value).
    pub fn item_not_found(key: &str, value: &str) -> Self {
        Self::NotFound(format!(
            "Item does not exist with primary key(s): {key}='{}'",
            echo(value)
        ))
    }

    /// Returns upstream's error for an unknown resources snapshot.
    pub fn resources_not_found(resources_id: &str) -> Self {
        Self::NotFound(format!("Resources {} not found", echo(resources_id)))
    }

    /// Returns upstream's error for an unknown worker.
    pub fn worker_not_found(worker_id: &str) -> Self {
        Self::NotFound(format!("Worker {} not found", echo(worker_id)))
    }

    /// Returns upstream's error for an attempt update on a rollout without attempts.
    pub fn no_attempts(rollout_id: &str) -> Self {
        Self::FailedPrecondition(format!(
            "No attempts found for rollout {}",
            echo(rollout_id)
        ))
    }

    /// Returns a bad-input error.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::InvalidArgument(message.into())
    }

    /// Names item `index` of the batch `field` as the cause of a refusal
    /// (`updates[3]: ...`), keeping its kind; a backend failure
    /// (unavailable, internal) or a quota (the whole call's) is nobody's
    /// item and stays as it is.
    pub fn in_item(self, field: &str, index: usize) -> Self {
        let named = |message: String| item_message(field, index, &message);
        match self {
            Self::NotFound(message) => Self::NotFound(named(message)),
            Self::AlreadyExists(message) => Self::AlreadyExists(named(message)),
            Self::InvalidArgument(message) => Self::InvalidArgument(named(message)),
            Self::FailedPrecondition(message) => Self::FailedPrecondition(named(message)),
            Self::PermissionDenied(message) => Self::PermissionDenied(named(message)),
            Self::TooLarge(message) => Self::TooLarge(named(message)),
            Self::QuotaExceeded(_) | Self::Unavailable(_) | Self::Internal(_) => self,
        }
    }

    /// Returns the error of a wait or stream that the server's shutdown cut
    /// short before it had an answer: retrying (on another server, or on
    /// this one once it is back) gets one.
    pub fn shutting_down() -> Self {
        Self::Unavailable(SHUTTING_DOWN.to_owned())
    }
}

/// Prefixes `message` with the batch item it is about (`updates[3]: ...`):
/// the one spelling of an item's refusal, for the core and the adapters.
pub fn item_message(field: &str, index: usize, message: &str) -> String {
    format!("{field}[{index}]: {message}")
}

/// The message of every call that the server's shutdown cut short.
pub const SHUTTING_DOWN: &str = "the server is shutting down; reconnect";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_is_named_in_a_refusal_but_not_in_a_backend_failure() {
        let named = StoreError::rollout_not_found("ro-1").in_item("updates", 3);
        assert_eq!(
            named,
            StoreError::NotFound("updates[3]: Rollout ro-1 not found".to_owned())
        );
        let refused = StoreError::no_attempts("ro-1").in_item("updates", 0);
        assert!(
            matches!(refused, StoreError::FailedPrecondition(m) if m.starts_with("updates[0]: No attempts"))
        );
        let down = StoreError::Unavailable("database down".to_owned());
        assert_eq!(down.clone().in_item("updates", 1), down);
    }

    #[test]
    fn echoes_short_inputs_whole_and_long_ones_as_a_prefix() {
        assert_eq!(echo("ro-1"), "ro-1");
        let long = "é".repeat(ECHO_LIMIT);
        let echoed = echo(&long);
        assert!(echoed.len() < ECHO_LIMIT + 20, "{echoed}");
        assert!(echoed.ends_with(&format!("... ({} bytes)", long.len())));
        assert!(echoed.starts_with(&"é".repeat(ECHO_LIMIT / 2)));
        let rollout = StoreError::rollout_not_found(&"x".repeat(1 << 20)).to_string();
        assert!(rollout.len() < 200, "{rollout}");
    }
}
