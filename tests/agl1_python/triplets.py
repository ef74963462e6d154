"""Agent-lightning 1.0.2's own training rows for rollouts' events.

Reads a JSON list of cases from stdin, each {"rollout_id", "state",
"events": [raw events as the store keeps them]}, and writes the list of
what upstream's trainer builds from each: the server's triplet view
(`agentlightning.server.routes.events`) read by the rollout manager's
`_build_completed_rollout`, with its final reward and triplets.
"""

import json
import sys

from agentlightning.schemas import Event, Rollout
from agentlightning.server.routes.events import (
    _dedupe_model_requests_by_prompt_token_ids,
    _to_triplet_format,
    _without_routed_experts,
)
from agentlightning.verl.agl_rollout_manager import (
    AglRolloutManagerBase,
    EnqueuedRollout,
)


def completed(case: dict) -> dict:
    """What the trainer builds from one rollout's events."""
    raw = [Event.model_validate(event) for event in case["events"]]
    # GET /events?format=triplet, and the raw GET without routing tensors.
    triplet_events = _dedupe_model_requests_by_prompt_token_ids([_to_triplet_format(e) for e in raw])
    raw_events = [_without_routed_experts(e) for e in raw]
    manager = AglRolloutManagerBase.__new__(AglRolloutManagerBase)
    manager._fetch_rollout_events = lambda rollout_id: (raw_events, triplet_events)
    rollout = Rollout.model_validate(
        {
            "rollout_id": case["rollout_id"],
            "input": {},
            "config": {},
            "status": {"state": case["state"], "created_at": 0.0, "updated_at": 1.0},
        }
    )
    enqueued = EnqueuedRollout(
        data_id="d",
        rollout_id=case["rollout_id"],
        step=0,
        sample_idx_in_step=0,
        enqueue_time=0.0,
    )
    result = manager._build_completed_rollout(enqueued, rollout)
    return {
        "final_reward": result.final_reward,
        "triplets": [triplet.model_dump(mode="json") for triplet in result.triplets or []],
    }


if __name__ == "__main__":
    json.dump([completed(case) for case in json.load(sys.stdin)], sys.stdout)
