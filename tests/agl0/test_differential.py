"""The same HTTP requests against agent-lightning's own `agl store` and against
lightning-store, the answers compared byte for byte: status, field order,
floats, nulls, error bodies. Generated ids and times are the only parts
replaced before comparing (each side's ids map to names in order of first
appearance). `AGL_STORE_URL` names a fresh `agl store` started for this run.

The steps cover every route on the paths where both stores answer the
same; deliberate differences (a 4xx instead of upstream's 500 for an unknown
id, `null` instead of its 500 for an unknown rollout) are asserted elsewhere.
It runs against the memory backend: the HTTP layer is the same for all.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from helpers import http

IDS = re.compile(r"\b(ro|at|rs)-[0-9a-f]{8,12}\b")
TIMES = re.compile(
    r'"(start_time|end_time|last_heartbeat_time|last_dequeue_time|last_busy_time|last_idle_time'
    r'|create_time|update_time)":-?[0-9][0-9.e+-]*'
)


@dataclass
class Step:
    """One request; `{name}` in the path or body is a value captured earlier."""

    method: str
    path: str
    body: Any = None
    raw: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # name -> dotted path into the JSON answer ("0.rollout_id", "attempt.attempt_id")
    capture: dict[str, str] = field(default_factory=dict)
    # False for steps whose answer depends on what other tests left behind.
    compare: bool = True


def _fill(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        return value.format(**names) if "{" in value and "}" in value else value
    if isinstance(value, list):
        return [_fill(v, names) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, names) for k, v in value.items()}
    return value


def _dig(value: Any, path: str) -> str:
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return str(value)


def _normalise(text: str, ids: dict[str, str]) -> str:
    def name(match: re.Match[str]) -> str:
        return ids.setdefault(match.group(0), f"<{match.group(1)}{len(ids)}>")

    return TIMES.sub(r'"\1":<time>', IDS.sub(name, text))


def _transcript(url: str, steps: list[Step]) -> list[str]:
    names: dict[str, str] = {}
    ids: dict[str, str] = {}
    lines = []
    for step in steps:
        path = step.path.format(**names)
        answer = http(
            url,
            step.method,
            path,
            json_body=_fill(step.body, names),
            body=step.raw,
            headers=step.headers,
        )
        for key, where in step.capture.items():
            names[key] = _dig(answer.json(), where)
        if step.compare:
            lines.append(f"{step.method} {step.path} -> {answer.status} {_normalise(answer.text, ids)}")
    return lines


def _span(sequence_id: int, name: str, **changes: Any) -> dict[str, Any]:
    span: dict[str, Any] = {
        "rollout_id": "{r1}",
        "attempt_id": "{a1}",
        "sequence_id": sequence_id,
        "trace_id": f"{abs(sequence_id):032x}",
        "span_id": f"{abs(sequence_id):016x}",
        "parent_id": None,
        "name": name,
        "status": {"status_code": "OK"},
        "attributes": {},
        "events": [],
        "links": [],
        "start_time": 1700000000.25,
        "end_time": None,
        "context": None,
        "parent": None,
        "resource": {"attributes": {"service.name": "svc"}, "schema_url": ""},
    }
    span.update(changes)
    return span


# Claims whatever other tests left queued, so that the dequeues below see
# only this scenario's rollouts.
DRAIN = Step("POST", "/v1/agl/queues/rollouts/dequeue", {"limit": 100000}, compare=False)

STEPS = [
    DRAIN,
    Step("GET", "/v1/agl/health"),
    # Rollouts: enqueue, start, dequeue, read.
    Step(
        "POST",
        "/v1/agl/queues/rollouts/enqueue",
        {
            "rollouts": [
                {"input": {"q": 1.0, "big": 1e16, "small": 1e-7, "n": [1, "x", None]}, "mode": "train"}
            ]
        },
        capture={"r1": "0.rollout_id"},
    ),
    Step(
        "POST",
        "/v1/agl/queues/rollouts/enqueue",
        {
            "rollouts": [
                {
                    "input": "two",
                    "config": {"timeout_seconds": 30, "max_attempts": 2, "retry_condition": ["failed"]},
                },
                {"input": None, "metadata": {"k": "v"}, "resources_id": "pinned"},
            ]
        },
        capture={"r2": "0.rollout_id", "r3": "1.rollout_id"},
    ),
    Step("POST", "/v1/agl/queues/rollouts/enqueue", {"rollouts": []}),
    Step(
        "POST",
        "/v1/agl/queues/rollouts/dequeue",
        {"worker_id": "DiffWorker-0"},
        capture={"a1": "0.attempt.attempt_id"},
    ),
    Step("POST", "/v1/agl/queues/rollouts/dequeue", {"limit": 0, "worker_id": "DiffWorker-0"}),
    Step("POST", "/v1/agl/rollouts", {"input": [1, 2], "worker_id": "DiffWorker 1", "metadata": None}),
    Step("GET", "/v1/agl/rollouts/{r1}"),
    Step("GET", "/v1/agl/rollouts/{r2}"),
    Step("POST", "/v1/agl/rollouts/search", {"rollout_id_in": ["{r1}", "{r2}", "{r3}"]}),
    Step(
        "POST",
        "/v1/agl/rollouts/search",
        {
            "rollout_id_in": ["{r1}", "{r2}", "{r3}"],
            "status_in": ["queuing"],
            "sort_by": "start_time",
            "sort_order": "desc",
        },
    ),
    Step(
        "POST", "/v1/agl/rollouts/search", {"rollout_id_in": ["{r2}"], "status_in": [], "filter_logic": "or"}
    ),
    Step("POST", "/v1/agl/rollouts/search", {"rollout_id_in": ["{r1}", "{r2}"], "limit": 1, "offset": 1}),
    Step("GET", "/v1/agl/rollouts?rollout_id_in={r1}&rollout_id_in={r3}&status_in=preparing&mode_in=train"),
    Step("GET", "/v1/agl/rollouts?limit=0"),
    Step("GET", "/v1/agl/rollouts?sort_by=nope"),
    Step("GET", "/v1/agl/rollouts?limit=abc&status_in=bogus&sort_order=up"),
    # Updates.
    Step("POST", "/v1/agl/rollouts/{r3}", {"mode": "val", "metadata": None, "input": {"new": True}}),
    Step("POST", "/v1/agl/rollouts/{r3}", {"status": None}),
    Step("POST", "/v1/agl/rollouts/{r3}", {"config": None}),
    Step("POST", "/v1/agl/rollouts/{r3}", {"config": {"max_attempts": 0}}),
    Step("POST", "/v1/agl/rollouts/{r1}/attempts/{a1}", {"worker_id": "", "metadata": {"m": 1}}),
    Step("POST", "/v1/agl/rollouts/{r1}/attempts/latest", {"status": None}),
    Step("POST", "/v1/agl/rollouts/{r1}/attempts/latest", {"last_heartbeat_time": 1700000000.5}),
    Step("GET", "/v1/agl/rollouts/{r1}/attempts"),
    Step("POST", "/v1/agl/rollouts/{r1}/attempts/search", {"sort_by": "sequence_id", "sort_order": "desc"}),
    Step("GET", "/v1/agl/rollouts/{r1}/attempts/latest"),
    Step("GET", "/v1/agl/rollouts/ro-unknown/attempts/latest"),
    Step("GET", "/v1/agl/rollouts/ro-unknown/attempts"),
    # Spans.
    Step("POST", "/v1/agl/spans/next", {"rollout_id": "{r1}", "attempt_id": "{a1}"}),
    Step("POST", "/v1/agl/spans/next", {"rollout_id": "ro-nowhere", "attempt_id": "at-nowhere"}),
    Step(
        "POST",
        "/v1/agl/spans",
        _span(
            5,
            "llm.call",
            trace_id="Opaque Trace",
            status={"status_code": "ERROR", "description": "boom", "extra_status": 1},
            attributes={
                "i": 1,
                "f": 2.5,
                "s": "x",
                "b": True,
                "ints": [1, 2],
                "mixed": [1, 2.5],
                "bools": [True, 1],
            },
            events=[{"name": "ev", "attributes": {"k": "v"}, "timestamp": 1700000000.125, "ev_extra": [1]}],
            links=[
                {
                    "context": {
                        "trace_id": "t",
                        "span_id": "s",
                        "is_remote": False,
                        "trace_state": {"a": "1"},
                    },
                    "attributes": {},
                },
                {
                    "context": {
                        "trace_id": "t2",
                        "span_id": "s2",
                        "is_remote": 1,
                        "trace_state": {},
                        "cx": "y",
                    }
                },
            ],
            context={
                "trace_id": "Opaque Trace",
                "span_id": "s",
                "is_remote": False,
                "trace_state": {"k": "v"},
            },
            custom={"nested": [1, {"a": None}]},
        ),
    ),
    Step("POST", "/v1/agl/spans", _span(5, "duplicate", trace_id="Opaque Trace")),
    Step("POST", "/v1/agl/spans", _span(-2, "second", parent_id="0000000000000005")),
    Step("POST", "/v1/agl/spans", {"rollout_id": "{r1}"}),
    Step("POST", "/v1/agl/spans", _span(7, "bad", attributes={"k": None, "j": [1, "a"]})),
    Step("GET", "/v1/agl/rollouts/{r1}"),
    Step("POST", "/v1/agl/spans/search", {"rollout_id": "{r1}"}),
    Step(
        "POST", "/v1/agl/spans/search", {"rollout_id": "{r1}", "attempt_id": "latest", "name_contains": "sec"}
    ),
    Step("POST", "/v1/agl/spans/search", {"rollout_id": "{r1}", "filter_logic": "or"}),
    Step(
        "POST",
        "/v1/agl/spans/search",
        {"rollout_id": "{r1}", "trace_id": "Opaque Trace", "name": "second", "filter_logic": "or"},
    ),
    Step("GET", "/v1/agl/spans?rollout_id={r1}&sort_by=sequence_id&sort_order=desc&limit=1"),
    Step("GET", "/v1/agl/spans?rollout_id={r1}&span_id_contains=0005&parent_id_contains=05&filter_logic=or"),
    Step("GET", "/v1/agl/spans"),
    Step("GET", "/v1/agl/spans?rollout_id={r1}&sort_by=attributez"),
    # Attempt results drive the rollout.
    Step("POST", "/v1/agl/rollouts/{r1}/attempts/latest", {"status": "succeeded"}),
    Step("GET", "/v1/agl/rollouts/{r1}"),
    Step(
        "POST",
        "/v1/agl/queues/rollouts/dequeue",
        {"worker_id": "DiffWorker-0"},
        capture={"a2": "0.attempt.attempt_id"},
    ),
    Step("POST", "/v1/agl/rollouts/{r2}/attempts/{a2}", {"status": "failed"}),
    Step("GET", "/v1/agl/rollouts/{r2}"),
    Step("POST", "/v1/agl/rollouts/{r2}/attempts", None),
    Step("POST", "/v1/agl/rollouts/{r2}/attempts", {"worker_id": "DiffWorker-2"}),
    Step("POST", "/v1/agl/waits/rollouts", {"rollout_ids": ["{r1}", "{r2}", "ro-unknown"], "timeout": 0}),
    Step("POST", "/v1/agl/waits/rollouts", {"rollout_ids": "{r1}"}),
    # Resources.
    Step(
        "POST",
        "/v1/agl/resources",
        {"main": {"resource_type": "llm", "endpoint": "http://e/v1", "model": "m", "extra": 1}},
        capture={"rs1": "resources_id"},
    ),
    Step("POST", "/v1/agl/resources", {"a": {"resource_type": "llm"}, "b": {"endpoint": "x"}, "c": 1}),
    Step(
        "POST",
        "/v1/agl/resources/diff-resources",
        {"p": {"resource_type": "prompt_template", "template": "t", "engine": "jinja"}},
    ),
    Step(
        "POST",
        "/v1/agl/resources/diff-resources",
        {"p": {"resource_type": "proxy_llm", "endpoint": "e", "model": "m"}},
    ),
    Step("GET", "/v1/agl/resources/{rs1}"),
    Step("GET", "/v1/agl/resources/latest"),
    Step("GET", "/v1/agl/resources/rs-unknown"),
    Step("GET", "/v1/agl/resources?resources_id_contains=diff-&sort_by=version&sort_order=desc"),
    Step("POST", "/v1/agl/queues/rollouts/enqueue", {"rollouts": [{"input": "after resources"}]}),
    # Workers.
    Step(
        "GET", "/v1/agl/workers?status_in=idle&status_in=busy&worker_id_contains=DiffWorker&sort_by=worker_id"
    ),
    Step("POST", "/v1/agl/workers/search", {"worker_id_contains": "DiffWorker", "sort_by": "worker_id"}),
    Step("POST", "/v1/agl/workers/DiffWorker-9", None),
    Step("POST", "/v1/agl/workers/DiffWorker-9", {"heartbeat_stats": {"cpu": 0.25}}),
    Step("POST", "/v1/agl/workers/DiffWorker-9", {"heartbeat_stats": None}),
    Step("GET", "/v1/agl/workers/DiffWorker-9"),
    Step("GET", "/v1/agl/workers/DiffWorker%201"),
    Step("GET", "/v1/agl/workers/nobody"),
    # Malformed requests and unknown routes.
    Step("POST", "/v1/agl/queues/rollouts/enqueue", {}),
    Step("POST", "/v1/agl/queues/rollouts/enqueue", {"rollouts": [1]}),
    Step(
        "POST",
        "/v1/agl/queues/rollouts/enqueue",
        {"rollouts": [{"input": 1, "mode": "bad", "metadata": [1]}]},
    ),
    Step(
        "POST", "/v1/agl/queues/rollouts/enqueue", raw=b"{bad", headers={"Content-Type": "application/json"}
    ),
    Step("POST", "/v1/agl/queues/rollouts/enqueue", raw=b'{"rollouts": []}'),
    Step("POST", "/v1/agl/queues/rollouts/dequeue", [1]),
    Step("POST", "/v1/agl/rollouts/{r1}", None),
    Step("GET", "/v1/agl/no-such-route"),
    Step("DELETE", "/v1/agl/rollouts"),
    Step("POST", "/v1/metrics", raw=b""),
    DRAIN,
]


def test_answers_match_agl_store_byte_for_byte(store_urls: dict[str, str]) -> None:
    upstream = os.environ.get("AGL_STORE_URL")
    if not upstream:
        pytest.fail(
            "AGL_STORE_URL is not set: run these tests through `cargo test --test integration agl0::`"
        )
    theirs = _transcript(upstream.rstrip("/"), STEPS)
    ours = _transcript(store_urls["memory"], STEPS)
    mismatches = [f"upstream: {t}\n    ours: {o}" for t, o in zip(theirs, ours, strict=True) if t != o]
    assert not mismatches, "\n".join(mismatches)
