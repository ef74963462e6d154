"""A trainer's side of an agent-lightning 1.x run, against the server at
`--url`: it registers the model server, enqueues rollouts with its own ids
(one per sample and repeat, each naming the test agent and its question),
waits for them to finish, reads their raw and triplet events, and deletes
them. Prints a JSON summary of every completed rollout on its last line.

`--mode manager` runs agentlightning 1.0.2's own trainer code
(`AglRolloutManager.enqueue_and_wait_until_completed`, which polls every
rollout). `--mode loop` is a trainer loop written here that rides out a
server restart: it retries with backoff, and instead of polling it waits
on the terminal cursor (`GET /api/rollouts/terminal?wait=`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from typing import Any

import httpx

# agentlightning ships no type information.
from agentlightning.client import AgentLightningSyncClient  # type: ignore[import-untyped]
from agentlightning.schemas import Event, Rollout, RolloutCreate  # type: ignore[import-untyped]
from agentlightning.verl.agl_rollout_manager import AglRolloutManager  # type: ignore[import-untyped]

AGENT_CLASS = "agent.Agent"
ENV_MAP = {"QUESTION": "input.question"}
DEADLINE_SECONDS = 120.0


def log(message: str) -> None:
    print(f"trainer: {message}", file=sys.stderr, flush=True)


def run_manager(args: argparse.Namespace, questions: list[str]) -> list[dict[str, Any]]:
    manager = AglRolloutManager(
        agl_base_url=args.url,
        agl_key=args.key,
        model=args.model,
        step=0,
        train_rollout_n=args.n,
        rollout_timeout_seconds=DEADLINE_SECONDS,
        poll_interval_seconds=0.2,
        local_agent_class=AGENT_CLASS,
        local_env_map=ENV_MAP,
    )
    manager.register_model([args.model_server])
    completed = manager.enqueue_and_wait_until_completed({"question": questions}, is_train=True)
    manager.delete_model()
    return [
        {
            "rollout_id": rollout.rollout_id,
            "question": rollout.input["question"],
            "state": str(rollout.rollout_state),
            "reward": rollout.final_reward,
            "prompts": [triplet.prompt["token_ids"] for triplet in rollout.triplets],
            "responses": [triplet.response["token_ids"] for triplet in rollout.triplets],
            "raw_events": len(rollout.events),
        }
        for rollout in completed
    ]


class Client:
    """agentlightning's client with retries that outlast a server restart."""

    def __init__(self, url: str, key: str) -> None:
        self.http = AgentLightningSyncClient(base_url=url, key=key, timeout=60.0, max_retries=0)

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        deadline = time.monotonic() + DEADLINE_SECONDS
        delay = 0.05
        while True:
            try:
                response: httpx.Response = self.http.request(method, path, **kwargs)
            except httpx.TransportError as error:
                if time.monotonic() > deadline:
                    raise
                log(f"{method} {path}: {error}; retrying")
            else:
                if response.status_code < 500 or time.monotonic() > deadline:
                    response.raise_for_status()
                    return response
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def run_loop(args: argparse.Namespace, questions: list[str]) -> list[dict[str, Any]]:
    client = Client(args.url, args.key)
    endpoint = f"http://{args.model_server}/v1"
    client.call("POST", "/api/models", json=[{"model": args.model, "endpoint": endpoint}])
    cursor = int(
        client.call("GET", "/api/rollouts/terminal", params={"after": 0, "limit": 1}).json()["total_terminal"]
    )
    requests = [
        RolloutCreate(
            input={"question": question, "data_id": f"d{index}"},
            is_train=True,
            config={
                "timeout_seconds": int(DEADLINE_SECONDS),
                "local": {"agent_class": AGENT_CLASS, "env_map": ENV_MAP},
            },
            metadata={"sample_idx_in_batch": index},
            rollout_id=uuid.uuid4().hex,
        )
        for index, question in enumerate(questions)
        for _ in range(args.n)
    ]
    payload = [request.model_dump(mode="json", exclude_none=True) for request in requests]
    created = [
        Rollout.model_validate(item) for item in client.call("POST", "/api/rollouts", json=payload).json()
    ]
    assert [rollout.rollout_id for rollout in created] == [request.rollout_id for request in requests]
    pending = {rollout.rollout_id for rollout in created}
    log(f"created {len(pending)} rollouts")
    summary: list[dict[str, Any]] = []
    while pending:
        page = client.call("GET", "/api/rollouts/terminal", params={"after": cursor, "wait": 30}).json()
        cursor = int(page["next_after"])
        for item in page["items"]:
            rollout_id = item["rollout_id"]
            if rollout_id not in pending:
                continue
            detail = client.call("GET", f"/api/rollouts/{rollout_id}").json()
            rollout = Rollout.model_validate(detail["rollout"])
            raw = [
                Event.model_validate(e)
                for e in client.call("GET", f"/api/rollouts/{rollout_id}/events").json()
            ]
            triplets = [
                Event.model_validate(e)
                for e in client.call(
                    "GET",
                    f"/api/rollouts/{rollout_id}/events",
                    params={"format": "triplet"},
                ).json()
            ]
            requests_seen = [e.data for e in triplets if e.event_type == "model_request"]
            rewards = [e.data["value"] for e in triplets if e.event_type == "reward"]
            summary.append(
                {
                    "rollout_id": rollout_id,
                    "question": rollout.input["question"],
                    "state": str(rollout.status.state),
                    "reward": rewards[-1] if rewards else None,
                    "prompts": [data["prompt_token_ids"] for data in requests_seen],
                    "responses": [data["response_token_ids"] for data in requests_seen],
                    "raw_events": len(raw),
                }
            )
            client.call("DELETE", f"/api/rollouts/{rollout_id}")
            pending.discard(rollout_id)
            log(f"{rollout_id} {rollout.status.state}; {len(pending)} pending")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument(
        "--model-server",
        required=True,
        help="host:port of the OpenAI-compatible server",
    )
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--n", type=int, default=2, help="rollouts per sample")
    parser.add_argument("--mode", choices=["manager", "loop"], default="manager")
    args = parser.parse_args()
    questions = [f"question {index}" for index in range(args.samples)]
    summary = run_manager(args, questions) if args.mode == "manager" else run_loop(args, questions)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
