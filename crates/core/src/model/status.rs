//! The statuses and modes agent-lightning names: each enum with its names,
//! written once by a macro, and [`Named`], through which validators list the
//! names they accept.

/// An enum that agent-lightning's APIs write by name: the names a
/// validator accepts and lists in its refusals come from the enum itself.
pub trait Named: Copy + 'static {
    /// Returns agent-lightning's name of the value.
    fn name(self) -> &'static str;
}

macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$doc:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($(#[$doc])* $variant),+ }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// Returns agent-lightning's lowercase name of the value.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// Parses agent-lightning's lowercase name.
            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Named for $name {
            fn name(self) -> &'static str {
                self.as_str()
            }
        }
    };
}

string_enum! {
    /// Lifecycle status of a rollout.
    RolloutStatus {
        Queuing => "queuing",
        Preparing => "preparing",
        Running => "running",
        Failed => "failed",
        Succeeded => "succeeded",
        Cancelled => "cancelled",
        Requeuing => "requeuing",
    }
}

impl RolloutStatus {
    /// Returns true for statuses that wait in the queue (`queuing`, `requeuing`).
    pub fn is_queuing(self) -> bool {
        matches!(self, Self::Queuing | Self::Requeuing)
    }

    /// Returns true for statuses held by a runner (`preparing`, `running`).
    pub fn is_running(self) -> bool {
        matches!(self, Self::Preparing | Self::Running)
    }

    /// Returns true for terminal statuses (`failed`, `succeeded`, `cancelled`).
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Failed | Self::Succeeded | Self::Cancelled)
    }
}

string_enum! {
    /// Status of one attempt.
    AttemptStatus {
        Preparing => "preparing",
        Running => "running",
        Failed => "failed",
        Succeeded => "succeeded",
        Unresponsive => "unresponsive",
        Timeout => "timeout",
    }
}

impl AttemptStatus {
    /// Returns true for the statuses that can requeue a rollout when they are
    /// in its `retry_condition` (`failed`, `timeout`, `unresponsive`; see
    /// [`crate::lifecycle::rollout_status_from_attempt`]).
    pub fn can_be_retried(self) -> bool {
        matches!(self, Self::Failed | Self::Timeout | Self::Unresponsive)
    }
}

string_enum! {
    /// Status of a worker, derived from the attempts it holds.
    WorkerStatus {
        Idle => "idle",
        Busy => "busy",
        Unknown => "unknown",
        Lost => "lost",
    }
}

string_enum! {
    /// Where a worker's session stands in the store.
    SessionState {
        /// A server holds the session's stream and renews its lease.
        Open => "open",
        /// The stream ended; the attempts it owns wait for the worker until
        /// the grace period ends.
        Dropped => "dropped",
        /// Nothing is pending.
        Closed => "closed",
    }
}

string_enum! {
    /// Data split of a rollout.
    RolloutMode {
        Train => "train",
        Val => "val",
        Test => "test",
    }
}
