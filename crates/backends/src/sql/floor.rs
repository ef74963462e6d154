//! The floor of the watchdog deadlines that a store remembers across
//! transactions, so that most operations skip the watchdog's due scan.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A lower bound of the watchdog deadlines: while `now` is not past it,
/// nothing is due and the due scan is skipped. A scan that found nothing
/// due sets it; every committed write of a deadline lowers it; it is
/// forgotten when a transaction's outcome is unknown.
///
/// Transactions of a shared database run concurrently, so a scan sets the
/// floor only if nothing lowered or forgot it since the scan began (its
/// snapshot may predate that write). Other servers' writes are not seen
/// here at all: on a shared database the floor is trusted only for `ttl`
/// after the scan that set it, so that an operation on one server sees
/// the verdicts of deadlines written through another within `ttl`, as the
/// watchdog timer of each server does within its interval.
#[derive(Debug)]
pub struct DeadlineFloor {
    /// How long a scan's floor is trusted (`None`: until changed).
    ttl: Option<Duration>,
    state: Mutex<FloorState>,
}

#[derive(Debug, Default)]
struct FloorState {
    /// No deadline is earlier than this, as of the given instant.
    floor: Option<(i64, Instant)>,
    /// Counts the changes that are not a scan's.
    generation: u64,
}

/// Where a due scan started, for [`DeadlineFloor::found`].
#[derive(Debug, Clone, Copy)]
pub struct ScanStart(u64);

impl DeadlineFloor {
    /// Returns an unknown floor, trusted for `ttl` once set (`None`: until
    /// a write changes it).
    pub fn new(ttl: Option<Duration>) -> Self {
        Self {
            ttl,
            state: Mutex::new(FloorState::default()),
        }
    }

    /// Returns whether nothing can be due at `now` (nanoseconds), without a
    /// query.
    pub fn nothing_due(&self, now: i64) -> bool {
        let state = self.state.lock();
        state.floor.is_some_and(|(floor, set_at)| {
            now <= floor && self.ttl.is_none_or(|ttl| set_at.elapsed() < ttl)
        })
    }

    /// Notes that a scan starts: call before its query.
    pub fn scan_starts(&self) -> ScanStart {
        ScanStart(self.state.lock().generation)
    }

    /// Records the earliest deadline a scan found (`None`: no deadline),
    /// unless a write changed the floor since the scan started.
    pub fn found(&self, start: ScanStart, earliest: Option<i64>) {
        let mut state = self.state.lock();
        if state.generation == start.0 {
            state.floor = Some((earliest.unwrap_or(i64::MAX), Instant::now()));
        }
    }

    /// Lowers the floor to a deadline a transaction wrote. Call when the
    /// write becomes visible to other transactions (and may be called
    /// before too: a low floor only costs a scan).
    pub fn lower(&self, deadline: i64) {
        let mut state = self.state.lock();
        state.generation += 1;
        if let Some((floor, _)) = &mut state.floor {
            *floor = (*floor).min(deadline);
        }
    }

    /// Forgets the floor: the next operation scans.
    pub fn forget(&self) {
        let mut state = self.state.lock();
        state.generation += 1;
        state.floor = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_sets_the_floor_unless_a_write_came_between() {
        let floor = DeadlineFloor::new(None);
        assert!(!floor.nothing_due(0));
        let start = floor.scan_starts();
        floor.found(start, Some(100));
        assert!(floor.nothing_due(100));
        assert!(!floor.nothing_due(101));
        floor.lower(50);
        assert!(!floor.nothing_due(60));

        let start = floor.scan_starts();
        floor.lower(10);
        floor.found(start, Some(100));
        assert!(
            !floor.nothing_due(20),
            "a stale scan must not raise the floor"
        );

        let start = floor.scan_starts();
        floor.found(start, None);
        assert!(floor.nothing_due(i64::MAX));
        floor.forget();
        assert!(!floor.nothing_due(0));
    }

    #[test]
    fn a_shared_floor_expires() {
        let floor = DeadlineFloor::new(Some(Duration::ZERO));
        let start = floor.scan_starts();
        floor.found(start, Some(100));
        assert!(!floor.nothing_due(0));
    }
}
