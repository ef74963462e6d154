//! The rollbacks of dropped transactions still on their way, which the
//! next transactions of this server wait for.
//!
//! A transaction dropped without committing rolls back on a task of its own
//! (`Drop` cannot wait). Until that `ROLLBACK` ran, its row locks stay: a
//! claim of another connection skips the queue entries it took
//! (`SKIP LOCKED`) and other writes wait for them. A transaction therefore
//! begins once the rollbacks started before it have ended, as on the other
//! backends, where a drop rolls back at once: what a dropped transaction
//! took is back for the next one. Other servers sharing the database do
//! not wait (the rollback follows within one round trip).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// How many dropped transactions of one store are still rolling back.
pub(super) struct PendingRollbacks {
    count: watch::Sender<usize>,
}

/// One rollback on its way; it ends when this is dropped.
pub(super) struct PendingRollback(Arc<PendingRollbacks>);

impl PendingRollbacks {
    /// Returns an empty register.
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Self {
            count: watch::Sender::new(0),
        })
    }

    /// Counts a rollback from now until the returned guard is dropped.
    pub(super) fn start(self: &Arc<Self>) -> PendingRollback {
        self.count.send_modify(|count| *count += 1);
        PendingRollback(self.clone())
    }

    /// Returns once no rollback is on its way, or after `deadline` (a
    /// rollback's own bound: the connection is closed when it is not done
    /// by then, which rolls it back in the database).
    pub(super) async fn settled(&self, deadline: Duration) {
        if *self.count.borrow() == 0 {
            return;
        }
        let mut count = self.count.subscribe();
        let _ = tokio::time::timeout(deadline, count.wait_for(|count| *count == 0)).await;
    }
}

impl Drop for PendingRollback {
    fn drop(&mut self) {
        self.0.count.send_modify(|count| *count -= 1);
    }
}
