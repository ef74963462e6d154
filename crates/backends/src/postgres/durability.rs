//! One durability wait shared by the transactions this server commits at
//! the same moment (leader and followers).
//!
//! A transaction commits asynchronously and is acknowledged once a later
//! synchronous commit (`CALL wait_durable()`, see `conn.rs`) is durable:
//! that commit's record is flushed after every record logged before it. A
//! wait whose call is sent after a transaction's `COMMIT` returned thus
//! covers that transaction, whoever sends it. So one wait runs at a time:
//! a transaction that commits while none runs leads, sending the wait with
//! its `COMMIT` (one round trip, as a transaction alone does); one that
//! commits while a wait runs sends only its `COMMIT` and follows: it is
//! durable once a wait sent after its `COMMIT` returned has succeeded,
//! which the first follower to find no wait running sends on its own
//! connection (for every follower waiting by then). Under load, one wait
//! (one more statement and commit in the database) serves many
//! transactions instead of one each.

use std::sync::Arc;

use tokio::sync::watch;

/// The waits of one server.
pub(super) struct Durability {
    /// Whether a wait is running, and the number of the last one sent.
    state: parking_lot::Mutex<State>,
    /// The number of the last wait that succeeded (waits end in the order
    /// they were sent: one runs at a time).
    durable: watch::Sender<u64>,
}

#[derive(Default)]
struct State {
    running: bool,
    sent: u64,
}

/// What a committing transaction does about durability.
pub(super) enum Role {
    /// Sends the wait with its `COMMIT`.
    Lead(Lead),
    /// Sends only its `COMMIT`, then calls [`Durability::follow`].
    Follow,
}

/// What a follower does next.
pub(super) enum Next {
    /// A wait sent after its `COMMIT` returned has succeeded.
    Durable,
    /// Sends the wait alone.
    Lead(Lead),
}

/// The running wait, sent by its holder: it ends when dropped, as failed
/// unless [`Lead::succeeded`] said otherwise (a holder cancelled midway
/// does not leave the followers waiting).
pub(super) struct Lead {
    durability: Arc<Durability>,
    wait: u64,
    ok: bool,
}

impl Lead {
    /// Ends the wait as succeeded.
    pub(super) fn succeeded(mut self) {
        self.ok = true;
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        self.durability.finished(self.wait, self.ok);
    }
}

impl Durability {
    /// Returns the register of a server with no wait running.
    pub(super) fn new() -> Self {
        Self {
            state: parking_lot::Mutex::new(State::default()),
            durable: watch::Sender::new(0),
        }
    }

    /// Returns the role of a transaction about to send its `COMMIT`.
    pub(super) fn commit(self: &Arc<Self>) -> Role {
        let mut state = self.state.lock();
        if state.running {
            return Role::Follow;
        }
        Role::Lead(self.lead(&mut state))
    }

    /// Starts the next wait.
    fn lead(self: &Arc<Self>, state: &mut State) -> Lead {
        state.running = true;
        state.sent += 1;
        Lead {
            durability: self.clone(),
            wait: state.sent,
            ok: false,
        }
    }

    /// Reports the end of wait number `wait`: `ok` when it succeeded.
    fn finished(&self, wait: u64, ok: bool) {
        let mut state = self.state.lock();
        debug_assert!(state.running && state.sent == wait);
        state.running = false;
        if ok {
            self.durable.send_modify(|durable| *durable = wait);
        } else {
            // Wakes the followers, who find no wait running.
            self.durable.send_modify(|_| {});
        }
    }

    /// Waits, as a transaction whose `COMMIT` has returned, until a wait
    /// sent since has succeeded, or until it must send one itself.
    pub(super) async fn follow(self: &Arc<Self>) -> Next {
        let mut durable = self.durable.subscribe();
        // Any wait sent from now on covers the COMMIT.
        let needed = {
            let mut state = self.state.lock();
            if !state.running {
                return Next::Lead(self.lead(&mut state));
            }
            state.sent + 1
        };
        loop {
            if durable.changed().await.is_err() {
                // The sender lives as long as `self`.
                unreachable!("the durability register outlives its followers");
            }
            if *durable.borrow_and_update() >= needed {
                return Next::Durable;
            }
            let mut state = self.state.lock();
            if !state.running {
                return Next::Lead(self.lead(&mut state));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lead(role: Role) -> Lead {
        match role {
            Role::Lead(lead) => lead,
            Role::Follow => panic!("expected to lead"),
        }
    }

    #[tokio::test]
    async fn a_follower_needs_a_wait_sent_after_its_commit() {
        let durability = Arc::new(Durability::new());
        let first = lead(durability.commit());
        assert!(matches!(durability.commit(), Role::Follow));
        let follower = durability.follow();
        tokio::pin!(follower);
        assert!(futures::poll!(follower.as_mut()).is_pending());
        // The running wait was sent before the follower's COMMIT returned:
        // its success does not cover the follower, which sends the next.
        first.succeeded();
        let Next::Lead(second) = follower.await else {
            panic!("the follower sends the next wait");
        };
        assert_eq!(second.wait, 2);
        second.succeeded();
        assert_eq!(*durability.durable.borrow(), 2);
    }

    #[tokio::test]
    async fn one_wait_makes_every_follower_durable() {
        let durability = Arc::new(Durability::new());
        let first = lead(durability.commit());
        // Two followers whose COMMITs returned while the first wait ran.
        let a = durability.follow();
        let b = durability.follow();
        tokio::pin!(a, b);
        assert!(futures::poll!(a.as_mut()).is_pending());
        assert!(futures::poll!(b.as_mut()).is_pending());
        first.succeeded();
        let Next::Lead(second) = a.await else {
            panic!("the first follower to wake sends the next wait");
        };
        assert!(futures::poll!(b.as_mut()).is_pending(), "b waits for it");
        second.succeeded();
        assert!(matches!(b.await, Next::Durable));
    }

    #[tokio::test]
    async fn a_wait_dropped_unfinished_makes_no_follower_durable() {
        let durability = Arc::new(Durability::new());
        let first = lead(durability.commit());
        let follower = durability.follow();
        tokio::pin!(follower);
        assert!(futures::poll!(follower.as_mut()).is_pending());
        drop(first);
        assert!(
            matches!(follower.await, Next::Lead(_)),
            "the follower sends a wait of its own"
        );
        assert_eq!(*durability.durable.borrow(), 0);
        let _next = lead(durability.commit());
    }
}
