//! Limits the store puts on what a client may ask of it, so that no request
//! can overflow a clock or a counter.

use std::time::Duration;

/// The longest any call waits (dequeue waits, rollout waits, completion
/// watches): longer client durations are clamped to it, so a wait of
/// `i64::MAX` seconds means "until shutdown" instead of overflowing the clock.
pub const LONGEST_WAIT: Duration = Duration::from_secs(86_400 * 365);

/// The largest explicit span sequence id accepted (2^53 - 1): every value up
/// to it is exact in a JSON double (Python and JavaScript clients), and a
/// rollout's counter raised to it can still count on without overflowing.
pub const LARGEST_SEQUENCE_ID: i64 = (1 << 53) - 1;

/// Returns the instant `wait` from now, clamped to [`LONGEST_WAIT`].
pub fn deadline_after(wait: Duration) -> tokio::time::Instant {
    tokio::time::Instant::now() + wait.min(LONGEST_WAIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_duration_is_clamped_instead_of_overflowing() {
        let before = tokio::time::Instant::now();
        let far = deadline_after(Duration::MAX);
        let after = tokio::time::Instant::now();
        assert!(before + LONGEST_WAIT <= far && far <= after + LONGEST_WAIT);
    }
}
