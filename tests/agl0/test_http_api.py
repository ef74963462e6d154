"""The HTTP API where lightning-store deliberately answers better than
agent-lightning's server (the differential test covers where both agree):
`null` for an unknown rollout where upstream fails with a 500, 4xx with
upstream's message where it answers 500 for a client's mistake, and no
partial write on bad input."""

from __future__ import annotations

from typing import Any

from helpers import http

AGL = "/v1/agl"


def _stats(url: str) -> dict[str, Any]:
    answer = http(url, "GET", f"{AGL}/statistics")
    assert answer.status == 200
    stats: dict[str, Any] = answer.json()
    return stats


def test_unknown_rollouts_are_null_and_client_mistakes_are_4xx(store_url: str) -> None:
    unknown = http(store_url, "GET", f"{AGL}/rollouts/ro-nope")
    assert (unknown.status, unknown.text) == (200, "null")
    for method, path, body, status, detail in [
        (
            "POST",
            "/rollouts/ro-nope",
            {"status": "running"},
            404,
            "Item does not exist with primary key(s): rollout_id='ro-nope'",
        ),
        ("POST", "/rollouts/ro-nope/attempts", None, 404, "Rollout ro-nope not found"),
        (
            "POST",
            "/rollouts/ro-nope/attempts/latest",
            {"status": "running"},
            404,
            "Rollout ro-nope not found",
        ),
    ]:
        answer = http(store_url, method, AGL + path, json_body=body)
        assert (answer.status, answer.json()) == (status, {"detail": detail}), path
    started = http(store_url, "POST", f"{AGL}/rollouts", json_body={"input": 1}).json()
    no_attempt = http(
        store_url,
        "POST",
        f"{AGL}/rollouts/{started['rollout_id']}/attempts/at-nope",
        json_body={"status": "running"},
    )
    assert no_attempt.status == 404
    assert no_attempt.json() == {"detail": f"Attempt at-nope not found for rollout {started['rollout_id']}"}


def test_bad_input_writes_nothing(store_url: str) -> None:
    before = _stats(store_url)
    span_for_unknown_rollout = {
        "rollout_id": "ro-nope",
        "attempt_id": "at-nope",
        "sequence_id": 1,
        "trace_id": "t",
        "span_id": "s",
        "parent_id": None,
        "name": "n",
        "status": {"status_code": "OK"},
        "attributes": {},
        "events": [],
        "links": [],
        "start_time": None,
        "end_time": None,
        "context": None,
        "parent": None,
        "resource": {"attributes": {}, "schema_url": ""},
    }
    for path, body, status in [
        ("/queues/rollouts/enqueue", {"rollouts": [{"input": 1}, {"input": 2, "mode": "bad"}]}, 422),
        ("/rollouts", {"input": 1, "config": {"max_attempts": 0}}, 422),
        ("/resources", {"ok": {"resource_type": "llm", "endpoint": "e", "model": "m"}, "bad": 1}, 422),
        ("/spans", span_for_unknown_rollout, 404),
        ("/workers/w", {"heartbeat_stats": None}, 400),
    ]:
        answer = http(store_url, "POST", AGL + path, json_body=body)
        assert answer.status == status, (path, answer.text)
    after = _stats(store_url)
    for key in ("total_rollouts", "total_attempts", "total_spans", "total_resources", "total_workers"):
        assert after[key] == before[key], key


def test_statistics_and_the_dashboard_reads(store_url: str) -> None:
    stats = _stats(store_url)
    assert list(stats)[:8] == [
        "name",
        "total_rollouts",
        "total_attempts",
        "total_spans",
        "total_resources",
        "total_workers",
        "uptime",
        "total_span_bytes",
    ]
    assert stats["name"] in {"memory", "sqlite", "postgres"}
    # What the dashboard's pages request, with the parameters it sends.
    for path in [
        "/rollouts?limit=20&offset=0&sort_by=start_time&sort_order=desc&status_in=running&status_in=failed"
        "&mode_in=train&rollout_id_contains=ro-",
        "/spans?rollout_id=ro-x&attempt_id=latest&name_contains=a&trace_id_contains=b&filter_logic=or&limit=50",
        "/resources?limit=10&sort_by=update_time&sort_order=desc&resources_id_contains=rs-",
        "/workers?status_in=busy&status_in=idle&worker_id_contains=Worker&sort_by=last_heartbeat_time",
        "/health",
    ]:
        answer = http(store_url, "GET", AGL + path)
        assert answer.status == 200, (path, answer.text)
