//! Limits the store puts on what a client may ask of it, so that no request
//! can overflow a clock or a counter, exhaust a backend's bind parameters or
//! hold more memory than the pod has.
//!
//! [`RequestLimits`] is the one place the request limits live: the engine
//! checks the counts (ids per list, items per batch) and clamps waits, the
//! adapters check message sizes, and `GetCapabilities` reports them all.

use std::time::Duration;

use super::error::StoreError;

/// The default longest wait: a year, so that a wait of `i64::MAX` seconds
/// means "until shutdown" instead of overflowing the clock.
pub const LONGEST_WAIT: Duration = Duration::from_secs(86_400 * 365);

/// The largest explicit span sequence id accepted (2^53 - 1): every value up
/// to it is exact in a JSON double (Python and JavaScript clients), and a
/// rollout's counter raised to it can still count on without overflowing.
pub const LARGEST_SEQUENCE_ID: i64 = (1 << 53) - 1;

/// The request limits of a server (docs/configuration.md#limits). The defaults suit the
/// Helm chart's 2 GiB pod and stay below the bind-parameter limits of SQLite
/// (32,766) and PostgreSQL (65,535), so that no list reaches a backend it
/// could fail on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    /// Ids in one list: the ids a call waits for or watches, and an id
    /// filter of a query or a subscription.
    pub max_ids_per_list: usize,
    /// Items in one batch: rollouts enqueued or created, spans added,
    /// sequence ids allocated, rollouts claimed by one dequeue.
    pub max_batch_items: usize,
    /// Largest message of a control call (reads, queries, waits, dequeues,
    /// heartbeats, sequence ids, subscriptions), in bytes.
    pub max_control_message_bytes: usize,
    /// Largest request that carries payloads (span and batch writes,
    /// rollout inputs, resources, OTLP exports, HTTP bodies), in bytes.
    pub max_message_bytes: usize,
    /// The longest any call waits: longer client durations are clamped to it.
    pub longest_wait: Duration,
}

impl Default for RequestLimits {
    fn default() -> Self {
        Self {
            max_ids_per_list: 10_000,
            max_batch_items: 10_000,
            max_control_message_bytes: 4 * 1024 * 1024,
            max_message_bytes: 64 * 1024 * 1024,
            longest_wait: LONGEST_WAIT,
        }
    }
}

impl RequestLimits {
    /// Returns the limits with every value at least its smallest sensible
    /// value (one id, one item, 1 KiB, a millisecond), and control messages
    /// no larger than payload messages, or the reason they cannot be used.
    pub fn validated(self) -> Result<Self, String> {
        if self.max_ids_per_list == 0 || self.max_batch_items == 0 {
            return Err("the ids per list and items per batch must be at least 1".into());
        }
        if self.max_control_message_bytes < 1024 || self.max_message_bytes < 1024 {
            return Err("message limits must be at least 1024 bytes".into());
        }
        if self.max_control_message_bytes > self.max_message_bytes {
            return Err(format!(
                "the control message limit ({}) must not exceed the message limit ({})",
                self.max_control_message_bytes, self.max_message_bytes
            ));
        }
        if self.longest_wait < Duration::from_millis(1) {
            return Err("the longest wait must be at least a millisecond".into());
        }
        Ok(self)
    }

    /// Refuses a list of `count` ids over [`RequestLimits::max_ids_per_list`]
    /// (INVALID_ARGUMENT: the client must split it; a retry cannot succeed).
    pub fn check_ids(&self, field: &str, count: usize) -> Result<(), StoreError> {
        over(field, count, self.max_ids_per_list, "ids")
    }

    /// Refuses a batch of `count` items over [`RequestLimits::max_batch_items`].
    pub fn check_batch(&self, field: &str, count: usize) -> Result<(), StoreError> {
        over(field, count, self.max_batch_items, "items")
    }

    /// Returns `items` when the batch is within
    /// [`RequestLimits::max_batch_items`]: the adapters' guard before they
    /// read any item, so that a batch over the limit answers with the limit
    /// whatever its items hold and is not converted first (the engine checks
    /// again, for every caller).
    pub fn batch<B: AsRef<[T]>, T>(&self, field: &str, items: B) -> Result<B, StoreError> {
        self.check_batch(field, items.as_ref().len())?;
        Ok(items)
    }

    /// Returns `ids` when the list is within
    /// [`RequestLimits::max_ids_per_list`]: the adapters' guard before they
    /// read any id, as [`RequestLimits::batch`] is for batches (the engine
    /// checks again, for every caller).
    pub fn ids<L: AsRef<[T]>, T>(&self, field: &str, ids: L) -> Result<L, StoreError> {
        self.check_ids(field, ids.as_ref().len())?;
        Ok(ids)
    }

    /// Returns the instant `wait` from now, clamped to the longest wait.
    pub fn deadline_after(&self, wait: Duration) -> tokio::time::Instant {
        tokio::time::Instant::now() + wait.min(self.longest_wait)
    }
}

/// Reads a wait a client gives in float seconds (agent-lightning's APIs):
/// `NaN` is refused (no clock reaches it), an infinite wait has no limit
/// (`None`), a negative one does not wait; any wait is then clamped to the
/// longest wait ([`RequestLimits::deadline_after`]).
pub fn wait_seconds(field: &str, seconds: f64) -> Result<Option<Duration>, StoreError> {
    if seconds.is_nan() {
        return Err(StoreError::invalid(format!("{field} must be a number")));
    }
    if seconds == f64::INFINITY {
        return Ok(None);
    }
    let longest = LONGEST_WAIT.as_secs_f64();
    Ok(Some(Duration::from_secs_f64(seconds.clamp(0.0, longest))))
}

fn over(field: &str, count: usize, limit: usize, what: &str) -> Result<(), StoreError> {
    if count > limit {
        return Err(StoreError::invalid(format!(
            "{field} holds {count} {what}, more than the limit of {limit}; split the request"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_in_float_seconds_are_refused_only_when_no_clock_reaches_them() {
        assert!(wait_seconds("timeout", f64::NAN).is_err());
        assert_eq!(wait_seconds("timeout", f64::INFINITY), Ok(None));
        assert_eq!(wait_seconds("timeout", -3.0), Ok(Some(Duration::ZERO)));
        assert_eq!(
            wait_seconds("timeout", 1.5),
            Ok(Some(Duration::from_millis(1500)))
        );
        assert_eq!(wait_seconds("timeout", 1e300), Ok(Some(LONGEST_WAIT)));
    }

    #[test]
    fn the_longest_duration_is_clamped_instead_of_overflowing() {
        let limits = RequestLimits::default();
        let before = tokio::time::Instant::now();
        let far = limits.deadline_after(Duration::MAX);
        let after = tokio::time::Instant::now();
        assert!(before + LONGEST_WAIT <= far && far <= after + LONGEST_WAIT);
    }

    #[test]
    fn counts_over_a_limit_are_invalid_arguments_naming_the_field() {
        let limits = RequestLimits {
            max_ids_per_list: 2,
            max_batch_items: 3,
            ..RequestLimits::default()
        };
        assert!(limits.check_ids("rollout_ids", 2).is_ok());
        let refused = limits.check_ids("rollout_ids", 3).unwrap_err();
        assert_eq!(
            refused,
            StoreError::invalid(
                "rollout_ids holds 3 ids, more than the limit of 2; split the request"
            )
        );
        assert!(limits.check_batch("spans", 3).is_ok());
        assert!(limits.check_batch("spans", 4).is_err());
        let ids = ["a", "", "c"];
        assert_eq!(limits.ids("rollout_ids", &ids[..2]), Ok(&ids[..2]));
        assert_eq!(
            limits.ids("rollout_ids", &ids[..]),
            Err(refused),
            "refused by its length, whatever its ids hold"
        );
    }

    #[test]
    fn unusable_limits_are_refused() {
        let defaults = RequestLimits::default();
        assert_eq!(defaults.validated(), Ok(defaults));
        for bad in [
            RequestLimits {
                max_ids_per_list: 0,
                ..defaults
            },
            RequestLimits {
                max_control_message_bytes: defaults.max_message_bytes + 1,
                ..defaults
            },
            RequestLimits {
                longest_wait: Duration::ZERO,
                ..defaults
            },
        ] {
            assert!(bad.validated().is_err(), "{bad:?}");
        }
    }
}
