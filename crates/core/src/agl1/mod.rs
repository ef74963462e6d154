//! agent-lightning 1.x's server model, mapped onto the store's one model.
//!
//! A 1.x rollout *is* a rollout of ours ([`Agl1Rollout`]): its four states
//! are views of the core's statuses ([`Agl1State::of`]), its PATCH
//! transitions run the core's lifecycle operations (see
//! [`crate::engine`]'s 1.x operations), and only the fields 1.x has
//! and the core has not ([`Agl1Fields`]) are kept beside it. The 1.x
//! records that have no core counterpart are its events ([`Agl1Event`],
//! append-only per rollout and attempt), the model servers of the gateway
//! ([`ModelServer`]), the gateway's pause ([`Pause`]) and the presence of
//! each server that runs the gateway ([`Replica`]).
//!
//! Nothing here does I/O; [`events`] holds the event views (triplets),
//! [`gateway`] the gateway's rules and [`model_call`] the JSON of a call
//! through it.

pub mod cache;
pub mod diagnosis;
pub mod events;
pub mod gateway;
pub mod model_call;
pub mod records;
pub mod versioned;

/// An `Idempotency-Key` of an event POST, scoped to its rollout and
/// attempt: the digest of its event type and data.
pub use self::records::{
    Agl1Event, Agl1Fields, Agl1Rollout, Agl1RolloutDetail, Agl1State, Completion, CompletionPage,
    DEFAULT_ATTEMPT_ID, JsonText, ModelServer, NewAgl1Event, NewAgl1Rollout, Pause, Replica,
    StatusPatch, StoredEvent, is_train, mode_of, not_found, transition_error, truthy,
};
pub use super::idempotency::IdempotencyKey;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RolloutMode, RolloutStatus};

    #[test]
    fn states_map_every_core_status() {
        for &status in RolloutStatus::ALL {
            let state = Agl1State::of(status);
            assert!(state.statuses().contains(&status), "{status}");
            assert_eq!(state.is_terminal(), status.is_finished(), "{status}");
        }
    }

    #[test]
    fn transitions_follow_upstream() {
        use Agl1State::*;
        let allowed = [
            (Queuing, Running),
            (Queuing, Failed),
            (Running, Succeeded),
            (Running, Failed),
        ];
        for from in Agl1State::ALL {
            for to in Agl1State::ALL {
                assert_eq!(
                    from.allows(to),
                    allowed.contains(&(from, to)),
                    "{from}->{to}"
                );
            }
        }
        assert_eq!(
            transition_error("r", Succeeded, None),
            "Rollout r: cannot transition succeeded -> None"
        );
    }

    #[test]
    fn is_train_maps_to_modes() {
        assert!(is_train(None));
        assert!(is_train(Some(mode_of(true))));
        assert!(!is_train(Some(mode_of(false))));
        assert!(!is_train(Some(RolloutMode::Test)));
    }
}
