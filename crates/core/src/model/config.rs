//! A rollout's configuration, whose values can only be valid ones: every
//! API reads a client's config through these types, so that the rules of
//! its values are written once. Durations are finite and non-negative
//! ([`Seconds`]), at least one attempt is allowed ([`MaxAttempts`]), and a
//! retry condition holds only the statuses that can requeue a rollout
//! ([`RetryCondition`]). A value agent-lightning accepts but the store
//! cannot honour (a `NaN` timeout, which no clock can reach) is refused by
//! every API in its own dialect.

use std::fmt;

use super::status::AttemptStatus;
use crate::error::StoreError;

/// Why a number of seconds is not a duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecondsError {
    /// `NaN` or an infinity.
    NotFinite,
    /// Below zero.
    Negative,
}

impl SecondsError {
    /// Returns the refusal of `field`'s value.
    pub fn in_field(self, field: &str) -> StoreError {
        StoreError::invalid(format!("{field} must be a finite number >= 0"))
    }
}

/// A duration in seconds: finite and non-negative.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Seconds(f64);

impl Seconds {
    /// Returns `seconds` as a duration, or why it is not one.
    pub fn new(seconds: f64) -> Result<Self, SecondsError> {
        if !seconds.is_finite() {
            Err(SecondsError::NotFinite)
        } else if seconds < 0.0 {
            Err(SecondsError::Negative)
        } else {
            // -0.0 is 0.0: the stored form has one zero.
            Ok(Self(seconds + 0.0))
        }
    }

    /// Returns the number of seconds.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The number of attempts a rollout may run: 1 to `u32::MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MaxAttempts(u32);

impl MaxAttempts {
    /// One attempt, no retry (upstream's default).
    pub const ONE: Self = Self(1);

    /// The largest number of attempts.
    pub const LARGEST: i64 = u32::MAX as i64;

    /// Returns `count` as a number of attempts, `None` outside 1 to
    /// [`MaxAttempts::LARGEST`].
    pub fn new(count: i64) -> Option<Self> {
        u32::try_from(count).ok().filter(|&n| n >= 1).map(Self)
    }

    /// Returns the number of attempts, refusing `field`'s value outside
    /// 1 to [`MaxAttempts::LARGEST`].
    pub fn parse(field: &str, count: i64) -> Result<Self, StoreError> {
        Self::new(count).ok_or_else(|| {
            StoreError::invalid(format!(
                "{field} must be 1 to {}, got {count}",
                Self::LARGEST
            ))
        })
    }

    /// Returns the number of attempts.
    pub fn get(self) -> u32 {
        self.0
    }
}

/// The attempt statuses that requeue a rollout when its attempt ends in
/// one of them (below its [`MaxAttempts`]): only `failed`, `timeout` and
/// `unresponsive` can, so only they may be listed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RetryCondition(Vec<AttemptStatus>);

impl RetryCondition {
    /// The statuses a retry condition may hold, in upstream's order.
    pub const RETRYABLE: &'static [AttemptStatus] = &[
        AttemptStatus::Failed,
        AttemptStatus::Timeout,
        AttemptStatus::Unresponsive,
    ];

    /// Returns the condition of `statuses`, or the first status that
    /// cannot requeue a rollout.
    pub fn new(statuses: Vec<AttemptStatus>) -> Result<Self, AttemptStatus> {
        match statuses.iter().find(|status| !status.can_be_retried()) {
            Some(&status) => Err(status),
            None => Ok(Self(statuses)),
        }
    }

    /// Returns the condition of `statuses`, refusing `field`'s value when
    /// one of them cannot requeue a rollout.
    pub fn parse(field: &str, statuses: Vec<AttemptStatus>) -> Result<Self, StoreError> {
        Self::new(statuses).map_err(|status| {
            StoreError::invalid(format!(
                "{field} may only hold failed, timeout and unresponsive, got {status}"
            ))
        })
    }

    /// Returns the statuses, in the order given.
    pub fn statuses(&self) -> &[AttemptStatus] {
        &self.0
    }

    /// Returns whether an attempt that ended in `status` may be retried.
    pub fn contains(&self, status: AttemptStatus) -> bool {
        self.0.contains(&status)
    }
}

/// Timeouts and retry policy of a rollout.
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutConfig {
    /// Maximum run time of one attempt.
    pub timeout_seconds: Option<Seconds>,
    /// Maximum time without heartbeat.
    pub unresponsive_seconds: Option<Seconds>,
    /// Maximum number of attempts.
    pub max_attempts: MaxAttempts,
    /// Attempt statuses that allow a retry.
    pub retry_condition: RetryCondition,
}

impl Default for RolloutConfig {
    fn default() -> Self {
        Self {
            timeout_seconds: None,
            unresponsive_seconds: None,
            max_attempts: MaxAttempts::ONE,
            retry_condition: RetryCondition::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_finite_and_not_negative() {
        assert_eq!(Seconds::new(1.5).map(Seconds::get), Ok(1.5));
        assert_eq!(Seconds::new(0.0).map(Seconds::get), Ok(0.0));
        assert!(Seconds::new(-0.0).unwrap().get().is_sign_positive());
        assert_eq!(Seconds::new(f64::NAN), Err(SecondsError::NotFinite));
        assert_eq!(Seconds::new(f64::INFINITY), Err(SecondsError::NotFinite));
        assert_eq!(Seconds::new(-1e-9), Err(SecondsError::Negative));
        assert_eq!(
            SecondsError::Negative.in_field("config.timeout_seconds"),
            StoreError::invalid("config.timeout_seconds must be a finite number >= 0")
        );
    }

    #[test]
    fn attempts_and_retry_statuses_hold_only_what_can_happen() {
        assert_eq!(MaxAttempts::new(1), Some(MaxAttempts::ONE));
        assert_eq!(MaxAttempts::new(0), None);
        assert_eq!(MaxAttempts::new(MaxAttempts::LARGEST + 1), None);
        assert_eq!(
            MaxAttempts::new(MaxAttempts::LARGEST).unwrap().get(),
            u32::MAX
        );
        assert!(MaxAttempts::parse("max_attempts", -1).is_err());
        let retry = RetryCondition::new(RetryCondition::RETRYABLE.to_vec()).unwrap();
        assert!(retry.contains(AttemptStatus::Timeout));
        assert_eq!(
            RetryCondition::new(vec![AttemptStatus::Failed, AttemptStatus::Succeeded]),
            Err(AttemptStatus::Succeeded)
        );
    }
}
