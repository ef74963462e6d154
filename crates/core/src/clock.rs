//! Where the store reads the time its rules compare against: deadlines of
//! the watchdog (timeouts, unresponsiveness), span retention ages, session
//! leases and grace periods, worker heartbeats, and every timestamp it
//! writes (creation, start, end, events, replicas of the 1.x gateway).
//!
//! The engine owns one [`Clock`] ([`super::engine::EngineConfig::clock`])
//! and everything that reads domain time asks it. The server runs on
//! [`SystemClock`]; a test hands the engine a [`ManualClock`] and lets time
//! pass with [`ManualClock::advance`] instead of sleeping. Timers (how often
//! the watchdog or the retention runs, how long a wait lasts) stay tokio's:
//! they decide when a rule is checked, the clock decides what it finds.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::model::Timestamp;

/// A source of the current time.
pub trait Clock: std::fmt::Debug + Send + Sync + 'static {
    /// Returns the current time.
    fn now(&self) -> Timestamp;
}

/// The wall clock (UTC), the server's.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(i64::try_from(since.as_nanos()).unwrap_or(i64::MAX))
    }
}

/// A clock that stands still until [`ManualClock::advance`] moves it: what
/// a rule sees at a deadline no longer depends on a test's sleeps.
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// Returns a clock standing at `start`.
    pub fn new(start: Timestamp) -> Self {
        Self(AtomicI64::new(start.0))
    }

    /// Returns a clock standing at the wall clock's present time, so that
    /// timestamps look current.
    pub fn at_system_time() -> Self {
        Self::new(SystemClock.now())
    }

    /// Moves the clock forward by `by` (saturating).
    pub fn advance(&self, by: Duration) {
        let nanos = i64::try_from(by.as_nanos()).unwrap_or(i64::MAX);
        // A CAS loop keeps it saturating; fetch_add would wrap.
        let _ = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| {
                Some(now.saturating_add(nanos))
            });
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_advanced() {
        let clock = ManualClock::new(Timestamp(1_000));
        assert_eq!(clock.now(), Timestamp(1_000));
        assert_eq!(clock.now(), Timestamp(1_000));
        clock.advance(Duration::from_micros(2));
        assert_eq!(clock.now(), Timestamp(3_000));
        clock.advance(Duration::MAX);
        assert_eq!(clock.now(), Timestamp(i64::MAX));
    }

    #[test]
    fn the_system_clock_reads_the_present() {
        // 2020-01-01 in nanoseconds: the wall clock is past it.
        assert!(SystemClock.now() > Timestamp(1_577_836_800_000_000_000));
    }
}
