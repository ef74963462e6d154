"""Is the training learning? The training summary, the reward timeline, version comparison and the rollout query's
training filters, read through the client from a real server."""

from __future__ import annotations

import json
import secrets
import statistics
import time
import urllib.request

import pytest

from lightning_store import Client, InvalidArgument, NotFound, from_json, to_attributes
from lightning_store.local_server import LocalServer
from lightning_store.proto import types_pb2 as types
from lightning_store.values import (
    NO_TRAINING_ROWS_REASON,
    ROLLOUT_MODE,
    TIMELINE_RESOLUTION,
    RolloutModeName,
    to_timestamp,
)

# The rewards each task gets under each resources version, in train.
TRAIN_REWARDS = {1: {"a": 0.25, "b": 0.5}, 2: {"a": 1.0, "b": 0.25}}
VAL_REWARD = 0.75  # one val rollout, under version 1


def run(client: Client, resources_id: str, task: str, mode: RolloutModeName, reward: float | None) -> str:
    """Enqueues a rollout of `task`, runs it on a worker and ends it, rewarded when `reward` is given."""
    rollout = client.enqueue_rollout({"task": task}, mode=mode, resources_id=resources_id)
    claimed = client.dequeue_rollout(worker_id="Worker-0")
    assert claimed is not None
    assert claimed.rollout_id == rollout.rollout_id
    if reward is not None:
        attributes = {"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": reward}
        client.add_span(span(claimed, "agentlightning.annotation", attributes))
    client.update_attempt(claimed.rollout_id, status="succeeded")
    return rollout.rollout_id


def span(
    claimed: types.Rollout, name: str, attributes: dict[str, object], times: tuple[float, float] | None = None
) -> types.Span:
    """A span of the claimed rollout's attempt, with its start and end time when given."""
    start, end = (to_timestamp(moment) for moment in times) if times is not None else (None, None)
    return types.Span(
        rollout_id=claimed.rollout_id,
        attempt_id=claimed.attempt.attempt_id,
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        span_id=secrets.token_hex(8),
        name=name,
        attributes=to_attributes(attributes),
        start_time=start,
        end_time=end,
    )


@pytest.fixture
def trained(client: Client) -> dict[str, list[str]]:
    """A run of two resources versions: its rollout ids by version and mode ("1/train"), and one unrewarded."""
    ids: dict[str, list[str]] = {}
    for version, rewards in TRAIN_REWARDS.items():
        resources_id = client.add_resources({"prompt": f"version {version}"}).resources_id
        for task, reward in rewards.items():
            ids.setdefault(f"{version}/train", []).append(run(client, resources_id, task, "train", reward))
        if version == 1:
            ids["1/val"] = [run(client, resources_id, "a", "val", VAL_REWARD)]
            ids["unrewarded"] = [run(client, resources_id, "c", "train", None)]
    return ids


def test_the_summary_counts_each_version_and_mode(client: Client, trained: dict[str, list[str]]) -> None:
    rows = client.training_summary()
    summarised = [(row.version, ROLLOUT_MODE.name(row.mode), row.rollouts, row.rewarded) for row in rows]
    assert summarised == [(1, "train", 3, 2), (1, "val", 1, 1), (2, "train", 2, 2)]
    for row in rows:
        mode = ROLLOUT_MODE.require(row.mode)
        rewards = list(TRAIN_REWARDS[row.version].values()) if mode == "train" else [VAL_REWARD]
        assert row.reward_mean == pytest.approx(statistics.fmean(rewards))
        assert row.succeeded == row.rollouts
        assert row.resources_id
        assert not row.HasField("model_version")
        # How long they took, from creation to end: each counted once, its percentiles in order.
        durations = row.duration_seconds
        assert durations.count == row.rollouts
        assert 0 <= durations.p10 <= durations.p50 <= durations.p90
        assert durations.mean >= 0
        # Their agent made no model call: no tokens, no latency.
        for calls in (row.prompt_tokens, row.response_tokens, row.model_call_latency_seconds):
            assert calls.count == 0
            assert not calls.HasField("mean")
            assert not calls.HasField("p50")
    assert [row.version for row in client.training_summary(mode="train", version_from=2)] == [2]
    assert [ROLLOUT_MODE.name(row.mode) for row in client.training_summary(mode="val")] == ["val"]
    assert client.training_summary(version_from=3) == []


def test_the_summary_counts_model_calls_tokens_and_latency(client: Client) -> None:
    """A rollout's model call spans (AgentOps' usage attributes) give its tokens and its calls' latency."""
    resources_id = client.add_resources({"prompt": "tokens"}).resources_id
    client.enqueue_rollout({"task": "t"}, mode="val", resources_id=resources_id)
    claimed = client.dequeue_rollout(worker_id="Worker-0")
    assert claimed is not None
    calls = [(120, 30, 0.25), (380, 50, 0.75)]  # prompt tokens, response tokens, seconds
    start = float(int(time.time()) - 60)  # whole seconds: the calls end exactly 0.25 s and 0.75 s later
    for prompt, response, seconds in calls:
        usage: dict[str, object] = {"gen_ai.usage.prompt_tokens": prompt, "gen_ai.usage.completion_tokens": response}
        client.add_span(span(claimed, "openai.chat.completion", usage, (start, start + seconds)))
    client.update_attempt(claimed.rollout_id, status="succeeded")
    [row] = client.training_summary(mode="val")
    # One rollout's tokens, summed over its calls: the mean is exact, the percentiles read their bin's centre.
    assert (row.prompt_tokens.count, row.prompt_tokens.mean) == (1, 500)
    assert (row.response_tokens.count, row.response_tokens.mean) == (1, 80)
    assert row.prompt_tokens.p50 == pytest.approx(500, rel=0.07)
    assert row.response_tokens.p50 == pytest.approx(80, rel=0.07)
    # Two calls, counted by call: 0.5 s on average, exactly; each placed at that mean for the percentiles.
    latency = row.model_call_latency_seconds
    assert (latency.count, latency.mean) == (2, 0.5)
    assert latency.p10 == latency.p50 == latency.p90 == pytest.approx(0.5, rel=0.07)


def test_the_timeline_holds_every_ended_rollout(client: Client, trained: dict[str, list[str]]) -> None:
    timeline = client.reward_timeline(mode="train")
    assert TIMELINE_RESOLUTION.name(timeline.resolution) == "minute"  # the run lasted seconds
    assert sum(period.rollouts for period in timeline.periods) == 5
    assert sum(period.rewarded for period in timeline.periods) == 4
    hourly = client.reward_timeline(resolution="hour", end_time=time.time() - 7200)
    assert TIMELINE_RESOLUTION.name(hourly.resolution) == "hour"
    assert list(hourly.periods) == []  # every rollout ended after the window
    with pytest.raises(InvalidArgument):
        client.reward_timeline(start_time=time.time(), end_time=time.time() - 60)


def test_two_versions_compare_task_by_task(client: Client, trained: dict[str, list[str]]) -> None:
    compared = client.compare_versions("train", version_before=1, version_after=2)
    assert (compared.before.summary.rollouts, compared.after.summary.rollouts) == (3, 2)
    assert [from_json(task.input_json) for task in compared.tasks] == [{"task": "a"}, {"task": "b"}]
    assert [task.change for task in compared.tasks] == pytest.approx([0.75, -0.25])
    assert not compared.tasks_cut
    assert len(client.compare_versions("train", version_before=1, version_after=2, max_tasks=1).tasks) == 1
    with pytest.raises(NotFound):
        client.compare_versions("train", version_before=1, version_after=9)
    with pytest.raises(ValueError, match="name the before version once"):
        client.compare_versions("train", version_before=1, model_version_before=1, version_after=2)
    with pytest.raises(ValueError, match="name the after version once"):
        client.compare_versions("train", version_before=1)


def test_rollouts_filter_and_sort_by_what_training_reads(client: Client, trained: dict[str, list[str]]) -> None:
    def ids(**conditions: object) -> list[str]:
        return [rollout.rollout_id for rollout in client.query_rollouts(**conditions)]  # type: ignore[arg-type]

    version_1 = trained["1/train"] + trained["1/val"] + trained["unrewarded"]
    resources_1 = client.get_rollout(version_1[0]).resources_id
    assert sorted(ids(resources_id=resources_1)) == sorted(version_1)
    assert ids(mode_in=["val"]) == trained["1/val"]
    assert ids(mode_in=[None]) == []  # every rollout has a mode
    assert sorted(ids(reward_min=0.5, reward_max=0.75)) == sorted([trained["1/train"][1], trained["1/val"][0]])
    by_reward = ids(mode_in=["train"], sort_by="reward", sort_order="desc")
    assert by_reward[0] == trained["2/train"][0]
    assert by_reward[-1] == trained["unrewarded"][0]
    assert len(ids(worker_id="Worker-0", end_time_from=time.time() - 600)) == 6
    assert ids(end_time_until=time.time() - 600) == []
    assert len(ids(start_time_from=time.time() - 600, status_in=["succeeded"])) == 6
    with pytest.raises(ValueError, match="mode_in"):
        client.query_rollouts(mode_in=[])


def http(server: LocalServer, method: str, path: str, body: object) -> None:
    """Sends agent-lightning 1.x's HTTP API a JSON body, which it must accept."""
    request = urllib.request.Request(
        f"http://{server.address}{path}",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        method=method,
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status in (200, 201)


def test_a_1x_rollout_is_found_by_the_model_version_of_its_first_call(client: Client, server: LocalServer) -> None:
    def post(path: str, body: object) -> None:
        http(server, "POST", path, body)

    post("/api/rollouts", [{"rollout_id": "first", "input": {"task": "a"}}, {"rollout_id": "other", "input": {}}])
    post("/api/rollouts/first/attempt/0/events", {"event_type": "model_request", "data": {"model_version": 3}})
    post("/api/rollouts/first/attempt/0/events", {"event_type": "model_request", "data": {"model_version": 4}})
    post("/api/rollouts/other/attempt/0/events", {"event_type": "model_request", "data": {"model_version": 4}})
    assert [rollout.rollout_id for rollout in client.query_rollouts(model_version=3)] == ["first"]
    assert [rollout.rollout_id for rollout in client.query_rollouts(model_version=4)] == ["other"]


def test_1x_rollouts_without_training_rows_are_counted_by_reason_and_found(client: Client, server: LocalServer) -> None:
    def call(response_token_ids: list[int]) -> dict[str, object]:
        return {
            "event_type": "model_request",
            "data": {
                "model_version": 5,
                "response": {"prompt_token_ids": [1], "choices": [{"token_ids": response_token_ids}]},
            },
        }

    http(server, "POST", "/api/rollouts", [{"rollout_id": "rows", "input": {}}, {"rollout_id": "no-ids", "input": {}}])
    for rollout_id, token_ids in [("rows", [2]), ("no-ids", [])]:
        http(server, "PATCH", f"/api/rollouts/{rollout_id}", {"status": {"state": "running"}})
        http(server, "POST", f"/api/rollouts/{rollout_id}/attempt/0/events", call(token_ids))
        http(server, "PATCH", f"/api/rollouts/{rollout_id}", {"status": {"state": "succeeded"}})
    [version] = [row for row in client.training_summary(mode="train") if row.model_version == 5]
    assert (version.rollouts, version.training_rows, version.rollouts_without_rows) == (2, 1, 1)
    reasons = {
        NO_TRAINING_ROWS_REASON.require(count.reason): count.rollouts for count in version.without_rows_by_reason
    }
    assert reasons == {"no_token_ids": 1, "no_reward": 1}
    for reason in ("any", "no_token_ids", "no_reward"):
        found = client.query_rollouts(without_training_rows=reason)
        assert [rollout.rollout_id for rollout in found] == ["no-ids"], reason
    assert list(client.query_rollouts(without_training_rows="failed_calls")) == []
