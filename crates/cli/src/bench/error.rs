//! What a benchmark run fails with.

/// Error of a benchmark run (setup or a failed call outside the measured loop).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BenchError(String);

impl BenchError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl From<tonic::Status> for BenchError {
    fn from(status: tonic::Status) -> Self {
        Self(super::stats::status_text(&status))
    }
}

/// Result of a benchmark step.
pub type BenchResult<T> = Result<T, BenchError>;
